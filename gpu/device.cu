#include <cuda_runtime.h>

#include "device.hpp"

namespace flashlab::gpu {

namespace {

DeviceInfo probe() {
  DeviceInfo info;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.reason = std::string("no CUDA device (") + cudaGetErrorString(err) + ")";
    return info;
  }
  if (count == 0) {
    info.reason = "no CUDA device";
    return info;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    info.reason = "cudaGetDeviceProperties failed";
    return info;
  }
  info.available = true;
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  return info;
}

}  // namespace

// Read once: every kernel call through the C ABIs asks (gpu::unsupported), and cudaGetDeviceProperties
// costs far more than the 10 us a call's overhead may take. Device 0 is the one asked, as before.
DeviceInfo probe_device() {
  static const DeviceInfo info = probe();
  return info;
}

}  // namespace flashlab::gpu
