// The registry of attention implementations and the one rule they are
// checked by. Every implementation, CPU or GPU, has the same two entry
// points; adding one is one entry in implementations.cpp.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "flashlab/problem.hpp"
#include "flashlab/tensor.hpp"

namespace flashlab::harness {

struct ForwardOut {
  Tensor o, lse;
};
struct BackwardOut {
  Tensor dq, dk, dv;
};

struct Implementation {
  std::string name;         // what --impl takes: reference, tiled-fa1, tiled-fa2, gpu-...
  std::string description;  // one line
  bool has_backward = true;
  bool needs_gpu = false;
  std::function<ForwardOut(const Problem&, const Tensor& q, const Tensor& k, const Tensor& v)> forward;
  std::function<BackwardOut(const Problem&, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                            const Tensor& lse, const Tensor& d_o)>
      backward;
  // "" when this implementation can run the problem here, else why not
  // (e.g. "skipped: no CUDA device", "head_dim 59 unsupported").
  std::function<std::string(const Problem&)> unsupported;
  // The same for the backward where it can refuse more than the forward (null: as `unsupported`).
  std::function<std::string(const Problem&)> backward_unsupported = nullptr;
  // An implementation that rounds its inputs itself (gpu-fa3-fp8: e4m3 with a descale a tensor) is
  // judged on the values it computes on: `quantized` gives them for Q, K and V, and check() takes the
  // oracle and the baseline on them, the baseline in reference::Precision::fp8 (null: the inputs as given).
  std::function<Tensor(const Tensor&)> quantized = nullptr;
};

const std::vector<Implementation>& implementations();
const Implementation& find_implementation(const std::string& name);  // throws Error listing the names
std::string implementation_names();                                 // "reference, tiled-fa1, ..."

}  // namespace flashlab::harness
