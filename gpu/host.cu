#include "host.hpp"

#include <cstring>
#include <vector>

#include "cuda_check.hpp"
#include "flashlab/fp8.hpp"
#include "device.hpp"
#include "kernels.hpp"
#include "host_copy.hpp"
#include "launch.hpp"

namespace flashlab::gpu {
namespace {

Dtype kernel_dtype(const std::string& kernel, DType d) {
  if (kernel == "fa1_minimal") return Dtype::fp32;
  return d == DType::bf16 ? Dtype::bf16 : d == DType::fp16 ? Dtype::fp16 : Dtype::fp32;
}

// cu_seqlens on the device for a varlen problem (packed rows: batch strides unused).
struct DeviceSeqlens {
  DeviceBuffer q, k;
  DeviceSeqlens(const Problem& p, AttentionParams& a) : q((p.batch + 1) * 4), k((p.batch + 1) * 4) {
    if (!p.varlen()) return;
    const std::vector<int> cu_q(p.cu_seqlens_q.begin(), p.cu_seqlens_q.end());
    const std::vector<int> cu_k(p.cu_seqlens_k.begin(), p.cu_seqlens_k.end());
    FLASHLAB_CUDA(cudaMemcpy(q.ptr, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice));
    FLASHLAB_CUDA(cudaMemcpy(k.ptr, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice));
    a.cu_seqlens_q = static_cast<const int*>(q.ptr);
    a.cu_seqlens_k = static_cast<const int*>(k.ptr);
    a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = a.o_batch_stride = 0;
    a.total_q = cu_q.back();
    a.total_k = cu_k.back();
  }
};


// A device copy of a host tensor in the kernel's dtype, or of the given byte count poisoned with NaN.
DeviceBuffer uploaded(const Tensor& t, Dtype d) {
  DeviceBuffer b(t.data.size() * elem_size(d));
  upload(b.ptr, t, d);
  return b;
}
DeviceBuffer poisoned(size_t bytes) {
  DeviceBuffer b(bytes);
  FLASHLAB_CUDA(cudaMemset(b.ptr, 0xff, bytes));  // all ones: NaN in fp32, bf16 and fp16
  return b;
}

}  // namespace

std::string unsupported(const std::string& kernel, const Problem& p) {
  const DeviceInfo dev = probe_device();
  if (!dev.available) return "skipped: " + dev.reason;
  if (const std::string why = mask_unsupported(kernel, p); !why.empty()) return why;
  if (kernel != "fa2" && p.alibi) return "unsupported: ALiBi (fa2 has it)";
  if (kernel != "fa2" && p.dropout_p > 0) return "unsupported: dropout (fa2 has it)";
  if (p.dv() != p.head_dim) return "unsupported: head_dim_v != head_dim";
  if (kernel == "fa2") {
    if (p.dtype == DType::fp32) return "unsupported: fp32 (fa2 runs bf16 and fp16)";
    if (fa2_padded_head_dim(int(p.head_dim)) == 0)
      return "unsupported: head_dim " + std::to_string(p.head_dim) + " (fa2 takes multiples of 8 up to 256)";
    return "";
  }
  if (kernel == "fa3_fp8") {
    if (p.dtype == DType::fp32) return "unsupported: fp32 (the FP8 forward quantizes bf16 or fp16 inputs)";
    if (fa3_fp8_padded_head_dim(int(p.head_dim)) == 0)
      return "unsupported: head_dim " + std::to_string(p.head_dim) + " (" + kFa3Fp8HeadDims + ")";
    if (p.varlen()) return "unsupported: varlen (the FP8 forward takes fixed-length batches)";
    if (dev.sm_major != 9)
      return "skipped: fa3 needs an sm_90 GPU (wgmma, TMA); this is " + dev.name + ", sm_" +
             std::to_string(dev.sm_major) + std::to_string(dev.sm_minor);
    return "";
  }
  if (kernel == "fa3") {
    if (p.dtype == DType::fp32) return "unsupported: fp32 (fa3 runs bf16 and fp16)";
    if (fa3_padded_head_dim(int(p.head_dim)) == 0)
      return "unsupported: head_dim " + std::to_string(p.head_dim) + " (" + kFa3HeadDims + ")";
    if (dev.sm_major != 9)
      return "skipped: fa3 needs an sm_90 GPU (wgmma, TMA); this is " + dev.name + ", sm_" +
             std::to_string(dev.sm_major) + std::to_string(dev.sm_minor);
    return "";
  }
  if (p.varlen()) return "unsupported: varlen";
  if (kernel == "fa1_minimal") {
    if (p.head_dim > 256) return "unsupported: head_dim above 256";
    return "";
  }
  if (kernel == "standard") return "";
  return "unknown GPU kernel '" + kernel + "'";
}

std::string backward_unsupported(const std::string& kernel, const Problem& p) {
  if (std::string why = unsupported(kernel, p); !why.empty()) return why;
  if (kernel == "fa2") return "";
  if (kernel != "fa3") return "unsupported: no backward kernel (fa2 and fa3 have one; FP8 is a forward)";
  if (p.mask.kind == MaskKind::dense)
    return "unsupported: mask kind dense in the fa3 backward (fa2's backward takes it; fa3's takes the interval "
           "masks: prefix-lm, document, chunked)";
  if (!fa3_backward_shape(int(p.head_dim)).supported())
    return "unsupported: head_dim " + std::to_string(p.head_dim) + " in the fa3 backward (multiples of 8 up to 256)";
  return "";
}

// The FP8 forward: q, k and v quantized to e4m3 (per tensor, fp8.hpp), O in bf16.
static HostForward run_fp8_forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  AttentionParams a = params_of(p, Dtype::bf16);
  auto uploaded_e4m3 = [](const Tensor& t, float& descale) {
    const fp8::Quantized x = fp8::quantize(t.data);
    descale = x.descale;
    DeviceBuffer b(x.bits.size());
    FLASHLAB_CUDA(cudaMemcpy(b.ptr, x.bits.data(), x.bits.size(), cudaMemcpyHostToDevice));
    return b;
  };
  DeviceBuffer q_in = uploaded_e4m3(q, a.descale_q), k_in = uploaded_e4m3(k, a.descale_k),
               v_in = uploaded_e4m3(v, a.descale_v);
  DeviceBuffer dout = poisoned(size_t(BasicTensor<float>::count(p.o_shape())) * 2);
  DeviceBuffer dlse = poisoned(size_t(BasicTensor<float>::count(p.lse_shape())) * 4);
  a.q = q_in.ptr;
  a.k = k_in.ptr;
  a.v = v_in.ptr;
  a.o = dout.ptr;
  a.lse = static_cast<float*>(dlse.ptr);
  fa3_fp8_forward(a, nullptr);
  FLASHLAB_CUDA(cudaDeviceSynchronize());
  HostForward out{Tensor(p.o_shape()), Tensor(p.lse_shape())};
  download(out.o, dout.ptr, Dtype::bf16);
  FLASHLAB_CUDA(cudaMemcpy(out.lse.ptr(), dlse.ptr, out.lse.data.size() * 4, cudaMemcpyDeviceToHost));
  return out;
}

HostForward run_forward(const std::string& name, const Problem& p, const Tensor& q, const Tensor& k,
                        const Tensor& v) {
  p.validate();
  const auto [kernel, pack] = forward_kernel(name);  // fa3's PackGQA names run fa3 with it asked for or not
  const std::string why = unsupported(kernel, p);
  if (!why.empty()) throw Error("gpu " + kernel + ": " + why);
  if (kernel == "fa3_fp8") return run_fp8_forward(p, q, k, v);
  const Dtype dt = kernel_dtype(kernel, p.dtype);
  const size_t es = elem_size(dt);

  AttentionParams a = params_of(p, dt);
  a.pack_gqa = pack;
  if (kernel == "standard") {  // S (fp32) and P for every head at once, as PyTorch's math path holds them
    const double need = double(p.batch) * p.heads_q * p.seqlen_q * p.seqlen_k * (4 + es);
    size_t free_bytes = 0, total = 0;
    FLASHLAB_CUDA(cudaMemGetInfo(&free_bytes, &total));
    if (need > 0.9 * double(free_bytes))
      throw Error("gpu standard: S and P would need " + std::to_string(int64_t(need)) + " bytes, the GPU has " +
                  std::to_string(free_bytes) + " free; fa2 needs none of it");
  }

  DeviceBuffer q_in = uploaded(q, dt), k_in = uploaded(k, dt), v_in = uploaded(v, dt);
  DeviceBuffer dout = poisoned(size_t(BasicTensor<float>::count(p.o_shape())) * es);
  DeviceBuffer dlse = poisoned(size_t(BasicTensor<float>::count(p.lse_shape())) * 4);
  a.q = q_in.ptr;
  a.k = k_in.ptr;
  a.v = v_in.ptr;
  a.o = dout.ptr;
  a.lse = static_cast<float*>(dlse.ptr);

  DeviceSeqlens seqlens(p, a);
  DeviceSlopes slopes(p, a, nullptr);
  DeviceMask mask(p, a, nullptr);

  if (kernel == "fa2") {
    fa2_forward(a, nullptr);
  } else if (kernel == "fa3") {
    fa3_forward(a, nullptr);
  } else if (kernel == "fa1_minimal") {
    const size_t n = size_t(p.batch) * p.heads_q * p.seqlen_q;
    DeviceBuffer l(n * 4), m(n * 4);
    fa1_minimal_forward(a, static_cast<float*>(l.ptr), static_cast<float*>(m.ptr), nullptr);
    FLASHLAB_CUDA(cudaDeviceSynchronize());
  } else {
    const size_t plane = size_t(p.batch) * p.heads_q * p.seqlen_q * p.seqlen_k;
    DeviceBuffer S(plane * 4), P(plane * es);
    standard_forward(a, static_cast<float*>(S.ptr), P.ptr, nullptr);
    FLASHLAB_CUDA(cudaDeviceSynchronize());
  }
  FLASHLAB_CUDA(cudaDeviceSynchronize());

  HostForward out{Tensor(p.o_shape()), Tensor(p.lse_shape())};
  download(out.o, dout.ptr, dt);
  FLASHLAB_CUDA(cudaMemcpy(out.lse.ptr(), dlse.ptr, out.lse.data.size() * 4, cudaMemcpyDeviceToHost));
  if (dt == Dtype::fp32 && p.dtype != DType::fp32)  // fa1_minimal computes in fp32; store as the input dtype would
    for (float& x : out.o.data) x = round_to(p.dtype, x);
  return out;
}

HostBackward run_backward(const std::string& kernel, const Problem& p, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& o, const Tensor& lse, const Tensor& d_o, bool deterministic) {
  p.validate();
  const std::string why = backward_unsupported(kernel, p);
  if (!why.empty()) throw Error("gpu " + kernel + ": " + why);
  const Dtype dt = kernel_dtype(kernel, p.dtype);

  BackwardParams a;
  static_cast<AttentionParams&>(a) = params_of(p, dt);
  a.deterministic = deterministic;
  DeviceSeqlens seqlens(p, a);
  DeviceSlopes slopes(p, a, nullptr);
  DeviceMask mask(p, a, nullptr);
  DeviceBuffer q_in = uploaded(q, dt), k_in = uploaded(k, dt), v_in = uploaded(v, dt);
  DeviceBuffer d_o_in = uploaded(d_o, dt), o_in = uploaded(o, dt), lse_in(lse.data.size() * 4);
  FLASHLAB_CUDA(cudaMemcpy(lse_in.ptr, lse.ptr(), lse.data.size() * 4, cudaMemcpyHostToDevice));
  DeviceBuffer dq = poisoned(q.data.size() * 2), dk = poisoned(k.data.size() * 2), dv = poisoned(v.data.size() * 2);
  DeviceBuffer scratch = poisoned(backward_scratch_bytes(kernel, a));
  a.q = q_in.ptr;
  a.k = k_in.ptr;
  a.v = v_in.ptr;
  a.o = o_in.ptr;
  a.lse = static_cast<float*>(lse_in.ptr);
  a.d_o = d_o_in.ptr;
  a.dq = dq.ptr;
  a.dk = dk.ptr;
  a.dv = dv.ptr;
  a.scratch = scratch.ptr;
  backward_on_scratch(kernel, a, nullptr);
  FLASHLAB_CUDA(cudaDeviceSynchronize());

  HostBackward out{Tensor(q.shape), Tensor(k.shape), Tensor(v.shape)};
  download(out.dq, dq.ptr, dt);
  download(out.dk, dk.ptr, dt);
  download(out.dv, dv.ptr, dt);
  return out;
}

}  // namespace flashlab::gpu
