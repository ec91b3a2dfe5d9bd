// Where one batch entry's rows live, for fixed-length and variable-length
// (cu_seqlens) batches alike, and which query rows see a block of keys.
#pragma once
#include <cstdint>

#include "mask.cuh"
#include "params.hpp"
#include "row_search.hpp"

namespace flashlab::gpu {

struct Sequence {
  int q_start = 0, k_start = 0;  // first packed row (varlen) or 0
  int sq = 0, sk = 0;            // this entry's lengths
  int64_t q_base = 0, k_base = 0, v_base = 0, o_base = 0;  // element offsets of row 0
  int64_t row_base = 0;   // index of row 0 among all query rows: b * seqlen_q, or q_start
  int64_t k_row_base = 0; // the same for the keys: b * seqlen_k, or k_start
  int64_t total_q = 0;    // query rows in the whole batch

  // Per-row fp32 arrays laid out as lse: (batch, heads_q, seqlen_q), or (heads_q, total_q) for varlen.
  __device__ int64_t row_array(int h, int b, const AttentionParams& p) const {
    return p.cu_seqlens_q ? int64_t(h) * total_q + q_start : (int64_t(b) * p.heads_q + h) * p.seqlen_q;
  }
};

__device__ inline Sequence sequence_of(const AttentionParams& p, int b) {
  Sequence s;
  if (p.cu_seqlens_q) {
    s.q_start = p.cu_seqlens_q[b];
    s.k_start = p.cu_seqlens_k[b];
    s.sq = p.cu_seqlens_q[b + 1] - s.q_start;
    s.sk = p.cu_seqlens_k[b + 1] - s.k_start;
    s.q_base = int64_t(s.q_start) * p.q_row_stride;
    s.k_base = int64_t(s.k_start) * p.k_row_stride;
    s.v_base = int64_t(s.k_start) * p.v_row_stride;
    s.o_base = int64_t(s.q_start) * p.o_row_stride;
    s.row_base = s.q_start;
    s.k_row_base = s.k_start;
    s.total_q = p.cu_seqlens_q[p.batch];
  } else {
    s.sq = p.seqlen_q;
    s.sk = p.seqlen_k;
    s.q_base = int64_t(b) * p.q_batch_stride;
    s.k_base = int64_t(b) * p.k_batch_stride;
    s.v_base = int64_t(b) * p.v_batch_stride;
    s.o_base = int64_t(b) * p.o_batch_stride;
    s.row_base = int64_t(b) * p.seqlen_q;
    s.k_row_base = int64_t(b) * p.seqlen_k;
    s.total_q = int64_t(p.batch) * p.seqlen_q;
  }
  return s;
}

// The keys each query row of one batch entry sees, [begin(i), end(i)): the arrays of a mask function
// (params.hpp mask_lo / mask_hi), or the window rule. Both ends never decrease with i, which is what the
// block ranges below rely on.
struct RowMask {
  const int* lo = nullptr;  // this entry's rows, or null: the window rule
  const int* hi = nullptr;
  int sq = 0, sk = 0, left = -1, right = -1;
  // Rows past sq (a last Q block's padding, computed and never stored) read the last row's interval.
  __device__ int begin(int i) const { return lo ? lo[min(i, sq - 1)] : col_begin(i, sq, sk, left); }
  __device__ int end(int i) const { return hi ? hi[min(i, sq - 1)] : col_end(i, sq, sk, right); }
};
// kArrays false: the window rule at compile time (the kernels without extras keep their code).
template <bool kArrays>
__device__ inline RowMask row_mask(const AttentionParams& p, const Sequence& s, int b) {
  const int64_t base = int64_t(b) * p.seqlen_q;
  if constexpr (!kArrays) return {nullptr, nullptr, s.sq, s.sk, p.window_left, p.window_right};
  return {p.mask_lo ? p.mask_lo + base : nullptr, p.mask_hi ? p.mask_hi + base : nullptr, s.sq, s.sk,
          p.window_left, p.window_right};
}

// The blocks a CTA visits along its line: the run [begin, begin + count), or under a dense mask its
// line's block list (params.hpp BlockLists: the partial blocks first, then the full ones). With no
// list (`list` null at compile time in the kernels without extras) block(n) is begin + n.
struct BlockWalk {
  const int* list = nullptr;
  int begin = 0, count = 0, partial = 0;
  __device__ int block(int n) const { return list ? list[n] : begin + n; }
  // Whether listed block n needs the element mask (lists only: a run asks KeyBlocks / the interval).
  __device__ bool listed_partial(int n) const { return n < partial; }
};
__device__ inline BlockWalk block_walk(const BlockLists& l, int b, int line, int begin, int end) {
  if (!l.counts) return {nullptr, begin, end > begin ? end - begin : 0, 0};
  const int64_t at = int64_t(l.by_batch ? b : 0) * l.lines + line;
  return {l.index + at * l.cross, 0, l.counts[2 * at] + l.counts[2 * at + 1], l.counts[2 * at]};
}

// A walk with the blocks that need the element mask first (k < partial), then the whole ones (fa2's dK/dV
// under a mask function, which walks each kind in a loop of its own): a dense mask's list is in that order
// already; a run [begin, begin + count) whose whole blocks are [full_lo, full_hi) goes the blocks before
// those, the blocks after them, then them.
struct SplitWalk {
  const int* list;
  int begin, lead, partial, full_lo, full_hi;
  // Partial block k < partial, and whole block k < count - partial.
  __device__ int partial_block(int k) const { return list ? list[k] : k < lead ? begin + k : full_hi + (k - lead); }
  __device__ int whole_block(int k) const { return list ? list[partial + k] : full_lo + k; }
};
__device__ inline SplitWalk split_walk(const BlockWalk& w, int full_lo, int full_hi) {
  if (w.list) return {w.list, 0, 0, w.partial, 0, 0};
  const int end = w.begin + w.count;
  const int lo = min(max(full_lo, w.begin), end), hi = max(min(full_hi, end), lo);
  return {nullptr, w.begin, lo - w.begin, (lo - w.begin) + (end - hi), lo, hi};
}

// A backward thread's verdicts on the (query row, key) pairs of a tile that crosses a mask function's edge,
// one bit a pair: for each of its kRowPairs x 2 query rows row_of(n, c) (c = 0, 1: an MMA fragment's two
// adjacent columns) and each of its kKeys keys key_of(m), bit bit_of(n, c, m) of `seen` is set iff the row's
// interval [begin, min(end, key_end)) holds the key. The intervals' loads issue together and the tests are
// straight-line code, taken before the tile's GEMMs (fa2's dK/dV v11, fa3's backward v14: their layouts
// differ, the rule is this one).
template <int kRowPairs, int kKeys, int kWords, typename RowOf, typename KeyOf, typename BitOf>
__device__ __forceinline__ void seen_pairs(uint32_t (&seen)[kWords], const RowMask& rm, int key_end, RowOf row_of,
                                           KeyOf key_of, BitOf bit_of) {
#pragma unroll
  for (int n = 0; n < kRowPairs; ++n)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int row = row_of(n, c), lo = rm.begin(row), hi = min(rm.end(row), key_end);
#pragma unroll
      for (int m = 0; m < kKeys; ++m) {
        const int key = key_of(m), bit = bit_of(n, c, m);
        seen[bit / 32] |= uint32_t(key >= lo && key < hi) << (bit % 32);
      }
    }
}

// One query row's bits of a dense mask (params.hpp DenseBits); rows past sq (a last block's padding)
// read the last row's, keys past sk are masked.
struct BitRow {
  const uint32_t* words;
  int count;
  __device__ uint32_t word(int w) const { return w < count ? words[w] : 0u; }
  __device__ bool visible(int key) const { return (word(key >> 5) >> (key & 31)) & 1u; }
};
__device__ inline BitRow bit_row(const DenseBits& d, int b, int h, int row, int sq) {
  return {d.words + b * d.batch_stride + h * d.head_stride + int64_t(min(row, sq - 1)) * d.row_words, d.row_words};
}

// The query rows [lo, hi) that see at least one key of [k_lo, k_hi) (0 <= k_lo < k_hi <= sk):
// col_end(r) > k_lo and col_begin(r) < k_hi, both monotone in r.
struct RowRange {
  int lo, hi;
};
__host__ __device__ inline RowRange rows_seeing(int k_lo, int k_hi, int sq, int sk, int left, int right) {
  int lo = right < 0 ? 0 : k_lo - sk + sq - right;
  int hi = left < 0 ? sq : k_hi - sk + sq + left;
  lo = lo < 0 ? 0 : lo;
  hi = hi > sq ? sq : hi;
  return {lo, hi > lo ? hi : lo};
}

// The forward's view from the other side: the blocks of kBc keys [begin, end) that query rows
// [row0, row0 + kBr) (row0 < sq) see any key of, and the keys [full_lo, full_hi) every one of those
// rows sees, where a block needs no mask. The mask band is monotone in the row, so the first and last
// rows decide both.
template <int kBc>
struct KeyBlocks {
  int begin, end, full_lo, full_hi;
  __device__ bool needs_mask(int j) const { return !(j * kBc >= full_lo && (j + 1) * kBc <= full_hi); }
};
// The same under any RowMask (its ends monotone, so the first and last rows decide as well).
template <int kBr, int kBc>
__device__ inline KeyBlocks<kBc> key_blocks(int row0, const RowMask& m) {
  const int last_row = min(row0 + kBr, m.sq) - 1;
  const int c_lo = m.begin(row0), c_hi = m.end(last_row);
  const int begin = c_lo / kBc, end = c_hi > c_lo ? (c_hi + kBc - 1) / kBc : begin;
  return {begin, end, m.begin(last_row), m.end(row0)};
}
// The first row of [a, z) at which `seen(row)` (false, then true from some row on) is true, z if none, by
// the warp: row_search.hpp's 32-ary search, lane l testing its round's row l. Every lane of the warp must
// call it with the same a and z.
template <typename Seen>
__device__ inline int first_row_seeing(int a, int z, Seen seen) {
  const int lane = threadIdx.x % 32;
  return first_row_32ary(a, z, [&](int a0, int step, int z0) {
    const int row = a0 + lane * step;
    return __ballot_sync(0xffffffffu, row >= z0 || seen(row));
  });
}
// The query rows [lo, hi) that see at least one key of [k_lo, k_hi) under any RowMask, by a whole warp
// (fa2's and fa3's dK/dV): the first row whose end passes k_lo, then the first whose begin reaches k_hi,
// each a 32-ary search of the monotone ends. With a mask function's intervals every test is a global
// load; binary searches' 28 dependent loads at 16k rows cost fa2's dK/dV 2-3% on aligned documents (H100,
// 2026-11-27: simulator/validation/partial_tiles.py --pass bwd, against density x unmasked 1.09-1.23 ->
// 1.07-1.20). Every lane of the warp must call it.
__device__ inline RowRange rows_seeing_by_warp(int k_lo, int k_hi, const RowMask& m) {
  const int a = first_row_seeing(0, m.sq, [&](int r) { return m.end(r) > k_lo; });
  const int b = first_row_seeing(a, m.sq, [&](int r) { return m.begin(r) >= k_hi; });
  return {a, b};
}
// A K/V block of keys [k_lo, k_lo + kBc) under a mask function's intervals, as fa2's dK/dV kernel walks it:
// the query rows that see any of its keys [k_lo, k_hi) (k_hi = min(k_lo + kBc, sk); rows_seeing_by_warp's
// answer), and the Q blocks of kBr rows [full_lo, full_hi) that see all kBc of them, whose tiles need no
// element mask: a block's last row begins by k_lo and its first row ends at k_lo + kBc or later, so (both
// ends monotone) the blocks from the first row ending there up to the first row beginning past k_lo. Four
// independent 32-ary searches, one a warp of warps 0-3, met in shared memory (`met`, 4 ints) rather than
// two in a row by every warp. Every thread of the CTA must call it (it synchronizes the CTA).
struct KeyBlockRows {
  RowRange rows;
  int full_lo, full_hi;
};
template <int kBr, int kBc>
__device__ inline KeyBlockRows key_block_rows(int k_lo, int k_hi, const RowMask& m, int* met) {
  const int warp = threadIdx.x / 32;
  if (warp < 4) {
    int row;
    if (warp == 0) row = first_row_seeing(0, m.sq, [&](int r) { return m.end(r) > k_lo; });
    else if (warp == 1) row = first_row_seeing(0, m.sq, [&](int r) { return m.begin(r) >= k_hi; });
    else if (warp == 2) row = first_row_seeing(0, m.sq, [&](int r) { return m.begin(r) > k_lo; });
    else row = first_row_seeing(0, m.sq, [&](int r) { return m.end(r) >= k_lo + kBc; });
    if (threadIdx.x % 32 == 0) met[warp] = row;
  }
  __syncthreads();
  // Rows before the first that sees a key do not begin past k_hi unless empty, and then the range is
  // empty from there: hence the max (rows_seeing_by_warp searches from the first row for the second end).
  const int lo = met[0], hi = met[1] > lo ? met[1] : lo;
  const int full_hi = met[2] >= m.sq ? (m.sq + kBr - 1) / kBr : met[2] / kBr;
  return {{lo, hi}, (met[3] + kBr - 1) / kBr, full_hi};
}
// The key blocks of `rows` query rows from row0 under the window rule (fa3's packed tiles: fewer rows
// than the tile has, each seen by several heads).
template <int kBc>
__device__ inline KeyBlocks<kBc> key_blocks(int row0, int rows, int sq, int sk, int left, int right) {
  const int last_row = min(row0 + rows, sq) - 1;
  const int c_lo = col_begin(row0, sq, sk, left), c_hi = col_end(last_row, sq, sk, right);
  const int begin = c_lo / kBc, end = c_hi > c_lo ? (c_hi + kBc - 1) / kBc : begin;
  return {begin, end, col_begin(last_row, sq, sk, left), col_end(row0, sq, sk, right)};
}
template <int kBr, int kBc>
__device__ inline KeyBlocks<kBc> key_blocks(int row0, int sq, int sk, int left, int right) {
  return key_blocks<kBc>(row0, kBr, sq, sk, left, right);
}

}  // namespace flashlab::gpu
