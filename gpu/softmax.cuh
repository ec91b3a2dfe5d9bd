// The forward's score-to-probability steps on a warp's accumulator tiles, shared by fa2_fwd.cu and
// fa2_fwd_pairs.cu. A row of scores is a row of kN8 16 x 8 C fragments (mma.cuh's layout: this lane
// holds columns qcol, qcol + 1 of rows g (elements 0, 1) and g + 8 (elements 2, 3)), so a thread's
// half-row r is elements 2r and 2r + 1 of each tile, and the 4 lanes of a quad hold one whole row.
#pragma once
#include <cmath>

#include "flashlab/dropout.hpp"
#include "mma.cuh"

namespace flashlab::gpu::softmax {

// s = cap * tanh(s * inner), inner = scale / cap: scores in natural units afterwards.
template <int kN8>
__device__ __forceinline__ void softcap(float (&s)[kN8][4], float cap, float inner) {
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = cap * tanhf(s[n][e] * inner);
}

// -inf where a key falls outside its row's columns [lo[r], hi[r]); key0: the first tile's first key.
template <int kN8>
__device__ __forceinline__ void mask(float (&s)[kN8][4], int key0, int qcol, const int (&lo)[2], const int (&hi)[2]) {
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2, col = key0 + n * 8 + qcol + (e & 1);
      if (col < lo[r] || col >= hi[r]) s[n][e] = -INFINITY;
    }
}

// -inf where a dense mask's bit is 0 (sequence.cuh BitRow): rows[r] is half-row r's row of bits, key0
// the tile's first key. Where the tile is whole 32-key words (key0 a multiple of 32), n-tiles 4w .. 4w + 3
// read word w once; else (fa3's 80-key blocks at d = 256) each element reads its own word.
template <int kN8, class Bits>
__device__ __forceinline__ void mask_bits(float (&s)[kN8][4], int key0, int qcol, const Bits (&rows)[2]) {
  if (kN8 % 4 != 0 || (key0 & 31) != 0) {
#pragma unroll
    for (int n = 0; n < kN8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + n * 8 + qcol + (e & 1);
        if (!((rows[e / 2].word(key >> 5) >> (key & 31)) & 1u)) s[n][e] = -INFINITY;
      }
    return;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int w = 0; w < kN8 / 4; ++w) {
      const uint32_t word = rows[r].word((key0 >> 5) + w);
#pragma unroll
      for (int n = 4 * w; n < 4 * w + 4; ++n)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e)
          if (!((word >> ((n % 4) * 8 + qcol + (e & 1))) & 1u)) s[n][e] = -INFINITY;
    }
}

// ALiBi: s -= slope |diag[r] - col| (diag[r]: the diagonal's column in half-row r's row, i + sk - sq;
// slope in the units of s). key0: the tile's first key.
template <int kN8>
__device__ __forceinline__ void alibi(float (&s)[kN8][4], int key0, int qcol, const int (&diag)[2], float slope) {
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] -= slope * fabsf(float(diag[e / 2] - (key0 + n * 8 + qcol + (e & 1))));
}

// Dropout on P~ (after its row sums are taken): 0 where core's dropout.hpp drops (row[r], col) of this
// head (key: dropout::head_key); the 1 / (1 - p) is applied to O at the end.
template <int kN8>
__device__ __forceinline__ void dropout(float (&s)[kN8][4], int key0, int qcol, const int (&row)[2], uint64_t key,
                                        uint32_t threshold) {
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (!flashlab::dropout::keep(key, uint64_t(row[e / 2]), uint64_t(key0 + n * 8 + qcol + (e & 1)), threshold))
        s[n][e] = 0.f;
}

// The larger of m and half-row r's scores, then over the quad: the row's max.
template <int kN8>
__device__ __forceinline__ float row_max(const float (&s)[kN8][4], int r, float m) {
#pragma unroll
  for (int n = 0; n < kN8; ++n) m = fmaxf(m, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
  m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
  return fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
}

// m times c (c = scale log2 e), or 0 for a row that has seen nothing (m = -inf): exp2(-inf - 0) = 0.
__device__ __forceinline__ float scaled_max(float m, float c) { return m == -INFINITY ? 0.f : m * c; }

// P~ = exp2(s c - m_c) in place for half-row r; returns this thread's sum of them (not quad-reduced).
template <int kN8>
__device__ __forceinline__ float exp2_row(float (&s)[kN8][4], int r, float c, float m_c) {
  float sum = 0.f;
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
    s[n][2 * r] = mma::exp2_fast(fmaf(s[n][2 * r], c, -m_c));
    s[n][2 * r + 1] = mma::exp2_fast(fmaf(s[n][2 * r + 1], c, -m_c));
    sum += s[n][2 * r] + s[n][2 * r + 1];
  }
  return sum;
}

// One step of the online softmax for half-row r of a tile of scores s (unscaled; c = scale log2 e):
//   m_new = max(m, rowmax s), P~ = exp2(s c - m_new c) in place, l = alpha l + (this thread's) rowsum P~,
// with m and l updated and alpha = exp2((m - m_new) c), the factor O's row must be scaled by, returned.
template <int kN8>
__device__ __forceinline__ float online_step(float (&s)[kN8][4], int r, float c, float& m, float& l) {
  const float m_new = row_max(s, r, m);
  const float m_c = scaled_max(m_new, c);
  const float alpha = mma::exp2_fast(m * c - m_c);
  m = m_new;
  l = l * alpha + exp2_row(s, r, c, m_c);
  return alpha;
}

// O's rows times alpha: rows g by alpha[0], rows g + 8 by alpha[1].
template <int kN8>
__device__ __forceinline__ void rescale(float (&o)[kN8][4], const float (&alpha)[2]) {
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
    o[n][0] *= alpha[0];
    o[n][1] *= alpha[0];
    o[n][2] *= alpha[1];
    o[n][3] *= alpha[1];
  }
}

// The sum of the quad's four partial row sums.
__device__ __forceinline__ float quad_sum(float l) {
  l += __shfl_xor_sync(0xffffffff, l, 1);
  return l + __shfl_xor_sync(0xffffffff, l, 2);
}

// LSE = m ln 2 + ln(l) for a row whose max m is kept unscaled (log2 units after times c); -inf for a
// row that saw no key.
__device__ __forceinline__ float lse(float m, float c, float l) {
  return l > 0.f ? m * c * mma::kLn2 + logf(l) : -INFINITY;
}

}  // namespace flashlab::gpu::softmax
