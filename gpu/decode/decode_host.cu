// The decode kernels driven from host tensors, for the decode harness and `flashlab check --decode`:
// upload (converting to the kernel's dtype), poison the outputs, run, check every CUDA call, download.
#include <cstring>
#include <vector>

#include "cuda_check.hpp"
#include "decode_params.hpp"
#include "device.hpp"
#include "flashlab/dtype.hpp"
#include "host.hpp"
#include "host_copy.hpp"

namespace flashlab::gpu {
namespace {

Dtype dtype_of(DType d) { return d == DType::bf16 ? Dtype::bf16 : d == DType::fp16 ? Dtype::fp16 : Dtype::fp32; }

std::vector<int> to_int(const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

DecodeParams params_of(const DecodeProblem& d) {
  DecodeParams p;
  p.batch = int(d.batch);
  p.heads_q = int(d.heads_q);
  p.heads_kv = int(d.heads_kv);
  p.head_dim = int(d.head_dim);
  p.q_len = int(d.q_len);
  p.cache_len = int(d.cache_len);
  p.page_size = int(d.page_size);
  p.max_pages = int(d.max_pages);
  p.new_len = int(d.new_len);
  p.rotary = d.rotary == Rotary::none ? 0 : d.rotary == Rotary::interleaved ? 1 : 2;
  p.rotary_dim = d.rotary == Rotary::none ? 0 : int(d.rot_dim());
  p.num_splits = int(d.num_splits);
  p.scale = float(d.attention().softmax_scale());
  p.softcap = float(d.softcap);
  p.causal = d.causal;
  p.dtype = dtype_of(d.dtype);
  return p;
}

}  // namespace

std::string decode_unsupported(const DecodeProblem& d) {
  const DeviceInfo dev = probe_device();
  if (!dev.available) return "skipped: " + dev.reason;
  d.validate();
  DecodeParams p = params_of(d);
  if (p.rotary) p.cos = p.sin = &p;  // present: decode_unsupported checks the rest
  const char* why = gpu::decode_unsupported(p);
  return *why ? std::string("unsupported: ") + why : "";
}

DecodeOutputs<float> run_decode(const DecodeProblem& d, const DecodeTensors& in) {
  check_tensors(d, in);
  if (const std::string why = decode_unsupported(d); !why.empty()) throw Error("gpu decode: " + why);
  DecodeParams p = params_of(d);
  DeviceBuffer q(in.q.data.size() * 2), kc(in.k_cache.data.size() * 2), vc(in.v_cache.data.size() * 2);
  DeviceBuffer kn(in.k_new.data.size() * 2), vn(in.v_new.data.size() * 2), cs(in.cos.data.size() * 2),
      sn(in.sin.data.size() * 2);
  DeviceBuffer table(d.block_table.size() * 4), seqlens(d.cache_seqlens.size() * 4);
  DeviceBuffer o(in.q.data.size() * 2), lse(size_t(d.batch * d.heads_q * d.q_len) * 4);
  upload(q.ptr, in.q, p.dtype);
  upload(kc.ptr, in.k_cache, p.dtype);
  upload(vc.ptr, in.v_cache, p.dtype);
  upload(kn.ptr, in.k_new, p.dtype);
  upload(vn.ptr, in.v_new, p.dtype);
  upload(cs.ptr, in.cos, p.dtype);
  upload(sn.ptr, in.sin, p.dtype);
  const std::vector<int> tbl = to_int(d.block_table), lens = to_int(d.cache_seqlens);
  if (!tbl.empty()) FLASHLAB_CUDA(cudaMemcpy(table.ptr, tbl.data(), tbl.size() * 4, cudaMemcpyHostToDevice));
  FLASHLAB_CUDA(cudaMemcpy(seqlens.ptr, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  FLASHLAB_CUDA(cudaMemset(o.ptr, 0xff, in.q.data.size() * 2));  // poisoned: NaN in bf16 and fp16
  FLASHLAB_CUDA(cudaMemset(lse.ptr, 0xff, size_t(d.batch * d.heads_q * d.q_len) * 4));
  p.q = q.ptr;
  p.k_cache = kc.ptr;
  p.v_cache = vc.ptr;
  p.k_new = d.new_len ? kn.ptr : nullptr;
  p.v_new = d.new_len ? vn.ptr : nullptr;
  p.cos = p.rotary ? cs.ptr : nullptr;
  p.sin = p.rotary ? sn.ptr : nullptr;
  p.block_table = d.paged() ? static_cast<const int*>(table.ptr) : nullptr;
  p.cache_seqlens = static_cast<const int*>(seqlens.ptr);
  p.o = o.ptr;
  p.lse = static_cast<float*>(lse.ptr);
  DeviceBuffer scratch(decode_scratch_bytes(p));
  if (scratch.ptr) FLASHLAB_CUDA(cudaMemset(scratch.ptr, 0xff, decode_scratch_bytes(p)));
  p.scratch = scratch.ptr;
  decode_forward(p, nullptr);
  FLASHLAB_CUDA(cudaDeviceSynchronize());

  DecodeOutputs<float> out{BasicTensor<float>(d.o_shape()), BasicTensor<float>(d.lse_shape()), Tensor(d.cache_shape()),
                           Tensor(d.cache_shape())};
  download(out.o, o.ptr, p.dtype);
  FLASHLAB_CUDA(cudaMemcpy(out.lse.ptr(), lse.ptr, out.lse.data.size() * 4, cudaMemcpyDeviceToHost));
  download(out.k_cache, kc.ptr, p.dtype);
  download(out.v_cache, vc.ptr, p.dtype);
  return out;
}

}  // namespace flashlab::gpu
