// The GPU kernels on the caller's device memory (PyTorch's CUDA tensors), on the caller's stream. The
// problem is judged by the same rules the harness uses (Problem::validate, gpu::unsupported) and then
// handed to gpu/launch.hpp, the launchers the positional ABI (gpu/c_api.cpp) calls too.
#include <cmath>
#include <optional>

#include "api.hpp"
#include "cuda_check.hpp"
#include "decode/decode_params.hpp"
#include "flashlab/error.hpp"
#include "host.hpp"
#include "kernels.hpp"
#include "launch.hpp"

// flashlab_mask_prepare_v2's handle: the mask on the device and the problem it was made from.
struct flashlab_device_mask {
  flashlab::Problem made_for;
  flashlab::gpu::DeviceMask device;
  flashlab_device_mask(const flashlab::Problem& p, cudaStream_t stream) : made_for(p), device(p, stream) {}
};

namespace flashlab::capi {
namespace {

// fa3-pack-gqa and fa3-no-pack-gqa: fa3 with PackGQA asked for or refused (as tensors->pack_gqa 1, -1).
const char* const kKernels[] = {"fa2", "fa3", "fa3-pack-gqa", "fa3-no-pack-gqa", "fa3-fp8", "standard"};

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

// The shared fields of both passes: shapes, the forward's tensors (q, k, v, o, lse) and, for
// varlen, the device offsets. The problem is judged first: without a device that is what is said.
void fill(gpu::AttentionParams& a, const std::string& kernel, const Problem& p, const flashlab_tensors& t) {
  const std::string base = kernel == "fa3-fp8" ? "fa3_fp8" : gpu::forward_kernel(kernel).first;
  const std::string why = gpu::unsupported(base, p);
  if (!why.empty()) throw Error(kernel + " cannot run this problem: " + why);
  a = gpu::params_of(p, kernel_dtype(p.dtype));
  for (const auto& [ptr, name] : {std::pair{t.q, "q"}, {t.k, "k"}, {t.v, "v"}, {static_cast<const void*>(t.o), "o"},
                                  {static_cast<const void*>(t.lse), "lse"}})
    need(ptr, name);
  a.q = t.q;
  a.k = t.k;
  a.v = t.v;
  a.o = t.o;
  a.lse = t.lse;
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

// Why a mask prepared for `made` is not `p`'s ("" when it is): each row's key interval, which is what
// the device holds, follows from the lengths, the window (causal included) and the mask.
std::string mask_mismatch(const Problem& made, const Problem& p) {
  const Mask &a = made.mask, &b = p.mask;
  const bool same_dense = a.dense == b.dense || (a.dense && b.dense && a.dense->bits.shape == b.dense->bits.shape &&
                                                 a.dense->bits.data == b.dense->bits.data);
  const bool same = made.batch == p.batch && made.seqlen_q == p.seqlen_q && made.seqlen_k == p.seqlen_k &&
                    made.left() == p.left() && made.right() == p.right() && a.kind == b.kind && a.prefix == b.prefix &&
                    a.doc_lengths == b.doc_lengths && a.chunk == b.chunk && same_dense;
  if (same) return "";
  return "tensors->mask was prepared for " + made.describe() + ", but this call is " + p.describe() +
         " (the batch, lengths, causal / window and mask must match): prepare one for this problem "
         "(flashlab_mask_prepare_v2), or pass tensors->mask = NULL";
}

// The launch's mask: the caller's prepared one when it is this problem's, else one uploaded for this
// call into `own` (freed stream-ordered when `own` goes out of scope).
void set_mask(gpu::AttentionParams& a, const Problem& p, const flashlab_tensors& t,
              std::optional<gpu::DeviceMask>& own) {
  if (!t.mask) {
    own.emplace(p, a, static_cast<cudaStream_t>(t.stream));
    return;
  }
  if (const std::string why = mask_mismatch(t.mask->made_for, p); !why.empty()) throw Error(why);
  t.mask->device.set(a);
}

}  // namespace

bool built_with_cuda() { return true; }

flashlab_device_mask* prepare_mask(const std::string& kernel, const Problem& p, void* stream) {
  const std::string why = gpu::unsupported(kernel, p);
  if (!why.empty()) throw Error(kernel + " cannot run this problem, so no mask is prepared for it: " + why);
  return new flashlab_device_mask(p, static_cast<cudaStream_t>(stream));
}

void free_mask(flashlab_device_mask* mask) { delete mask; }

bool is_device_kernel(const std::string& impl) {
  for (const char* k : kKernels)
    if (impl == k) return true;
  return false;
}

// fa3's options in flashlab_tensors (ABI 3), judged before anything else so that a misplaced one is told
// before the device is asked: pack_gqa for fa3's forward, the descales for fa3-fp8's.
void check_fa3_options(const std::string& kernel, const flashlab_tensors& t) {
  if (t.pack_gqa != 0 && kernel != "fa3")
    throw Error(kernel + ": tensors->pack_gqa applies to fa3's forward (leave it 0 for " + kernel + ")");
  const float descales[] = {t.descale_q, t.descale_k, t.descale_v};
  const char* const names[] = {"descale_q", "descale_k", "descale_v"};
  for (int i = 0; i < 3; ++i) {
    if (descales[i] == 0.f) continue;  // unset: 1
    if (kernel != "fa3-fp8")
      throw Error(kernel + ": tensors->" + names[i] + " is for fa3-fp8's e4m3 inputs (leave it 0 for " + kernel + ")");
    if (!(descales[i] > 0.f) || !std::isfinite(descales[i]))
      throw Error(std::string("fa3-fp8: tensors->") + names[i] + " must be a positive finite scale (x = e4m3 x " +
                  "descale), got " + std::to_string(descales[i]));
  }
}

// The checked options into the launch's params (the PackGQA kernel names set theirs in launch_forward).
void apply_fa3_options(gpu::AttentionParams& a, const flashlab_tensors& t) {
  a.pack_gqa = t.pack_gqa > 0 ? gpu::PackGqa::on : t.pack_gqa < 0 ? gpu::PackGqa::off : gpu::PackGqa::automatic;
  a.descale_q = t.descale_q > 0.f ? t.descale_q : 1.f;
  a.descale_k = t.descale_k > 0.f ? t.descale_k : 1.f;
  a.descale_v = t.descale_v > 0.f ? t.descale_v : 1.f;
}

void device_forward(const std::string& kernel, const Problem& p, const flashlab_tensors& t) {
  if (kernel == "fa3-fp8" && p.dtype != DType::bf16)
    throw Error("fa3-fp8: q, k and v hold float8 e4m3 and o is bf16: set the problem's dtype to bf16 (got " +
                std::string(to_string(p.dtype)) + ")");
  check_fa3_options(kernel, t);
  gpu::AttentionParams a;
  fill(a, kernel, p, t);
  apply_fa3_options(a, t);
  if (kernel == "fa3-fp8") {
    gpu::fa3_fp8_forward(a, static_cast<cudaStream_t>(t.stream));
    return;
  }
  const gpu::DeviceSlopes slopes(p, a, static_cast<cudaStream_t>(t.stream));
  std::optional<gpu::DeviceMask> mask;
  set_mask(a, p, t, mask);
  gpu::launch_forward(kernel, a, static_cast<cudaStream_t>(t.stream));
}

void device_backward(const std::string& kernel, const Problem& p, const flashlab_tensors& t) {
  if (kernel == "fa3-fp8")
    throw Error("fa3-fp8 is a forward only (FA3's FP8 kernel is for inference): train with fa3 or fa2 in bf16");
  if (t.pack_gqa != 0 || t.descale_q != 0.f || t.descale_k != 0.f || t.descale_v != 0.f)
    throw Error(kernel + "'s backward: tensors->pack_gqa and the descales are forward options (leave them 0)");
  if (gpu::forward_kernel(kernel).first == "fa3" && kernel != "fa3")
    return device_backward("fa3", p, t);  // PackGQA is the forward's; the backward is fa3's
  if (const std::string why = gpu::backward_unsupported(kernel, p); !why.empty())
    throw Error(kernel + " cannot run this problem's backward: " + why);
  gpu::BackwardParams a;
  fill(a, kernel, p, t);
  for (const auto& [ptr, name] : {std::pair{t.d_o, "d_o"}, {static_cast<const void*>(t.dq), "dq"},
                                  {static_cast<const void*>(t.dk), "dk"}, {static_cast<const void*>(t.dv), "dv"}})
    need(ptr, name);
  a.d_o = t.d_o;
  a.dq = t.dq;
  a.dk = t.dk;
  a.dv = t.dv;
  a.deterministic = t.deterministic != 0;
  const gpu::DeviceSlopes slopes(p, a, static_cast<cudaStream_t>(t.stream));
  std::optional<gpu::DeviceMask> mask;
  set_mask(a, p, t, mask);
  gpu::launch_backward(kernel, a, static_cast<cudaStream_t>(t.stream));
}

int device_decode(const flashlab_decode& c) {
  for (const auto& [ptr, name] : {std::pair{c.q, "q"}, {static_cast<const void*>(c.o), "o"},
                                  {static_cast<const void*>(c.lse), "lse"}, {static_cast<const void*>(c.k_cache), "k_cache"},
                                  {static_cast<const void*>(c.v_cache), "v_cache"},
                                  {static_cast<const void*>(c.cache_seqlens), "cache_seqlens"}})
    need(ptr, name);
  if (c.batch <= 0 || c.heads_q <= 0 || c.heads_kv <= 0 || c.q_len <= 0 || c.head_dim <= 0 || c.max_seqlen_k < 0)
    throw Error("decode: batch, heads_q, heads_kv, q_len and head_dim must be positive, max_seqlen_k >= 0");
  if ((c.page_size > 0) != (c.block_table != nullptr) || (c.page_size > 0 && c.max_pages <= 0))
    throw Error("decode: a paged cache needs page_size > 0, max_pages > 0 and a block_table (a contiguous one none)");
  if (c.new_len > 0 && (!c.k_new || !c.v_new)) throw Error("decode: new_len > 0 needs k_new and v_new");
  if (c.dtype != FLASHLAB_FP16 && c.dtype != FLASHLAB_BF16) throw Error("decode: dtype must be fp16 or bf16");
  gpu::DecodeParams p;
  p.q = c.q;
  p.o = c.o;
  p.lse = c.lse;
  p.k_cache = c.k_cache;
  p.v_cache = c.v_cache;
  p.block_table = c.block_table;
  p.cache_seqlens = c.cache_seqlens;
  p.k_new = c.k_new;
  p.v_new = c.v_new;
  p.cos = c.rotary_cos;
  p.sin = c.rotary_sin;
  p.batch = int(c.batch);
  p.heads_q = int(c.heads_q);
  p.heads_kv = int(c.heads_kv);
  p.head_dim = int(c.head_dim);
  p.q_len = int(c.q_len);
  p.cache_len = int(c.cache_len);
  p.page_size = int(c.page_size);
  p.max_pages = int(c.max_pages);
  p.new_len = int(c.new_len);
  p.rotary = c.rotary;
  p.rotary_dim = c.rotary ? (c.rotary_dim > 0 ? c.rotary_dim : int(c.head_dim)) : 0;
  p.scale = c.scale > 0 ? float(c.scale) : float(1.0 / std::sqrt(double(c.head_dim)));
  p.softcap = float(c.softcap);
  p.causal = c.causal != 0;
  p.dtype = c.dtype == FLASHLAB_BF16 ? gpu::Dtype::bf16 : gpu::Dtype::fp16;
  int dev = 0, sms = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  FLASHLAB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  p.num_splits = c.num_splits > 0 ? c.num_splits : gpu::decode_num_splits(p, sms, int(c.max_seqlen_k));
  if (const char* why = gpu::decode_unsupported(p); *why) throw Error(std::string("decode: unsupported: ") + why);
  const auto stream = static_cast<cudaStream_t>(c.stream);
  const size_t bytes = gpu::decode_scratch_bytes(p);
  if (bytes) FLASHLAB_CUDA(cudaMallocAsync(&p.scratch, bytes, stream));
  try {
    gpu::decode_forward(p, stream);
  } catch (...) {
    if (p.scratch) cudaFreeAsync(p.scratch, stream);
    throw;
  }
  if (p.scratch) FLASHLAB_CUDA(cudaFreeAsync(p.scratch, stream));
  return p.num_splits;
}

}  // namespace flashlab::capi
