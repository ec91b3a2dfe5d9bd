// Whether a CUDA device can run flashlab's kernels here, and which one.
// Built from device.cu when nvcc is present, from device_none.cpp otherwise.
#pragma once
#include <string>

namespace flashlab::gpu {

struct DeviceInfo {
  bool available = false;
  std::string name;     // e.g. "NVIDIA H100 80GB HBM3"
  int sm_major = 0, sm_minor = 0;
  std::string reason;   // why not available: "built without CUDA", "no CUDA device", the driver's error
};

DeviceInfo probe_device();

}  // namespace flashlab::gpu
