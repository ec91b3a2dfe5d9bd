// Dropout: one counter-based random function of (seed, batch, head, row, col)
// shared by every implementation, CPU or GPU, so their masks agree bit for bit.
//
//   r    = mix64(mix64(seed ^ mix64(batch * 2^32 + head)) ^ (row * 2^32 + col))
//   keep = (r >> 32) >= threshold(p),  threshold(p) = round(p * 2^32)
//   P_dropped = keep ? P / (1 - p) : 0
//
// mix64 is the SplitMix64 finalizer (Steele, Lea, Flood 2014): a bijection on
// 64 bits whose outputs pass BigCrush, costing a few integer multiplies; it
// has no state, so any thread can ask for any (row, col) in any order.
// The softmax statistics (m, l, LSE) are computed before dropout, as in
// FlashAttention; dropout only changes P in the P V product.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FLASHLAB_HD __host__ __device__ __forceinline__
#else
#define FLASHLAB_HD inline
#endif

namespace flashlab::dropout {

FLASHLAB_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The per-(batch, head) key; computed once per head by a kernel.
FLASHLAB_HD uint64_t head_key(uint64_t seed, uint64_t batch, uint64_t head) {
  return mix64(seed ^ mix64((batch << 32) | head));
}

FLASHLAB_HD uint32_t bits(uint64_t key, uint64_t row, uint64_t col) {
  return static_cast<uint32_t>(mix64(key ^ ((row << 32) | col)) >> 32);
}

inline uint32_t threshold(double p) {
  const double t = std::nearbyint(p * 4294967296.0);
  return t >= 4294967295.0 ? 0xffffffffu : static_cast<uint32_t>(t);
}

FLASHLAB_HD bool keep(uint64_t key, uint64_t row, uint64_t col, uint32_t threshold) {
  return bits(key, row, col) >= threshold;
}

}  // namespace flashlab::dropout
