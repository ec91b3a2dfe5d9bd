// fa3 backward: what both consumers (bwd_consumer.cuh, and bwd_consumer_split.cuh at d = 256) do to a
// step's tile of P^T and dS^T, and to their dK and dV at the end.
#pragma once
#include "../mma.cuh"
#include "../prob_grad.cuh"
#include "bwd_smem.cuh"
#include "head_dim_gemm.cuh"
#include "wgmma_ops.cuh"

namespace flashlab::gpu::fa3 {

// P^T and dS^T in place (prob_grad.cuh) for a consumer's accumulators, element (n, e) in query column
// 8 n + tc + (e & 1) of the stage's LSE2 and D rows lse2, dsum.
template <bool kSoftcap, int kCols>
__device__ __forceinline__ void prob_grads(float (&acc_s)[kCols / 8][4], float (&acc_dp)[kCols / 8][4],
                                           const float* lse2, const float* dsum, int tc, const BackwardParams& p) {
#pragma unroll
  for (int n = 0; n < kCols / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = n * 8 + tc + (e & 1);
      prob_grad<kSoftcap>(acc_s[n][e], acc_dp[n][e], lse2[col], dsum[col], p);
    }
}

// A mask function's verdicts on a consumer's tile of P^T and dS^T (keys key0 + my_key, + 8 as rows, query
// rows row0 .. row0 + kCols - 1 as columns): whether the tile crosses the mask's edge (it does not when its
// last row starts by key0, its first row runs past the CTA's last key and those keys are inside sk; row
// intervals have monotone ends), and if so which pairs are seen, bit (2 n + c) 2 + r for query row
// row0 + 8 n + tc + c and key my_key + 8 r. Taken while the tile's S^T and dP^T GEMMs run: its loads and
// tests then hide under the tensor cores (v14; tested after the GEMMs, a whole step of the mask kernel cost
// 1.15-1.22x the unmasked kernel's and a partial one 2.6-3.9x a whole one, H200, bench/mask_step_costs.py).
template <int kCols>
struct TileVerdicts {
  bool partial = false;
  uint32_t seen[(kCols / 2 + 31) / 32] = {};
  static constexpr int bit(int n, int c, int r) { return (2 * n + c) * 2 + r; }
  __device__ bool unseen(int n, int c, int r) const {
    const int k = bit(n, c, r);
    return !((seen[k / 32] >> (k % 32)) & 1u);
  }
};
template <int kCols, int kBc, bool kMask>
__device__ __forceinline__ TileVerdicts<kCols> mask_verdicts(const Sequence& seq, const RowMask& rm, int key0,
                                                             int my_key, int row0, int tc) {
  TileVerdicts<kCols> v;
  if constexpr (kMask) {
    const int last_row = min(row0 + kCols, seq.sq) - 1;
    v.partial = key0 + kBc > seq.sk || rm.begin(last_row) > key0 || rm.end(row0) < key0 + kBc;
    if (v.partial)
      seen_pairs<kCols / 8, 2>(
          v.seen, rm, seq.sk, [&](int n, int c) { return row0 + n * 8 + tc + c; },
          [&](int r) { return key0 + my_key + 8 * r; },
          [](int n, int c, int r) { return TileVerdicts<kCols>::bit(n, c, r); });
  }
  return v;
}

// Zeroes P^T and dS^T (element (n, e) at key my_key + 8 (e / 2), row row0 + 8 n + tc + (e & 1)) where the
// pair is masked. Rows past sq need no mask (their LSE2 is +inf); pairs outside the window rule's band
// (mask.cuh: key - row in [band_lo, band_hi]) and keys past sk do, and with kMask the pairs `verdicts` did
// not see. The band's test is skipped where the CTA's whole block of kBc keys is visible to every row of
// the tile.
template <int kCols, int kBc, bool kMask>
__device__ __forceinline__ void mask_tile(float (&acc_s)[kCols / 8][4], float (&acc_dp)[kCols / 8][4],
                                          const BackwardParams& p, const Sequence& seq,
                                          const TileVerdicts<kCols>& verdicts, int key0, int my_key, int row0,
                                          int tc) {
  if constexpr (kMask) {
    if (verdicts.partial) {
#pragma unroll
      for (int n = 0; n < kCols / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (verdicts.unseen(n, e & 1, e / 2)) acc_s[n][e] = acc_dp[n][e] = 0.f;
    }
  } else {
    const bool keys_past_end = key0 + kBc > seq.sk;
    const int last_row = min(row0 + kCols, seq.sq) - 1;
    const int band_lo = p.window_left < 0 ? -(1 << 30) : seq.sk - seq.sq - p.window_left;
    const int band_hi = p.window_right < 0 ? (1 << 30) : seq.sk - seq.sq + p.window_right;
    if (keys_past_end || key0 - last_row < band_lo || key0 + kBc - 1 - row0 > band_hi) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int key = key0 + my_key + 8 * r;
        const int above = key < seq.sk ? key - (row0 + tc) - band_lo : -(1 << 30);  // masked iff above < c
        const int below = key - (row0 + tc) - band_hi;                                 // masked iff below > c
#pragma unroll
        for (int n = 0; n < kCols / 8; ++n)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            const int c = n * 8 + (e & 1);
            if (above < c || below > c) acc_s[n][e] = acc_dp[n][e] = 0.f;
          }
      }
    }
  }
}

// A consumer's 64 keys x kCols of dK or dV (fp32 accumulators, times `scale`) into `out` (row `key0 + r`
// at key0 + r times row_stride; columns col0 ..), through `tile`, a free stage of shared memory, so that a
// warp's stores are whole 16-byte chunks of rows (4-byte stores from the fragments filled the load/store
// queue: ncu's lg throttle). The tile's rows are kCols / 8 16-byte chunks, chunk c of row r at c ^ (r % 8);
// the consumer's warpgroup meets at named barrier `bar` (128 threads) once it is written and once it is
// read out. Keys past sk and columns past the head dim are not stored.
template <int kCols, typename T>
__device__ __forceinline__ void store_rows(const float (&acc)[kCols / 8][4], float scale, T* out, int64_t row_stride,
                                           unsigned char* tile, int key0, int col0, const Sequence& seq,
                                           int head_dim, int bar) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, tid = threadIdx.x % 128;
  const int gr = lane / 4, tc = (lane % 4) * 2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * 16 + gr + 8 * r;
#pragma unroll
    for (int n = 0; n < kCols / 8; ++n)
      *reinterpret_cast<uint32_t*>(tile + row * kCols * 2 + ((n ^ (row % 8)) * 16) + tc * 2) =
          mma::pack2<T>(acc[n][2 * r] * scale, acc[n][2 * r + 1] * scale);
  }
  named_sync(bar, 128);
  for (int c = tid; c < 64 * kCols / 8; c += 128) {
    const int row = c / (kCols / 8), chunk = c % (kCols / 8), key = key0 + row;
    if (key < seq.sk && col0 + chunk * 8 < head_dim)
      *reinterpret_cast<uint4*>(out + int64_t(key) * row_stride + col0 + chunk * 8) =
          *reinterpret_cast<const uint4*>(tile + row * kCols * 2 + ((chunk ^ (row % 8)) * 16));
  }
  named_sync(bar, 128);  // the tile is read out before it is written again
}

}  // namespace flashlab::gpu::fa3
