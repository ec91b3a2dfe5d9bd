// The mask on the device, the same rule as Problem::col_begin / col_end:
// row i of a sequence pair (sq, sk) sees key columns [begin, end) with the
// diagonal at i + sk - sq (bottom-right alignment).
#pragma once

namespace flashlab::gpu {

__host__ __device__ inline int col_begin(int i, int sq, int sk, int left) {
  if (left < 0) return 0;
  const int c = i + sk - sq - left;
  return c < 0 ? 0 : (c > sk ? sk : c);
}

__host__ __device__ inline int col_end(int i, int sq, int sk, int right) {
  if (right < 0) return sk;
  const int c = i + sk - sq + right + 1;
  return c < 0 ? 0 : (c > sk ? sk : c);
}

}  // namespace flashlab::gpu
