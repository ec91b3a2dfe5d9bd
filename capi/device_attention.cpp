// The GPU kernels on the caller's device memory (PyTorch's CUDA tensors), on the caller's stream. The
// problem is judged by the same rules the harness uses (Problem::validate, gpu::unsupported) and then
// handed to gpu/launch.hpp, the launchers the positional ABI (gpu/c_api.cpp) calls too.
#include "api.hpp"
#include "flashlab/error.hpp"
#include "host.hpp"
#include "launch.hpp"

namespace flashlab::capi {
namespace {

const char* const kKernels[] = {"fa2", "fa3", "standard"};

gpu::Dtype kernel_dtype(DType d) {
  return d == DType::bf16 ? gpu::Dtype::bf16 : d == DType::fp16 ? gpu::Dtype::fp16 : gpu::Dtype::fp32;
}

// NULL, or host memory handed to a kernel (numpy arrays, CPU tensors), is refused before any launch.
void need(const void* ptr, const char* name) {
  if (!ptr) throw Error(std::string("tensors->") + name + " is NULL: pass a device pointer");
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess || attr.type == cudaMemoryTypeUnregistered ||
      attr.type == cudaMemoryTypeHost) {
    cudaGetLastError();  // clear the error the query may have left
    throw Error(std::string("tensors->") + name + " is not device memory: the GPU kernels take CUDA tensors; "
                "for host arrays use a CPU implementation (tiled-fa2, reference) or gpu-fa2 (copies to the GPU)");
  }
}

// The shared fields of both passes: shapes, mask and, for varlen, the device offsets.
void fill(gpu::AttentionParams& a, const std::string& kernel, const Problem& p, const flashlab_tensors& t) {
  const std::string why = gpu::unsupported(kernel, p);
  if (!why.empty()) throw Error(kernel + " cannot run this problem: " + why);
  a = gpu::params_of(p, kernel_dtype(p.dtype));
  if (p.varlen()) {
    if (!t.cu_seqlens_q_device || !t.cu_seqlens_k_device)
      throw Error(kernel + ": varlen on the GPU needs tensors->cu_seqlens_q_device and cu_seqlens_k_device "
                           "(int32 device copies of the problem's cu_seqlens)");
    a.cu_seqlens_q = t.cu_seqlens_q_device;
    a.cu_seqlens_k = t.cu_seqlens_k_device;
    a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = a.o_batch_stride = 0;
    a.total_q = int(p.total_q());
    a.total_k = int(p.total_k());
  }
}

}  // namespace

bool built_with_cuda() { return true; }

bool is_device_kernel(const std::string& impl) {
  for (const char* k : kKernels)
    if (impl == k) return true;
  return false;
}

void device_forward(const std::string& kernel, const Problem& p, const flashlab_tensors& t) {
  gpu::AttentionParams a;
  fill(a, kernel, p, t);  // the problem first: without a device this says so, before the pointers are asked
  for (const auto& [ptr, name] : {std::pair{t.q, "q"}, {t.k, "k"}, {t.v, "v"}, {static_cast<const void*>(t.o), "o"},
                                  {static_cast<const void*>(t.lse), "lse"}})
    need(ptr, name);
  a.q = t.q;
  a.k = t.k;
  a.v = t.v;
  a.o = t.o;
  a.lse = t.lse;
  const gpu::DeviceSlopes slopes(p, a, static_cast<cudaStream_t>(t.stream));
  gpu::launch_forward(kernel, a, static_cast<cudaStream_t>(t.stream));
}

void device_backward(const std::string& kernel, const Problem& p, const flashlab_tensors& t) {
  gpu::BackwardParams a;
  fill(a, kernel, p, t);
  for (const auto& [ptr, name] :
       {std::pair{t.q, "q"}, {t.k, "k"}, {t.v, "v"}, {static_cast<const void*>(t.o), "o"},
        {static_cast<const void*>(t.lse), "lse"}, {t.d_o, "d_o"}, {static_cast<const void*>(t.dq), "dq"},
        {static_cast<const void*>(t.dk), "dk"}, {static_cast<const void*>(t.dv), "dv"}})
    need(ptr, name);
  a.q = t.q;
  a.k = t.k;
  a.v = t.v;
  a.o = t.o;
  a.lse = t.lse;
  a.d_o = t.d_o;
  a.dq = t.dq;
  a.dk = t.dk;
  a.dv = t.dv;
  a.deterministic = t.deterministic != 0;
  const gpu::DeviceSlopes slopes(p, a, static_cast<cudaStream_t>(t.stream));
  gpu::launch_backward(kernel, a, static_cast<cudaStream_t>(t.stream));
}

}  // namespace flashlab::capi
