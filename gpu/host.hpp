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
HostForward run_forward(const std::string& kernel, const Problem& p, const Tensor& q, const Tensor& k,
                        const Tensor& v);

}  // namespace flashlab::gpu
