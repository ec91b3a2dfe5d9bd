#include "device.hpp"

namespace flashlab::gpu {

DeviceInfo probe_device() { return {false, "", 0, 0, "built without CUDA (no nvcc at configure time)"}; }

}  // namespace flashlab::gpu
