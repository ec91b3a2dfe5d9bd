#include "device.hpp"

namespace flashlab::gpu {

DeviceInfo probe_device() { return {false, "", 0, 0, "built without CUDA (no nvcc at configure time)"}; }

}  // namespace flashlab::gpu

#include "flashlab/error.hpp"
#include "host.hpp"

namespace flashlab::gpu {

std::string unsupported(const std::string&, const Problem&) {
  return "skipped: built without CUDA (no nvcc at configure time)";
}

std::string backward_unsupported(const std::string& kernel, const Problem& p) { return unsupported(kernel, p); }

HostForward run_forward(const std::string& kernel, const Problem&, const Tensor&, const Tensor&, const Tensor&) {
  throw Error("gpu " + kernel + ": flashlab was built without CUDA");
}

std::string decode_unsupported(const DecodeProblem&) {
  return "skipped: built without CUDA (no nvcc at configure time)";
}

DecodeOutputs<float> run_decode(const DecodeProblem&, const DecodeTensors&) {
  throw Error("gpu decode: flashlab was built without CUDA");
}

HostBackward run_backward(const std::string& kernel, const Problem&, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, const Tensor&, const Tensor&, bool) {
  throw Error("gpu " + kernel + ": flashlab was built without CUDA");
}

}  // namespace flashlab::gpu
