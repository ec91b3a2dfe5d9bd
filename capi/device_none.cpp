// Built without CUDA: the GPU kernels' names are known, and calling one says why it cannot run.
#include "api.hpp"
#include "flashlab/error.hpp"

namespace flashlab::capi {

bool built_with_cuda() { return false; }

bool is_device_kernel(const std::string& impl) {
  return impl == "fa2" || impl == "fa3" || impl == "fa3-pack-gqa" || impl == "fa3-no-pack-gqa" || impl == "fa3-fp8" ||
         impl == "standard";
}

void device_forward(const std::string& kernel, const Problem&, const flashlab_tensors&) {
  throw Error(kernel + ": this libflashlab was built without CUDA (no nvcc at configure time); "
                       "use a CPU implementation (reference, tiled-fa2, ...) or rebuild where nvcc is installed");
}

flashlab_device_mask* prepare_mask(const std::string& kernel, const Problem&, void*) {
  throw Error(kernel + ": a device mask needs the GPU, and this libflashlab was built without CUDA (no nvcc at "
                       "configure time); the CPU implementations take the mask in flashlab_problem itself");
}

// prepare_mask never makes one here, so there is nothing a caller could hand back.
void free_mask(flashlab_device_mask*) {}

int device_decode(const flashlab_decode&) {
  throw Error("decode: this libflashlab was built without CUDA (no nvcc at configure time); "
              "flashlab check --decode runs the CPU implementations");
}

void device_backward(const std::string& kernel, const Problem& p, const flashlab_tensors& t) {
  device_forward(kernel, p, t);
}

}  // namespace flashlab::capi
