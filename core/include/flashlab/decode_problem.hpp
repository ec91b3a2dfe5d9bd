// DecodeProblem: one attention call against a KV cache, as flash-attn's
// flash_attn_with_kvcache describes it (inference: a few new queries attend to
// thousands of cached keys).
//
// Tensors (contiguous cache, or paged through a block table as vLLM's PagedAttention):
//   Q, O           (batch, q_len, heads_q, head_dim)
//   LSE            (batch, heads_q, q_len)                natural log; -inf for a row that sees nothing
//   K/V cache      (batch, cache_len, heads_kv, head_dim)       contiguous (page_size == 0)
//                  (num_pages, page_size, heads_kv, head_dim)   paged
//   block table    (batch, max_pages)                     logical page p of entry b -> physical page
//   cache_seqlens  (batch)                                keys already in the cache
//   K/V new        (batch, new_len, heads_kv, head_dim)   optional: written into the cache at
//                                                         positions cache_seqlens[b] .. + new_len - 1
//   cos, sin       (rotary_seqlen, rotary_dim / 2)        optional rotary embedding (needs K/V new)
//
// One call does, in order:
//   1. rotary (if on) on each K_new row t at position cache_seqlens[b] + t, and on each query
//      row i at position cache_seqlens[b] + i when the mask is causal, else at cache_seqlens[b]
//      for every row (flash-attn's convention: a non-causal query is one position);
//   2. append: cache[b, cache_seqlens[b] + t] = K_new[b, t] (V likewise), in place;
//   3. attention of Q over the seqlen_k(b) = cache_seqlens[b] + new_len keys of entry b, with
//      the options of Problem (scale, causal bottom-right, softcap, GQA).
//
// Design: a DecodeProblem is not a second kind of Problem. Step 3 *is* an
// attention Problem, so attention() lowers it to one: a varlen Problem with
// len_q(b) = q_len and len_k(b) = seqlen_k(b). Its validate() judges the shared
// fields, its col_begin/col_end are the mask, its ScoreFn the logits, and the
// reference and tiled executors run it unchanged. What decoding adds is only
// *where key j of entry b lives*: cache_row(b, j), the one indexing rule for the
// cache (contiguous: b * cache_len + j; paged: block_table[b][j / page_size] *
// page_size + j % page_size). Keeping that rule out of Problem leaves every
// existing consumer (schedule, simulator, GPU kernels) untouched by decoding,
// and keeping the attention options out of DecodeProblem's own checks leaves
// one validate() per fact: DecodeProblem::validate() checks the cache and calls
// attention().validate() for the rest.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "flashlab/dtype.hpp"
#include "flashlab/problem.hpp"

namespace flashlab {

enum class Rotary { none, interleaved, half };  // GPT-J pairs (2k, 2k+1) | GPT-NeoX halves (k, k + rd/2)
std::string to_string(Rotary r);
Rotary parse_rotary(const std::string& name);  // "none" | "interleaved" | "half"

struct DecodeProblem {
  int64_t batch = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  int64_t head_dim = 64;
  int64_t q_len = 1;                   // queries per batch entry (1 for plain decoding)
  int64_t cache_len = 0;               // contiguous: rows per entry; must be 0 when paged
  int64_t page_size = 0;               // 0: contiguous cache
  int64_t num_pages = 0;               // paged: physical pages in the cache tensors
  int64_t max_pages = 0;               // paged: block table columns
  std::vector<int64_t> block_table;    // paged: (batch, max_pages), row-major
  std::vector<int64_t> cache_seqlens;  // (batch)
  int64_t new_len = 0;                 // rows of K/V new per entry; 0: no append
  Rotary rotary = Rotary::none;
  int64_t rotary_dim = 0;              // 0: head_dim; even, <= head_dim; the dims after it are not rotated
  int64_t rotary_seqlen = 0;           // rows of cos/sin; 0: capacity()
  double scale = 0.0;                  // 0: 1/sqrt(head_dim)
  bool causal = false;
  double softcap = 0.0;
  int64_t num_splits = 1;              // split-KV: the key blocks of each entry cut into this many splits
  DType dtype = DType::fp32;

  // Throws flashlab::Error naming the first thing that is wrong and what was expected.
  void validate() const;

  // ---- derived (valid after validate()) ----
  bool paged() const { return page_size > 0; }
  int64_t capacity() const { return paged() ? max_pages * page_size : cache_len; }  // logical rows per entry
  int64_t seqlen_k(int64_t b) const { return cache_seqlens[b] + new_len; }
  int64_t max_seqlen_k() const;
  int64_t rot_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  int64_t rope_rows() const { return rotary_seqlen > 0 ? rotary_seqlen : capacity(); }
  Problem attention() const;  // the lowered attention problem (see the header comment)

  // The one indexing rule of the cache: the physical row of logical key position j of entry b.
  int64_t cache_row(int64_t b, int64_t j) const {
    if (!paged()) return b * cache_len + j;
    return block_table[b * max_pages + j / page_size] * page_size + j % page_size;
  }
  int64_t cache_offset(int64_t b, int64_t j, int64_t g) const { return (cache_row(b, j) * heads_kv + g) * head_dim; }
  int64_t q_offset(int64_t b, int64_t i, int64_t h) const { return ((b * q_len + i) * heads_q + h) * head_dim; }
  int64_t new_offset(int64_t b, int64_t t, int64_t g) const { return ((b * new_len + t) * heads_kv + g) * head_dim; }
  int64_t lse_offset(int64_t b, int64_t h, int64_t i) const { return (b * heads_q + h) * q_len + i; }
  // Rotary positions: key row t of K_new, query row i.
  int64_t new_pos(int64_t b, int64_t t) const { return cache_seqlens[b] + t; }
  int64_t q_pos(int64_t b, int64_t i) const { return cache_seqlens[b] + (causal ? i : 0); }

  std::vector<int64_t> q_shape() const { return {batch, q_len, heads_q, head_dim}; }
  std::vector<int64_t> cache_shape() const {
    return paged() ? std::vector<int64_t>{num_pages, page_size, heads_kv, head_dim}
                   : std::vector<int64_t>{batch, cache_len, heads_kv, head_dim};
  }
  std::vector<int64_t> new_shape() const { return {batch, new_len, heads_kv, head_dim}; }
  std::vector<int64_t> rope_shape() const { return {rope_rows(), rot_dim() / 2}; }
  std::vector<int64_t> o_shape() const { return q_shape(); }
  std::vector<int64_t> lse_shape() const { return {batch, heads_q, q_len}; }

  std::string describe() const;  // one line, for reports
};

}  // namespace flashlab
