#include <string>

#include "api.hpp"
#include "flashlab/error.hpp"

namespace flashlab::capi {
namespace {

// A struct from a caller built against another flashlab.h is refused before any field is read.
void check_header(uint32_t size, uint32_t version, size_t expected, const char* name) {
  if (size == expected && version == FLASHLAB_ABI_VERSION) return;
  throw Error(std::string(name) + ": the caller's struct has struct_size " + std::to_string(size) +
              " and abi_version " + std::to_string(version) + "; this library (ABI " +
              std::to_string(FLASHLAB_ABI_VERSION) + ") expects " + std::to_string(expected) + " bytes and version " +
              std::to_string(FLASHLAB_ABI_VERSION) + ": set both fields, and build against this library's flashlab.h");
}

// Bounds that keep the copies below from reading a wild count before validate() has looked at it.
constexpr int64_t kMaxEntries = int64_t{1} << 24;

std::vector<int64_t> offsets(const int32_t* cu, int64_t batch) {
  return std::vector<int64_t>(cu, cu + batch + 1);
}

}  // namespace

Problem to_problem(const flashlab_problem* c) {
  if (!c) throw Error("problem is NULL: pass a flashlab_problem");
  check_header(c->struct_size, c->abi_version, sizeof(flashlab_problem), "flashlab_problem");
  if (c->dtype < FLASHLAB_FP32 || c->dtype > FLASHLAB_BF16)
    throw Error("invalid problem: dtype must be 0 (fp32), 1 (fp16) or 2 (bf16), got " + std::to_string(c->dtype));
  Problem p;
  p.batch = c->batch;
  p.heads_q = c->heads_q;
  p.heads_kv = c->heads_kv;
  p.seqlen_q = c->seqlen_q;
  p.seqlen_k = c->seqlen_k;
  p.head_dim = c->head_dim;
  p.head_dim_v = c->head_dim_v;
  p.dtype = static_cast<DType>(c->dtype);
  p.causal = c->causal != 0;
  p.window_left = c->window_left;
  p.window_right = c->window_right;
  p.scale = c->scale;
  p.softcap = c->softcap;
  p.alibi = c->alibi != 0;
  p.dropout_p = c->dropout_p;
  p.seed = c->seed;
  if (p.alibi && c->alibi_slopes) {
    if (p.heads_q <= 0 || p.heads_q > kMaxEntries) throw Error("invalid problem: heads_q must be positive");
    p.alibi_slopes.assign(c->alibi_slopes, c->alibi_slopes + p.heads_q);
  }
  if ((c->cu_seqlens_q == nullptr) != (c->cu_seqlens_k == nullptr))
    throw Error("invalid problem: varlen needs both cu_seqlens_q and cu_seqlens_k (or neither)");
  if (c->cu_seqlens_q) {
    if (p.batch <= 0 || p.batch > kMaxEntries) throw Error("invalid problem: batch must be positive");
    p.cu_seqlens_q = offsets(c->cu_seqlens_q, p.batch);
    p.cu_seqlens_k = offsets(c->cu_seqlens_k, p.batch);
  }
  p.validate();
  return p;
}

const flashlab_tensors& checked_tensors(const flashlab_tensors* t) {
  if (!t) throw Error("tensors is NULL: pass a flashlab_tensors");
  check_header(t->struct_size, t->abi_version, sizeof(flashlab_tensors), "flashlab_tensors");
  return *t;
}

}  // namespace flashlab::capi
