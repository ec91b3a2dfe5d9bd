// Host tensors to and from the device, for the hosts that drive kernels from the harness (host.cu,
// decode/decode_host.cu): a device buffer freed on scope exit (an error leaves nothing allocated), and
// fp32 host tensors uploaded in the kernel's dtype (bf16 and fp16 as 16-bit words) and downloaded back.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cuda_check.hpp"
#include "flashlab/dtype.hpp"
#include "flashlab/tensor.hpp"
#include "params.hpp"

namespace flashlab::gpu {

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { FLASHLAB_CUDA(cudaMalloc(&ptr, bytes ? bytes : 1)); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr(other.ptr) { other.ptr = nullptr; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

inline size_t elem_size(Dtype d) { return d == Dtype::fp32 ? 4 : 2; }

inline void upload(void* dst, const Tensor& t, Dtype d) {
  if (t.data.empty()) return;
  if (d == Dtype::fp32) {
    FLASHLAB_CUDA(cudaMemcpy(dst, t.ptr(), t.data.size() * 4, cudaMemcpyHostToDevice));
    return;
  }
  std::vector<uint16_t> bits(t.data.size());
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = d == Dtype::bf16 ? float_to_bf16_bits(t.data[i]) : float_to_fp16_bits(t.data[i]);
  FLASHLAB_CUDA(cudaMemcpy(dst, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
}

inline void download(Tensor& t, const void* src, Dtype d) {
  if (d == Dtype::fp32) {
    FLASHLAB_CUDA(cudaMemcpy(t.ptr(), src, t.data.size() * 4, cudaMemcpyDeviceToHost));
    return;
  }
  std::vector<uint16_t> bits(t.data.size());
  FLASHLAB_CUDA(cudaMemcpy(bits.data(), src, bits.size() * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < bits.size(); ++i)
    t.data[i] = d == Dtype::bf16 ? bf16_bits_to_float(bits[i]) : fp16_bits_to_float(bits[i]);
}

}  // namespace flashlab::gpu
