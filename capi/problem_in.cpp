#include <cstddef>
#include <cstring>
#include <string>

#include "api.hpp"
#include "flashlab/error.hpp"
#include "flashlab/tensor.hpp"

namespace flashlab::capi {
namespace {

// The struct sizes of every ABI version this library reads: fields are only appended, so a version's
// size is the offset of the first field the next version added.
struct Layout {
  uint32_t version;
  size_t size;
};
constexpr Layout kProblemLayouts[] = {
    {1, offsetof(flashlab_problem, mask_kind)}, {2, sizeof(flashlab_problem)}, {3, sizeof(flashlab_problem)}};
constexpr Layout kTensorsLayouts[] = {
    {1, offsetof(flashlab_tensors, mask)}, {2, offsetof(flashlab_tensors, descale_q)}, {3, sizeof(flashlab_tensors)}};
constexpr Layout kDecodeLayouts[] = {{1, sizeof(flashlab_decode)}, {2, sizeof(flashlab_decode)},
                                     {3, sizeof(flashlab_decode)}};  // unchanged in 2 and 3
static_assert(offsetof(flashlab_problem, mask_kind) == 152 && offsetof(flashlab_tensors, mask) == 112,
              "ABI 1's structs are frozen: append new fields after them");
static_assert(offsetof(flashlab_tensors, descale_q) == 120 && sizeof(flashlab_tensors) == 136,
              "ABI 2's flashlab_tensors is frozen: append new fields after it");

// The caller's struct, of any version in `known`, as this header's struct: the fields a version-1
// caller does not have are 0 (no mask). Only the caller's own struct_size bytes are read, and a size or
// version not in `known` is refused before any field past the two is.
template <class Struct, size_t N>
Struct upgraded(const void* caller, const Layout (&known)[N], const char* name) {
  uint32_t header[2];  // struct_size, abi_version
  std::memcpy(header, caller, sizeof header);
  for (const Layout& l : known)
    if (header[0] == l.size && header[1] == l.version) {
      Struct s{};
      std::memcpy(static_cast<void*>(&s), caller, l.size);
      s.struct_size = sizeof(Struct);
      s.abi_version = FLASHLAB_ABI_VERSION;
      return s;
    }
  std::string versions;
  for (const Layout& l : known)
    versions += (versions.empty() ? "" : ", ") + std::to_string(l.size) + " bytes with version " + std::to_string(l.version);
  throw Error(std::string(name) + ": the caller's struct has struct_size " + std::to_string(header[0]) +
              " and abi_version " + std::to_string(header[1]) + "; this library (ABI " +
              std::to_string(FLASHLAB_ABI_VERSION) + ") reads " + versions +
              ": set both fields, and build against this library's flashlab.h");
}

// Bounds that keep the copies below from reading a wild count before validate() has looked at it.
constexpr int64_t kMaxEntries = int64_t{1} << 24;

std::vector<int64_t> offsets(const int32_t* cu, int64_t batch) {
  return std::vector<int64_t>(cu, cu + batch + 1);
}

// A caller's (pointer, count) array: NULL only with count 0.
std::vector<int64_t> entries(const int64_t* ptr, int64_t count, const char* name) {
  if (count < 0 || count > kMaxEntries)
    throw Error(std::string("invalid problem: ") + name + "_count must be in [0, 2^24], got " + std::to_string(count));
  if (count > 0 && !ptr)
    throw Error(std::string("invalid problem: ") + name + " is NULL but " + name + "_count is " + std::to_string(count) +
                ": pass the host array, or count 0");
  return count ? std::vector<int64_t>(ptr, ptr + count) : std::vector<int64_t>{};
}

// ABI 2's mask fields as a Mask. Only what the C fields themselves can get wrong is judged here (kind,
// NULL with a count, dense_ndim); Problem::validate judges the mask against the problem. A dense mask's
// shape is set now and its bytes are read by read_dense_bits() once validate() has agreed to the shape.
Mask mask_of(const flashlab_problem& c, std::shared_ptr<DenseMask>& dense) {
  if (c.mask_kind < FLASHLAB_MASK_NONE || c.mask_kind > FLASHLAB_MASK_DENSE)
    throw Error("invalid problem: mask_kind must be 0 (none), 1 (prefix-lm), 2 (document), 3 (chunked) or 4 (dense), "
                "got " + std::to_string(c.mask_kind));
  static_assert(int(MaskKind::dense) == FLASHLAB_MASK_DENSE && int(MaskKind::prefix_lm) == FLASHLAB_MASK_PREFIX_LM);
  Mask m;
  m.kind = static_cast<MaskKind>(c.mask_kind);
  m.prefix = entries(c.mask_prefix, c.mask_prefix_count, "mask_prefix");
  m.doc_lengths = entries(c.doc_lengths, c.doc_lengths_count, "doc_lengths");
  m.chunk = c.chunk;
  if (c.dense_mask || c.dense_ndim != 0 || m.kind == MaskKind::dense) {
    if (!c.dense_mask)
      throw Error("invalid problem: a dense mask needs dense_mask (host bytes, nonzero = may attend) with dense_shape "
                  "and dense_ndim; got NULL");
    if (c.dense_ndim != 2 && c.dense_ndim != 4)
      throw Error("invalid problem: dense_ndim must be 2 ((seqlen_q, seqlen_k)) or 4 ((batch|1, heads|1, seqlen_q, "
                  "seqlen_k)), got " + std::to_string(c.dense_ndim));
    dense = std::make_shared<DenseMask>();
    dense->bits.shape.assign(c.dense_shape, c.dense_shape + c.dense_ndim);
    dense->source = "C ABI";
    m.dense = dense;
  }
  return m;
}

// The dense bytes, once their shape is the problem's: (sq, sk) or (batch|1, heads|1, sq, sk).
void read_dense_bits(const uint8_t* src, DenseMask& dense) {
  dense.bits.data.resize(size_t(Tensor::count(dense.bits.shape)));
  for (size_t n = 0; n < dense.bits.data.size(); ++n) dense.bits.data[n] = src[n] != 0;
}

}  // namespace

Problem to_problem(const flashlab_problem* caller) {
  if (!caller) throw Error("problem is NULL: pass a flashlab_problem");
  const flashlab_problem c = upgraded<flashlab_problem>(caller, kProblemLayouts, "flashlab_problem");
  if (c.dtype < FLASHLAB_FP32 || c.dtype > FLASHLAB_BF16)
    throw Error("invalid problem: dtype must be 0 (fp32), 1 (fp16) or 2 (bf16), got " + std::to_string(c.dtype));
  Problem p;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.head_dim = c.head_dim;
  p.head_dim_v = c.head_dim_v;
  p.dtype = static_cast<DType>(c.dtype);
  p.causal = c.causal != 0;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.scale = c.scale;
  p.softcap = c.softcap;
  p.alibi = c.alibi != 0;
  p.dropout_p = c.dropout_p;
  p.seed = c.seed;
  if (p.alibi && c.alibi_slopes) {
    if (p.heads_q <= 0 || p.heads_q > kMaxEntries) throw Error("invalid problem: heads_q must be positive");
    p.alibi_slopes.assign(c.alibi_slopes, c.alibi_slopes + p.heads_q);
  }
  if ((c.cu_seqlens_q == nullptr) != (c.cu_seqlens_k == nullptr))
    throw Error("invalid problem: varlen needs both cu_seqlens_q and cu_seqlens_k (or neither)");
  if (c.cu_seqlens_q) {
    if (p.batch <= 0 || p.batch > kMaxEntries) throw Error("invalid problem: batch must be positive");
    p.cu_seqlens_q = offsets(c.cu_seqlens_q, p.batch);
    p.cu_seqlens_k = offsets(c.cu_seqlens_k, p.batch);
  }
  std::shared_ptr<DenseMask> dense;
  p.mask = mask_of(c, dense);
  p.validate();
  if (dense) read_dense_bits(c.dense_mask, *dense);
  return p;
}

flashlab_tensors checked_tensors(const flashlab_tensors* t) {
  if (!t) throw Error("tensors is NULL: pass a flashlab_tensors");
  return upgraded<flashlab_tensors>(t, kTensorsLayouts, "flashlab_tensors");
}

flashlab_decode checked_decode(const flashlab_decode* call) {
  if (!call) throw Error("call is NULL");
  return upgraded<flashlab_decode>(call, kDecodeLayouts, "flashlab_decode");
}

}  // namespace flashlab::capi
