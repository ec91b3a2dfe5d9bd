// The GPU kernels driven from host tensors, for the shared harness and the
// CLI: upload (converting to the kernel's dtype), poison the outputs, launch,
// check every CUDA call, download. `kernel` is "standard", "fa1_minimal" or "fa2".
#pragma once
#include <string>

#include "flashlab/problem.hpp"
#include "flashlab/tensor.hpp"

namespace flashlab::gpu {

struct HostForward {
  Tensor o, lse;
};

// "" when `kernel` can run `p` here, else why not (starting "skipped: " when no device is present).
std::string unsupported(const std::string& kernel, const Problem& p);
struct HostBackward {
  Tensor dq, dk, dv;
};

HostForward run_forward(const std::string& kernel, const Problem& p, const Tensor& q, const Tensor& k,
                        const Tensor& v);
// The backward of `kernel` ("fa2") from the forward's o and lse; `deterministic` computes dQ without atomics.
HostBackward run_backward(const std::string& kernel, const Problem& p, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& o, const Tensor& lse, const Tensor& d_o, bool deterministic);

}  // namespace flashlab::gpu
