// Rotary position embedding (RoPE, Su et al. 2021) as flash-attn applies it
// (rotary_interleaved): each pair (x_a, x_b) of the first rotary_dim dims of a
// row at position pos is rotated by the angle whose cos and sin are
// cos[pos, k], sin[pos, k]:
//   x_a' = x_a cos - x_b sin
//   x_b' = x_a sin + x_b cos
// with the pair k being (2k, 2k+1) when interleaved (GPT-J) and (k, k + rd/2)
// when half-split (GPT-NeoX); dims from rotary_dim on pass through unchanged.
// Real is the arithmetic precision (double for the oracle, float otherwise);
// the caller rounds the result to the storage dtype.
#pragma once
#include <cstdint>

#include "flashlab/decode_problem.hpp"

namespace flashlab {

// x: (head_dim) one row; cos, sin: (rotary_dim / 2) the table's row at pos; out: (head_dim).
template <class Real>
void rotate_row(Rotary rotary, int64_t head_dim, int64_t rotary_dim, const float* x, const float* cos,
                const float* sin, Real* out) {
  for (int64_t c = 0; c < head_dim; ++c) out[c] = static_cast<Real>(x[c]);
  if (rotary == Rotary::none) return;
  const int64_t half = rotary_dim / 2;
  for (int64_t k = 0; k < half; ++k) {
    const int64_t a = rotary == Rotary::interleaved ? 2 * k : k;
    const int64_t b = rotary == Rotary::interleaved ? 2 * k + 1 : k + half;
    const Real xa = static_cast<Real>(x[a]), xb = static_cast<Real>(x[b]);
    const Real c = static_cast<Real>(cos[k]), s = static_cast<Real>(sin[k]);
    out[a] = xa * c - xb * s;
    out[b] = xa * s + xb * c;
  }
}

}  // namespace flashlab
