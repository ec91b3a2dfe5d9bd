// flashlab's attention as PyTorch operators registered in C++ (issue 16: the op's overhead over a direct
// C ABI call under 10 us; the Python torch.library.custom_op spent ~45 us in its Python body).
//
//   torch.ops.flashlab.fwd(q, k, v, ...) -> (out, softmax_lse)
//   torch.ops.flashlab.bwd(dout, q, k, v, out, softmax_lse, ...) -> (dq, dk, dv)
//   torch.ops.flashlab._set_entry_points(forward, backward, abi_version)   once, from Python, at load
//
// The schemas are exactly those torch.library.custom_op inferred from the Python signatures in
// torch_ops.py (int -> SymInt, float -> float, Optional[Tensor] -> Tensor?), so the Python fake
// implementations, the CPU kernels (Python bodies, registered from torch_ops.py) and the tests serve both
// registrations unchanged. What lives here:
//   CUDA      fwd/bwd on device memory: cheap checks, outputs from at::empty, the C structs filled, the
//             C ABI called on PyTorch's current stream through a function pointer (no link to
//             libflashlab.so: Python hands over flashlab_forward_v1/flashlab_backward_v1 at load).
//   Autograd  fwd's gradient is bwd (a torch::autograd::Function), for every device: the CPU kernel is
//             reached through the same function when the tensors are on the CPU.
//
// A mask (flash_attn_func's mask=(kind, value)) is each op's last three arguments: mask_kind
// (flashlab_mask_kind), mask_values (the prefix lengths, the document lengths, or [chunk]) and dense_mask
// (bool, on q's device, copied to the host per call: flashlab_problem's dense_mask is host memory).
//
// Index
//   [SECTION] Entry points      the C ABI's functions, handed over by Python
//   [SECTION] Messages          Python-style formatting, so errors read as _checks.py's do
//   [SECTION] Checks            _checks.py and torch_ops._check_tensors for CUDA tensors
//   [SECTION] The C structs     flashlab_problem and flashlab_tensors from the op's arguments
//   [SECTION] CUDA kernels      fwd and bwd
//   [SECTION] Autograd          fwd's gradient, bwd
//   [SECTION] Registration      TORCH_LIBRARY and its implementations
//
// Built on first use by flashlab/_cpp_ops.py (torch.utils.cpp_extension.load); python/README.md says how
// the Python fallback is chosen.

#include <torch/library.h>
#include <torch/autograd.h>
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/EmptyTensor.h>
#include <torch/version.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "flashlab.h"

namespace flashlab_ops {

using at::Tensor;
// `Tensor?` in a schema: std::optional in the torch this is written for (2.11); c10's own optional, the
// type kernels took for it, in the older torch whose headers can compile-check this file (Debian's 1.13).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
using OptionalTensor = std::optional<Tensor>;
#else
using OptionalTensor = c10::optional<Tensor>;
#endif
// `SymInt[]?` (mask_values): plain integers in the CUDA kernels, SymInts in the autograd kernel and the
// typed handles (the dispatcher unpacks one into the other, as it does SymInt into int64_t).
using OptionalInts = at::OptionalIntArrayRef;
using OptionalSymInts = at::OptionalSymIntArrayRef;

// ============================================================================================================
// [SECTION] Entry points
// ============================================================================================================
// flashlab_forward_v1 and flashlab_backward_v1 (capi/include/flashlab.h), as the library ctypes loaded
// exports them. Set once by _set_entry_points before any call; read without a lock afterwards.

using EntryPoint = int (*)(const char* impl, const flashlab_problem*, const flashlab_tensors*, char* error,
                           size_t error_len);
EntryPoint g_forward = nullptr;
EntryPoint g_backward = nullptr;
constexpr size_t kErrorLen = 1024;  // _abi.ERROR_LEN

void set_entry_points(int64_t forward, int64_t backward, int64_t abi_version) {
  TORCH_CHECK(abi_version == FLASHLAB_ABI_VERSION, "libflashlab.so speaks ABI ", abi_version,
              " and flashlab's C++ ops were built against flashlab.h of ABI ", FLASHLAB_ABI_VERSION,
              ": rebuild the library from the same checkout as the package");
  TORCH_CHECK(forward != 0 && backward != 0, "flashlab: _set_entry_points got a null function pointer");
  g_forward = reinterpret_cast<EntryPoint>(static_cast<intptr_t>(forward));
  g_backward = reinterpret_cast<EntryPoint>(static_cast<intptr_t>(backward));
}

// ============================================================================================================
// [SECTION] Messages
// ============================================================================================================
// The Python path's messages print shapes as tuples and dtypes as torch.bfloat16; these do the same, so a
// user (and test_gpu.py's regexes) sees one wording whichever path ran.

// Plain string appends, no iostreams: py_tuple and py_list written with std::ostringstream crashed the
// process when a message used them (torch 2.11, H100, 2026-11-23; the messages without them raised).
std::string py_tuple(at::IntArrayRef shape) {  // (2, 300, 8, 64); (8,) for one element
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string py_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kDouble: return "torch.float64";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    default: return std::string("torch.") + c10::toString(t);
  }
}

std::string py_list(const std::vector<int64_t>& values, size_t at_most) {  // [0, 5, 305]...
  std::string s = "[";
  for (size_t i = 0; i < values.size() && i < at_most; ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]" + (values.size() > at_most ? "..." : "");
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// ============================================================================================================
// [SECTION] Checks
// ============================================================================================================
// The same checks, order and words as the Python path (torch_ops._check_tensors, then
// _checks.attention_shapes, check_offsets, check_alibi_shape), for CUDA tensors. TORCH_CHECK_TYPE raises
// Python's TypeError and TORCH_CHECK_VALUE its ValueError, as the Python checks do. All of it reads
// sizes and flags already on the host: nothing here touches the GPU but the varlen offsets' copy.

// _checks.Shapes: the problem's sizes, read off q, k, v (and the offsets' lengths when varlen).
struct Shapes {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, head_dim_v, total_q, total_k;
  bool varlen;

  std::vector<int64_t> o_shape() const {
    if (varlen) return {total_q, heads_q, head_dim_v};  // (total_q, heads_q, head_dim_v)
    return {batch, seqlen_q, heads_q, head_dim_v};      // (batch, seqlen_q, heads_q, head_dim_v)
  }
  std::vector<int64_t> lse_shape() const {
    if (varlen) return {heads_q, total_q};  // (heads_q, total_q)
    return {batch, heads_q, seqlen_q};      // (batch, heads_q, seqlen_q)
  }
};

// fa3-pack-gqa / fa3-no-pack-gqa: fa3 with PackGQA asked for or refused (torch_ops.FA3_KERNELS).
bool is_fa3(const std::string& impl) { return impl == "fa3" || impl == "fa3-pack-gqa" || impl == "fa3-no-pack-gqa"; }
bool is_device_kernel(const std::string& impl) { return impl == "fa2" || is_fa3(impl) || impl == "standard"; }

// torch_ops._check_tensors, its CUDA half (the dispatcher sent us here, so one of the tensors is on a GPU).
void check_tensors(const Tensor& q, const Tensor& k, const Tensor& v, const OptionalTensor& cu_q,
                   const OptionalTensor& cu_k, const std::string& impl) {
  for (auto [name, x] : {std::pair<const char*, const Tensor*>{"k", &k}, {"v", &v}})
    TORCH_CHECK_VALUE(x->device() == q.device(), "q is on ", q.device(), " but ", name, " is on ", x->device(),
                      ": move q, k, v to one device");
  const auto dtype = q.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, "dtype ", py_dtype(dtype),
                   " is not supported: cast q, k, v to torch.bfloat16, torch.float16 or torch.float32 (e.g. "
                   "q.to(torch.bfloat16))");
  TORCH_CHECK_VALUE(is_device_kernel(impl), "impl='", impl, "' is a CPU implementation and q, k, v are CUDA "
                    "tensors: use impl='fa2', 'fa3' or 'standard', or move the tensors with .cpu()");
  TORCH_CHECK_TYPE(impl == "standard" || dtype != at::kFloat, impl, " runs bf16 and fp16 on the GPU, and q is "
                   "float32: cast q, k, v with .to(torch.bfloat16) (or use impl='standard')");
  for (auto [name, x] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}})
    TORCH_CHECK_VALUE(x->is_contiguous(), name, " is not contiguous (shape ", py_tuple(x->sizes()), ", strides ",
                      py_tuple(x->strides()), "): the GPU kernels read contiguous tensors; pass ", name,
                      ".contiguous()");
  for (auto [name, cu] : {std::pair<const char*, const OptionalTensor*>{"cu_seqlens_q", &cu_q},
                          {"cu_seqlens_k", &cu_k}})
    if (cu->has_value()) {
      TORCH_CHECK_TYPE((*cu)->scalar_type() == at::kInt && (*cu)->device() == q.device(), name, " is ",
                       py_dtype((*cu)->scalar_type()), " on ", (*cu)->device(), ": the kernels take int32 offsets "
                       "on q's device (", q.device(), "): pass ", name, ".to(device=q.device, dtype=torch.int32)");
      TORCH_CHECK_VALUE((*cu)->is_contiguous(), name, " is not contiguous (strides ", py_tuple((*cu)->strides()),
                        "): the kernels read the offsets as one array; pass ", name, ".contiguous()");
    }
}

// _checks.attention_shapes: q, k, v (and the offsets) against each other.
Shapes attention_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const OptionalTensor& cu_q,
                        const OptionalTensor& cu_k, int64_t max_seqlen_q, int64_t max_seqlen_k) {
  const bool varlen = cu_q.has_value() || cu_k.has_value();
  TORCH_CHECK_VALUE(!varlen || (cu_q.has_value() && cu_k.has_value()),
                    "flash_attn_varlen_func needs both cu_seqlens_q and cu_seqlens_k");
  const int64_t rank = varlen ? 3 : 4;
  const char* layout = varlen ? "(total_tokens, nheads, headdim)" : "(batch, seqlen, nheads, headdim)";
  for (auto [name, x] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}}) {
    TORCH_CHECK_VALUE(x->dim() == rank, name, " has shape ", py_tuple(x->sizes()), "; ",
                      varlen ? "flash_attn_varlen_func" : "flash_attn_func", " takes ", layout,
                      varlen ? "" : " (for packed sequences use flash_attn_varlen_func)");
    TORCH_CHECK_VALUE(x->numel() > 0, name, " has shape ", py_tuple(x->sizes()),
                      ": every dimension must be at least 1");
  }
  TORCH_CHECK_TYPE(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
                   "q, k, v must share one dtype, got ", py_dtype(q.scalar_type()), ", ", py_dtype(k.scalar_type()),
                   ", ", py_dtype(v.scalar_type()), ": cast them to one (e.g. all float16)");
  const auto qs = q.sizes(), ks = k.sizes(), vs = v.sizes();
  TORCH_CHECK_VALUE(ks.slice(0, rank - 1) == vs.slice(0, rank - 1), "k ", py_tuple(ks), " and v ", py_tuple(vs),
                    " must agree in every dimension but the last (headdim)");
  TORCH_CHECK_VALUE(qs[rank - 1] == ks[rank - 1], "q's headdim ", qs[rank - 1], " differs from k's ", ks[rank - 1],
                    ": q and k must have the same headdim");
  const int64_t heads_q = qs[rank - 2], heads_kv = ks[rank - 2];
  TORCH_CHECK_VALUE(heads_q % heads_kv == 0, "q has ", heads_q, " heads and k, v have ", heads_kv, ": the query "
                    "heads must be a multiple of the key/value heads (GQA/MQA); k, v could have ",
                    py_list(divisors(heads_q), heads_q), " heads");
  if (!varlen) {
    TORCH_CHECK_VALUE(qs[0] == ks[0], "q has batch ", qs[0], " but k has ", ks[0], ": they must match");
    return {qs[0], qs[1], ks[1], heads_q, heads_kv, qs[3], vs[3], qs[0] * qs[1], ks[0] * ks[1], false};
  }
  const int64_t entries_q = cu_q->dim() == 1 ? cu_q->size(0) : -1, entries_k = cu_k->dim() == 1 ? cu_k->size(0) : -1;
  const int64_t batch = entries_q - 1;
  TORCH_CHECK_VALUE(entries_k - 1 == batch && batch >= 1, "cu_seqlens_q has ", entries_q, " entries and "
                    "cu_seqlens_k ", entries_k, ": both must have batch + 1 entries (batch >= 1)");
  return {batch, max_seqlen_q, max_seqlen_k, heads_q, heads_kv, qs[2], vs[2], qs[0], ks[0], true};
}

// _checks.check_offsets: the offsets, copied to the host (a sync, as the Python op's .tolist() was), must
// start at 0 and end at the packed tensors' token counts, or a kernel would read past them.
Tensor host_offsets(const Tensor& cu, const char* name, int64_t total, const char* tensor) {
  Tensor host = cu.to(at::kCPU).contiguous();  // (batch + 1,) int32
  const int32_t* p = host.data_ptr<int32_t>();
  const int64_t n = host.numel();
  if (p[0] != 0 || p[n - 1] != total) {
    std::vector<int64_t> values(p, p + n);
    TORCH_CHECK_VALUE(false, name, " = ", py_list(values, 8), " must start at 0 and end at the ", tensor,
                      "'s token count ", total);
  }
  return host;
}

// _checks.check_alibi_shape, then the slopes as host fp64 (what flashlab_problem points at).
Tensor host_slopes(const Tensor& alibi, const Shapes& s) {
  TORCH_CHECK_VALUE(alibi.dim() == 1 && alibi.size(0) == s.heads_q, "alibi_slopes has shape ",
                    py_tuple(alibi.sizes()), "; flashlab takes one slope per query head: (", s.heads_q,
                    ",) (per-batch slopes (batch, nheads) are not supported)");
  return alibi.to(at::kCPU).to(at::kDouble).contiguous();  // (heads_q,) fp64
}

// bwd's extra tensors (out, dout, lse) against the shapes the forward returned.
void check_like(const Tensor& x, const char* name, const Tensor& q, at::ScalarType dtype,
                const std::vector<int64_t>& want) {
  TORCH_CHECK_VALUE(x.device() == q.device(), "q is on ", q.device(), " but ", name, " is on ", x.device(),
                    ": move every tensor to one device");
  TORCH_CHECK_TYPE(x.scalar_type() == dtype, name, " is ", py_dtype(x.scalar_type()), "; expected ",
                   py_dtype(dtype), " (as the forward returned it)");
  TORCH_CHECK_VALUE(x.sizes() == at::IntArrayRef(want), name, " has shape ", py_tuple(x.sizes()), "; expected ",
                    py_tuple(want), " (as the forward returned it)");
  TORCH_CHECK_VALUE(x.is_contiguous(), name, " is not contiguous (shape ", py_tuple(x.sizes()), ", strides ",
                    py_tuple(x.strides()), "): the GPU kernels read contiguous tensors; pass ", name,
                    ".contiguous()");
}

// ============================================================================================================
// [SECTION] The C structs
// ============================================================================================================
// Zero-filled, then struct_size and abi_version as flashlab.h asks, then only the fields we know: a field
// appended to the header later (a new ABI version) stays 0, its documented default.

int32_t abi_dtype(at::ScalarType t) {
  return t == at::kBFloat16 ? FLASHLAB_BF16 : t == at::kHalf ? FLASHLAB_FP16 : FLASHLAB_FP32;
}

// What the problem's pointers point into: kept alive for the duration of the call.
struct HostCopies {
  Tensor cu_q, cu_k;                 // (batch + 1,) int32
  Tensor slopes;                     // (heads_q,) fp64
  int64_t mask_kind = 0;             // enum flashlab_mask_kind
  std::vector<int64_t> mask_values;  // prefix lengths, document lengths, or {chunk}
  Tensor dense;                      // (sq, sk) or (batch|1, heads|1, sq, sk) uint8
};

// torch_ops._mask_of's checks: what the struct's fields need before the library judges the values (a
// chunk size present, a dense mask of at most 4 dimensions, which is all dense_shape holds).
void host_mask(HostCopies& host, int64_t mask_kind, OptionalInts mask_values, const OptionalTensor& dense_mask) {
  host.mask_kind = mask_kind;
  if (mask_kind == 0) return;
  TORCH_CHECK_VALUE(mask_kind >= 1 && mask_kind <= 4, "mask_kind ", mask_kind, ": expected 0 (none), 1 "
                    "(prefix-lm), 2 (document), 3 (chunked) or 4 (dense)");
  if (mask_values.has_value()) host.mask_values.assign(mask_values->begin(), mask_values->end());
  if (mask_kind == FLASHLAB_MASK_DENSE) {
    TORCH_CHECK_VALUE(dense_mask.has_value(), "mask_kind 4 (dense) needs dense_mask, a bool tensor (sq, sk) or "
                      "(batch|1, heads|1, sq, sk)");
    TORCH_CHECK_VALUE(dense_mask->dim() == 2 || dense_mask->dim() == 4, "a dense mask has shape (sq, sk) or "
                      "(batch|1, heads|1, sq, sk), got ", py_tuple(dense_mask->sizes()));
    host.dense = dense_mask->to(at::kCPU).ne(0).to(at::kByte).contiguous();  // one byte per bit, C order
  }
  TORCH_CHECK_VALUE(mask_kind != FLASHLAB_MASK_CHUNKED || host.mask_values.size() == 1, "mask_kind 3 (chunked) "
                    "takes mask_values=[chunk size], got ", py_list(host.mask_values, 8));
}

// Both passes' host copies: varlen's offsets (checked), ALiBi's slopes and the mask, where the call has them.
HostCopies host_copies(const Shapes& s, const OptionalTensor& cu_q, const OptionalTensor& cu_k,
                       const OptionalTensor& alibi_slopes, int64_t mask_kind, OptionalInts mask_values,
                       const OptionalTensor& dense_mask) {
  HostCopies host;
  if (s.varlen) {
    host.cu_q = host_offsets(*cu_q, "cu_seqlens_q", s.total_q, "q");
    host.cu_k = host_offsets(*cu_k, "cu_seqlens_k", s.total_k, "k");
  }
  if (alibi_slopes.has_value()) host.slopes = host_slopes(*alibi_slopes, s);
  host_mask(host, mask_kind, mask_values, dense_mask);
  return host;
}

// flashlab_problem's mask fields (ABI 2) from the host copies; only the mask kind's own fields are set.
void set_mask(flashlab_problem& p, const HostCopies& host) {
  p.mask_kind = static_cast<int32_t>(host.mask_kind);
  const auto count = static_cast<int64_t>(host.mask_values.size());
  switch (host.mask_kind) {
    case FLASHLAB_MASK_PREFIX_LM:
      p.mask_prefix = host.mask_values.data();
      p.mask_prefix_count = count;
      break;
    case FLASHLAB_MASK_DOCUMENT:
      p.doc_lengths = host.mask_values.data();
      p.doc_lengths_count = count;
      break;
    case FLASHLAB_MASK_CHUNKED:
      p.chunk = host.mask_values[0];  // host_mask made sure there is one
      break;
    case FLASHLAB_MASK_DENSE:
      p.dense_mask = host.dense.data_ptr<uint8_t>();
      p.dense_ndim = static_cast<int32_t>(host.dense.dim());
      for (int64_t n = 0; n < host.dense.dim(); ++n) p.dense_shape[n] = host.dense.size(n);
      break;
    default:
      break;
  }
}

flashlab_problem make_problem(const Shapes& s, at::ScalarType dtype, double dropout_p, double softmax_scale,
                              bool causal, int64_t window_left, int64_t window_right, double softcap, int64_t seed,
                              const HostCopies& host) {
  flashlab_problem p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.abi_version = FLASHLAB_ABI_VERSION;
  p.batch = s.batch;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.head_dim = s.head_dim;
  p.head_dim_v = s.head_dim_v;
  p.dtype = abi_dtype(dtype);
  p.causal = causal ? 1 : 0;
  p.window_left = window_left;
  p.window_right = window_right;
  p.scale = softmax_scale;  // 0: 1/sqrt(head_dim)
  p.softcap = softcap;
  p.dropout_p = dropout_p;
  p.seed = static_cast<uint64_t>(seed);
  if (host.slopes.defined()) {
    p.alibi = 1;
    p.alibi_slopes = host.slopes.data_ptr<double>();
  }
  if (host.cu_q.defined()) {
    p.cu_seqlens_q = host.cu_q.data_ptr<int32_t>();
    p.cu_seqlens_k = host.cu_k.data_ptr<int32_t>();
  }
  set_mask(p, host);
  return p;
}

// Both passes' pointers: q, k, v, the forward's O and LSE (its outputs, or the backward's inputs), the
// offsets; the backward adds dO and the gradients.
flashlab_tensors make_tensors(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                              const OptionalTensor& cu_q, const OptionalTensor& cu_k, bool deterministic) {
  flashlab_tensors t;
  std::memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.abi_version = FLASHLAB_ABI_VERSION;
  t.q = q.data_ptr();
  t.k = k.data_ptr();
  t.v = v.data_ptr();
  t.o = o.data_ptr();
  t.lse = lse.data_ptr<float>();
  if (cu_q.has_value()) {
    t.cu_seqlens_q_device = cu_q->data_ptr<int32_t>();
    t.cu_seqlens_k_device = cu_k->data_ptr<int32_t>();
  }
  t.stream = c10::cuda::getCurrentCUDAStream(q.get_device()).stream();  // PyTorch's current stream on q's GPU
  t.deterministic = deterministic ? 1 : 0;
  return t;
}

// Calls an entry point; its error text becomes the exception's message (torch's RuntimeError).
void call(EntryPoint entry, const std::string& impl, const flashlab_problem& p, const flashlab_tensors& t) {
  TORCH_CHECK(entry != nullptr, "flashlab's C++ ops have no entry points: they are handed over when "
              "flashlab.torch_ops is imported (import flashlab.torch_ops, or call flashlab.flash_attn_func)");
  char error[kErrorLen] = {0};
  TORCH_CHECK(entry(impl.c_str(), &p, &t, error, sizeof error) == 0, error);
}

// ============================================================================================================
// [SECTION] CUDA kernels
// ============================================================================================================

// An output on the current GPU straight from the CUDA allocator (what aten::empty's CUDA kernel calls),
// without a trip through the dispatcher: on the H100's host two at::empty cost ~2 us more a call
// (python/README.md, the op's overhead).
Tensor new_cuda(at::IntArrayRef shape, const at::TensorOptions& options) {
  return at::detail::empty_cuda(shape, options);
}

std::tuple<Tensor, Tensor> fwd_cuda(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    double softmax_scale, int64_t window_left, int64_t window_right, double softcap,
                                    double dropout_p, int64_t seed, const OptionalTensor& alibi_slopes,
                                    const OptionalTensor& cu_q, const OptionalTensor& cu_k, int64_t max_seqlen_q,
                                    int64_t max_seqlen_k, c10::string_view impl_view, bool deterministic,
                                    int64_t mask_kind, OptionalInts mask_values, const OptionalTensor& dense_mask) {
  const std::string impl = impl_view.empty() ? "fa2" : std::string(impl_view.data(), impl_view.size());
  check_tensors(q, k, v, cu_q, cu_k, impl);
  const Shapes s = attention_shapes(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k);
  const HostCopies host = host_copies(s, cu_q, cu_k, alibi_slopes, mask_kind, mask_values, dense_mask);

  const c10::cuda::CUDAGuard guard(q.device());  // q's GPU current for the call; a no-op when it already is
  Tensor out = new_cuda(s.o_shape(), q.options());                      // (batch, seqlen_q, heads_q, head_dim_v)
  Tensor lse = new_cuda(s.lse_shape(), q.options().dtype(at::kFloat));  // (batch, heads_q, seqlen_q) fp32

  const flashlab_problem p = make_problem(s, q.scalar_type(), dropout_p, softmax_scale, causal, window_left,
                                          window_right, softcap, seed, host);
  const flashlab_tensors t = make_tensors(q, k, v, out, lse, cu_q, cu_k, deterministic);
  call(g_forward, impl, p, t);
  return {out, lse};
}

std::tuple<Tensor, Tensor, Tensor> bwd_cuda(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& out, const Tensor& softmax_lse, const OptionalTensor& cu_q,
                                            const OptionalTensor& cu_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                                            double dropout_p, double softmax_scale, bool causal, int64_t window_left,
                                            int64_t window_right, double softcap, const OptionalTensor& alibi_slopes,
                                            int64_t seed, c10::string_view impl_view, bool deterministic,
                                            int64_t mask_kind, OptionalInts mask_values,
                                            const OptionalTensor& dense_mask) {
  const std::string impl(impl_view.data(), impl_view.size());
  check_tensors(q, k, v, cu_q, cu_k, impl);
  const Shapes s = attention_shapes(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k);
  check_like(out, "out", q, q.scalar_type(), s.o_shape());
  check_like(dout, "dout", q, q.scalar_type(), s.o_shape());
  check_like(softmax_lse, "softmax_lse", q, at::kFloat, s.lse_shape());
  const HostCopies host = host_copies(s, cu_q, cu_k, alibi_slopes, mask_kind, mask_values, dense_mask);

  const c10::cuda::CUDAGuard guard(q.device());
  Tensor dq = new_cuda(q.sizes(), q.options());  // (batch, seqlen_q, heads_q,  head_dim), contiguous as q
  Tensor dk = new_cuda(k.sizes(), k.options());  // (batch, seqlen_k, heads_kv, head_dim)
  Tensor dv = new_cuda(v.sizes(), v.options());  // (batch, seqlen_k, heads_kv, head_dim_v)

  const flashlab_problem p = make_problem(s, q.scalar_type(), dropout_p, softmax_scale, causal, window_left,
                                          window_right, softcap, seed, host);
  flashlab_tensors t = make_tensors(q, k, v, out, softmax_lse, cu_q, cu_k, deterministic);
  t.d_o = dout.data_ptr();
  t.dq = dq.data_ptr();
  t.dk = dk.data_ptr();
  t.dv = dv.data_ptr();
  call(g_backward, impl, p, t);
  return {dq, dk, dv};
}

// ============================================================================================================
// [SECTION] Autograd
// ============================================================================================================
// torch_ops._setup_context and _backward in C++: the forward's inputs and outputs saved, bwd run on dout.
// The integer options are SymInts here (the schema's type), so torch.compile's tracing with symbolic sizes
// passes through this kernel as it did through the Python registration.

// The typed handles of the ops, looked up once: calling through the dispatcher reaches the CUDA kernel
// above for CUDA tensors, the Python CPU kernel for CPU tensors, the fake one under torch.compile.
using FwdSignature = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, bool, double,
                                                c10::SymInt, c10::SymInt, double, double, c10::SymInt,
                                                const OptionalTensor&, const OptionalTensor&, const OptionalTensor&,
                                                c10::SymInt, c10::SymInt, c10::string_view, bool, c10::SymInt,
                                                OptionalSymInts, const OptionalTensor&);
using BwdSignature = std::tuple<Tensor, Tensor, Tensor>(
    const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const OptionalTensor&,
    const OptionalTensor&, c10::SymInt, c10::SymInt, double, double, bool, c10::SymInt, c10::SymInt, double,
    const OptionalTensor&, c10::SymInt, c10::string_view, bool, c10::SymInt, OptionalSymInts, const OptionalTensor&);

const c10::TypedOperatorHandle<FwdSignature>& fwd_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("flashlab::fwd", "").typed<FwdSignature>();
  return op;
}

const c10::TypedOperatorHandle<BwdSignature>& bwd_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("flashlab::bwd", "").typed<BwdSignature>();
  return op;
}

// torch_ops._backward_impl: on the GPU fa3's where its backward takes the problem (head dims up to 256, no
// ALiBi, dropout or dense mask: it takes the interval masks), else fa2's (standard has none); on the CPU the
// forward's implementation when it has a backward, else tiled-fa2.
std::string backward_impl(const std::string& impl, bool on_cuda, int64_t head_dim, double dropout_p, bool alibi,
                          bool dense_masked) {
  if (on_cuda) return is_fa3(impl) && head_dim <= 256 && dropout_p == 0 && !alibi && !dense_masked ? "fa3" : "fa2";
  for (const char* name : {"reference", "tiled-fa1", "tiled-fa2", "gpu-fa2", "gpu-fa2-deterministic"})
    if (impl == name) return impl;
  return "tiled-fa2";
}

Tensor value_or_undefined(const OptionalTensor& x) { return x.has_value() ? *x : Tensor(); }
OptionalTensor optional_of(const Tensor& x) { return x.defined() ? OptionalTensor(x) : OptionalTensor(); }

// mask_values kept for the backward: None, or a tuple of its SymInts (an IValue saved_data can hold in
// every torch this compiles with), and back.
c10::IValue saved_ints(const OptionalSymInts& values) {
  if (!values.has_value()) return c10::IValue();
  std::vector<c10::IValue> items(values->begin(), values->end());
  return c10::ivalue::Tuple::create(std::move(items));
}
std::vector<c10::SymInt> ints_of(const c10::IValue& saved) {
  std::vector<c10::SymInt> values;
  if (saved.isTuple())
    for (const c10::IValue& x : saved.toTupleRef().elements()) values.push_back(x.toSymInt());
  return values;
}

struct Attention : public torch::autograd::Function<Attention> {
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
      double scale, c10::SymInt wl, c10::SymInt wr, double softcap, double dropout_p, c10::SymInt seed,
      const OptionalTensor& alibi, const OptionalTensor& cu_q, const OptionalTensor& cu_k, c10::SymInt max_q,
      c10::SymInt max_k, c10::string_view impl, bool deterministic, c10::SymInt mask_kind,
      OptionalSymInts mask_values, const OptionalTensor& dense_mask) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [out, lse] = fwd_op().call(q, k, v, causal, scale, wl, wr, softcap, dropout_p, seed, alibi, cu_q, cu_k,
                                    max_q, max_k, impl, deterministic, mask_kind, mask_values, dense_mask);
    // what _setup_context saves: the tensors (absent ones as undefined), the options as IValues
    ctx->save_for_backward({q, k, v, out, lse, value_or_undefined(cu_q), value_or_undefined(cu_k),
                            value_or_undefined(alibi), value_or_undefined(dense_mask)});
    const bool dense_masked = mask_kind == FLASHLAB_MASK_DENSE;
    ctx->saved_data["mask_kind"] = std::move(mask_kind);
    ctx->saved_data["mask_values"] = saved_ints(mask_values);
    ctx->saved_data["max_q"] = std::move(max_q);
    ctx->saved_data["max_k"] = std::move(max_k);
    ctx->saved_data["dropout_p"] = dropout_p;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["wl"] = std::move(wl);
    ctx->saved_data["wr"] = std::move(wr);
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["seed"] = std::move(seed);
    ctx->saved_data["deterministic"] = deterministic;
    ctx->saved_data["impl"] =
        backward_impl(std::string(impl.data(), impl.size()), q.is_cuda(), q.size(-1), dropout_p, alibi.has_value(),
                      dense_masked);
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    // only the LSE used downstream: its gradient is not propagated (as in flash-attn), dout is zero
    Tensor dout = grads[0].defined() ? grads[0].contiguous() : at::zeros_like(out);
    const auto& d = ctx->saved_data;
    const std::string impl = d.at("impl").toStringRef();
    const std::vector<c10::SymInt> mask_values = ints_of(d.at("mask_values"));
    const OptionalSymInts mask_values_arg =
        d.at("mask_values").isNone() ? OptionalSymInts() : OptionalSymInts(c10::SymIntArrayRef(mask_values));
    auto [dq, dk, dv] = bwd_op().call(
        dout, q, k, v, out, lse, optional_of(saved[5]), optional_of(saved[6]), d.at("max_q").toSymInt(),
        d.at("max_k").toSymInt(), d.at("dropout_p").toDouble(), d.at("scale").toDouble(), d.at("causal").toBool(),
        d.at("wl").toSymInt(), d.at("wr").toSymInt(), d.at("softcap").toDouble(), optional_of(saved[7]),
        d.at("seed").toSymInt(), impl, d.at("deterministic").toBool(), d.at("mask_kind").toSymInt(),
        mask_values_arg, optional_of(saved[8]));
    // one gradient per forward input: q, k, v, then none for the 17 options
    torch::autograd::variable_list result(20);
    result[0] = dq;
    result[1] = dk;
    result[2] = dv;
    return result;
  }
};

// The Autograd kernel. Without a gradient to record (grad mode off, or no input requiring one) it goes
// straight to the device kernel: no autograd node, nothing saved.
std::tuple<Tensor, Tensor> fwd_autograd(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                                        c10::SymInt wl, c10::SymInt wr, double softcap, double dropout_p,
                                        c10::SymInt seed, const OptionalTensor& alibi, const OptionalTensor& cu_q,
                                        const OptionalTensor& cu_k, c10::SymInt max_q, c10::SymInt max_k,
                                        c10::string_view impl, bool deterministic, c10::SymInt mask_kind,
                                        OptionalSymInts mask_values, const OptionalTensor& dense_mask) {
  const bool needs_grad =
      at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  if (!needs_grad) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return fwd_op().call(q, k, v, causal, scale, std::move(wl), std::move(wr), softcap, dropout_p, std::move(seed),
                         alibi, cu_q, cu_k, std::move(max_q), std::move(max_k), impl, deterministic,
                         std::move(mask_kind), mask_values, dense_mask);
  }
  auto outputs = Attention::apply(q, k, v, causal, scale, std::move(wl), std::move(wr), softcap, dropout_p,
                                  std::move(seed), alibi, cu_q, cu_k, std::move(max_q), std::move(max_k), impl,
                                  deterministic, std::move(mask_kind), mask_values, dense_mask);
  return {outputs[0], outputs[1]};
}

}  // namespace flashlab_ops

// ============================================================================================================
// [SECTION] Registration
// ============================================================================================================
// The schemas torch.library.custom_op inferred from torch_ops.py's signatures; test_gpu.py compares them
// with torch.library.infer_schema on the GPU machine.

TORCH_LIBRARY(flashlab, m) {
  // fwd's options most used first, each with its default: a caller passes the few it sets (torch_ops.py
  // trims the rest), and every argument not passed saves its conversion from Python (~0.2 us each, H100
  // host, 2026-11-23). impl "" is the device's default (fa2 here, tiled-fa2 on the CPU).
  m.def("fwd(Tensor q, Tensor k, Tensor v, bool causal=False, float softmax_scale=0., SymInt window_left=-1, "
        "SymInt window_right=-1, float softcap=0., float dropout_p=0., SymInt seed=0, Tensor? alibi_slopes=None, "
        "Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, SymInt max_seqlen_q=0, SymInt max_seqlen_k=0, "
        "str impl=\"\", bool deterministic=False, SymInt mask_kind=0, SymInt[]? mask_values=None, "
        "Tensor? dense_mask=None) -> (Tensor, Tensor)");
  m.def("bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, Tensor? cu_seqlens_q, "
        "Tensor? cu_seqlens_k, SymInt max_seqlen_q, SymInt max_seqlen_k, float dropout_p, float softmax_scale, "
        "bool causal, SymInt window_left, SymInt window_right, float softcap, Tensor? alibi_slopes, SymInt seed, "
        "str impl, bool deterministic, SymInt mask_kind=0, SymInt[]? mask_values=None, Tensor? dense_mask=None) "
        "-> (Tensor, Tensor, Tensor)");
  // no tensors: a catch-all kernel, called once by flashlab/_cpp_ops.py with the library's addresses
  m.def("_set_entry_points(int forward, int backward, int abi_version) -> ()", &flashlab_ops::set_entry_points);
}

TORCH_LIBRARY_IMPL(flashlab, CUDA, m) {
  m.impl("fwd", &flashlab_ops::fwd_cuda);
  m.impl("bwd", &flashlab_ops::bwd_cuda);
}

TORCH_LIBRARY_IMPL(flashlab, Autograd, m) {
  m.impl("fwd", &flashlab_ops::fwd_autograd);
}
