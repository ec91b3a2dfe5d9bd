// The online softmax on S^T: the decode kernel computes its scores transposed (S^T = K Q^T, the keys
// as the MMA's M), so a query's scores are a column of its accumulator tiles, not a row as in
// gpu/softmax.cuh. A warp's 32-key block is two 16-key tiles by kQT 8-query tiles; by mma.cuh's C layout
// this lane holds, of query tile qt, the columns (queries) 2t and 2t + 1 (elements 0 and 2, 1 and 3) of
// the keys g and g + 8 (elements 0, 1 and 2, 3) of each key tile, so a query's column is spread over
// the eight lanes of one t (lane % 4): its max and its sum are reduced over lane bits 2, 3 and 4.
#pragma once
#include <cmath>

#include "mma.cuh"

namespace flashlab::gpu::columns {

// Scores of a warp's block: [key tile][query tile][C element].
template <int kQT>
using Block = float[2][kQT][4];

// The larger of m and column i (0: query 2t, 1: 2t + 1) of query tile qt, over the block's 32 keys.
template <int kQT>
__device__ __forceinline__ float column_max(const Block<kQT>& s, int qt, int i, float m) {
#pragma unroll
  for (int kt = 0; kt < 2; ++kt) m = fmaxf(m, fmaxf(s[kt][qt][i], s[kt][qt][i + 2]));
#pragma unroll
  for (int bit = 4; bit <= 16; bit *= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, bit));
  return m;
}

// The sum of a column's partial sums over the eight lanes that share it.
__device__ __forceinline__ float column_sum(float l) {
#pragma unroll
  for (int bit = 4; bit <= 16; bit *= 2) l += __shfl_xor_sync(0xffffffffu, l, bit);
  return l;
}

// One step of the online softmax for column i of query tile qt (scores unscaled; c = scale log2 e):
//   m_new = max(m, column max), P~ = exp2(s c - m_new c) in place, l = alpha l + (this lane's) sum of P~,
// with m and l updated and alpha = exp2((m - m_new) c), the factor O^T's column must be scaled by, returned.
template <int kQT>
__device__ __forceinline__ float online_step(Block<kQT>& s, int qt, int i, float c, float& m, float& l) {
  const float m_new = column_max(s, qt, i, m);
  const float m_c = m_new == -INFINITY ? 0.f : m_new * c;  // a column that has seen no key: P~ = 0
  const float alpha = mma::exp2_fast(m * c - m_c);
  float sum = 0.f;
#pragma unroll
  for (int kt = 0; kt < 2; ++kt)
#pragma unroll
    for (int e = i; e < 4; e += 2) {
      s[kt][qt][e] = mma::exp2_fast(fmaf(s[kt][qt][e], c, -m_c));
      sum += s[kt][qt][e];
    }
  m = m_new;
  l = l * alpha + sum;
  return alpha;
}

// O^T's columns times their alpha: O^T is [head-dim tile][query tile][C element], column i of query tile
// qt in elements i and i + 2.
template <int kDT, int kQT>
__device__ __forceinline__ void rescale(float (&o)[kDT][kQT][4], const float (&alpha)[kQT][2]) {
#pragma unroll
  for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
    for (int qt = 0; qt < kQT; ++qt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dt][qt][e] *= alpha[qt][e & 1];
}

}  // namespace flashlab::gpu::columns
