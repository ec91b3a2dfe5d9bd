// Every CUDA and cuBLAS call is checked; a failure becomes a flashlab::Error
// naming the call, the file and line, and the runtime's message.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "flashlab/error.hpp"

#define FLASHLAB_CUDA(call)                                                                                 \
  do {                                                                                                      \
    const cudaError_t flashlab_err_ = (call);                                                               \
    if (flashlab_err_ != cudaSuccess)                                                                       \
      throw ::flashlab::Error(std::string(#call) + " failed at " __FILE__ ":" + std::to_string(__LINE__) + \
                              ": " + cudaGetErrorString(flashlab_err_));                                    \
  } while (0)

// After a kernel launch: the launch error, right away.
#define FLASHLAB_CUDA_LAUNCHED() FLASHLAB_CUDA(cudaGetLastError())

namespace flashlab::gpu {
// An attribute of the current device (the runtime answers from its own cache).
inline int device_attribute(cudaDeviceAttr what) {
  int dev = 0, value = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  FLASHLAB_CUDA(cudaDeviceGetAttribute(&value, what, dev));
  return value;
}
}  // namespace flashlab::gpu
