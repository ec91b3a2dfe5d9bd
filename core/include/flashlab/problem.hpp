// Problem: one attention call, described completely. Every implementation,
// the schedule and the CLI read the same struct; validate() is the one place
// that decides whether a problem is well formed.
//
// Layouts follow flash_attn_func / flash_attn_varlen_func:
//   Q, O   (batch, seqlen_q, heads_q,  head_dim[_v])  or varlen (total_q, heads_q,  head_dim[_v])
//   K, V   (batch, seqlen_k, heads_kv, head_dim[_v])  or varlen (total_k, heads_kv, head_dim[_v])
//   LSE    (batch, heads_q, seqlen_q)                 or varlen (heads_q, total_q)
// A fixed-length batch is stored exactly like a varlen one whose offsets are
// b * seqlen, so one indexing rule (token = start(b) + i) serves both.
//
// Masks, as FlashAttention 2 defines them when seqlen_q != seqlen_k: the
// diagonal is aligned to the bottom-right corner, i.e. query row i sits at key
// position i + (seqlen_k - seqlen_q). Row i may attend to key column j when
//   j >= i + (seqlen_k - seqlen_q) - window_left    (if window_left  >= 0)
//   j <= i + (seqlen_k - seqlen_q) + window_right   (if window_right >= 0)
// `causal` is the window (-1, 0). `mask` adds a mask function (mask.hpp:
// prefix-LM, document, chunked, or a user's dense boolean mask); the built-in
// kinds narrow each row's interval [col_begin, col_end), a dense mask is read
// element by element on top of it: visible(b, h, i, j) is the whole rule.
// A row that can see no column (possible when seqlen_q > seqlen_k and causal,
// or under a dense mask) has O = 0 and LSE = -inf.
//
// Score of (i, j) before the softmax, in this order:
//   s = scale * q_i . k_j                       scale defaults to 1/sqrt(head_dim)
//   s = softcap * tanh(s / softcap)             if softcap > 0
//   s = s - slope_h * |i + sk - sq - j|         if ALiBi
//   s = -inf                                    if (i, j) is masked
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "flashlab/dtype.hpp"
#include "flashlab/mask.hpp"

namespace flashlab {

struct Problem {
  int64_t batch = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;           // heads_q % heads_kv == 0: GQA, or MQA when 1
  int64_t seqlen_q = 128;         // for varlen: the largest length in the batch
  int64_t seqlen_k = 128;
  int64_t head_dim = 64;
  int64_t head_dim_v = 0;         // 0 means head_dim
  double scale = 0.0;             // 0 means 1/sqrt(head_dim)
  bool causal = false;
  int64_t window_left = -1;       // -1: unbounded
  int64_t window_right = -1;      // -1: unbounded
  double softcap = 0.0;           // 0: off
  bool alibi = false;
  std::vector<double> alibi_slopes;  // per query head; empty with alibi=true: the ALiBi paper's 2^(-8(h+1)/heads)
  double dropout_p = 0.0;
  uint64_t seed = 0;
  std::vector<int64_t> cu_seqlens_q;  // varlen: batch+1 cumulative offsets; empty for fixed length
  std::vector<int64_t> cu_seqlens_k;
  Mask mask;                      // a mask function beyond causal / window (mask.hpp); kind none: off
  DType dtype = DType::fp32;

  // Throws flashlab::Error naming the first field that is wrong.
  void validate() const;

  // ---- derived quantities (valid after validate()) ----
  bool varlen() const { return !cu_seqlens_q.empty(); }
  int64_t dv() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  int64_t group() const { return heads_q / heads_kv; }   // query heads per kv head
  int64_t kv_head(int64_t h) const { return h / group(); }
  double softmax_scale() const;
  double alibi_slope(int64_t h) const;
  int64_t len_q(int64_t b) const;
  int64_t len_k(int64_t b) const;
  int64_t start_q(int64_t b) const;
  int64_t start_k(int64_t b) const;
  int64_t total_q() const { return start_q(batch); }
  int64_t total_k() const { return start_k(batch); }
  // Effective window edges: causal folds into window_right = 0.
  int64_t left() const { return window_left; }
  int64_t right() const { return causal ? (window_right < 0 ? 0 : std::min<int64_t>(window_right, 0)) : window_right; }
  bool has_mask() const { return left() >= 0 || right() >= 0 || mask.kind != MaskKind::none; }
  // Whether the visible columns of every row are exactly [col_begin, col_end): all but a dense mask.
  bool interval_mask() const { return mask.kind != MaskKind::dense; }
  // Whether batch entries can differ in their mask (beyond varlen lengths): per-entry prefixes, a 4-d dense mask.
  bool mask_varies_by_batch() const;

  // Visible columns of row i in batch b: [col_begin, col_end). Empty when begin >= end.
  // Under a dense mask this is the interval the dense bits are read within.
  int64_t col_begin(int64_t b, int64_t i) const;
  int64_t col_end(int64_t b, int64_t i) const;
  bool visible(int64_t b, int64_t i, int64_t j) const { return j >= col_begin(b, i) && j < col_end(b, i); }
  // The mask function (FlexAttention's mask_mod): may query row i of (b, h) attend to key j?
  bool visible(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return visible(b, i, j) && (mask.kind != MaskKind::dense || mask.dense->at(b, h, i, j));
  }

  // Tensor shapes (see the layout table above).
  std::vector<int64_t> q_shape() const;
  std::vector<int64_t> k_shape() const;
  std::vector<int64_t> v_shape() const;
  std::vector<int64_t> o_shape() const;
  std::vector<int64_t> lse_shape() const;
  // Flat offsets of element 0 of a token row, and of an LSE entry.
  int64_t q_offset(int64_t b, int64_t i, int64_t h) const { return ((start_q(b) + i) * heads_q + h) * head_dim; }
  int64_t k_offset(int64_t b, int64_t j, int64_t h_kv) const { return ((start_k(b) + j) * heads_kv + h_kv) * head_dim; }
  int64_t v_offset(int64_t b, int64_t j, int64_t h_kv) const { return ((start_k(b) + j) * heads_kv + h_kv) * dv(); }
  int64_t o_offset(int64_t b, int64_t i, int64_t h) const { return ((start_q(b) + i) * heads_q + h) * dv(); }
  int64_t lse_offset(int64_t b, int64_t h, int64_t i) const;

  // FLOPs by the anchors' convention (ANCHORS.md): 4 * sq * sk * d per head
  // (for head_dim != head_dim_v: 2 * sq * sk * (d + dv)), only over visible
  // (i, j) pairs, so causal counts about half.
  double forward_flops() const;
  int64_t visible_pairs() const;  // number of (b, h, i, j) with visible(b, h, i, j)

  std::string describe() const;   // one line, for reports
};

}  // namespace flashlab
