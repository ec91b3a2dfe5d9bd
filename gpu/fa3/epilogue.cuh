// fa3's epilogue: a consumer warpgroup's 64 rows of O_i = diag(l_i)^-1 O_i and LSE_i = m_i ln 2 + ln l_i out to
// global memory, once its last O += P V is done.
//
// Two ways out for O:
//   staged  (D <= 128: smem.cuh kStagedTiles; a tile whose rows all lie in the sequence, not
//           packed, O's strides as a tensor map takes them): the warpgroup writes its rows into shared memory
//           in the copy engine's 128-byte swizzle and one thread hands them to a bulk tensor store, which
//           runs on while the warpgroup goes on to its next tile.
//   direct  (everything else): each thread stores its fragment's pairs of columns, 4 bytes a store.
// Measured where a tile's time goes (bench/fa3_fwd_timeline.py, H200, d = 128, s = 1k): the direct stores
// took 1.9 of a warpgroup's 16.1 us a tile (each store instruction writes 16 bytes into each of 8 rows), and
// with Q's load waiting for the tile's last S = Q K^T, the next tile's Q another 0.7 us (forward v19).
#pragma once
#include <cuda.h>

#include <type_traits>

#include "../mma.cuh"
#include "../softmax.cuh"
#include "smem.cuh"

namespace flashlab::gpu::fa3 {

// Named barrier of warpgroup w's staged epilogue: kStoreBarrier + w (the ping-pong's turns take 1 .. 3).
constexpr int kStoreBarrier = 4;

// O (the accumulator, its rows scaled by inv) of warpgroup wg into its 64 rows of the staging buffer, then out
// by the copy engine to rows [row, row + 64) of head `head` in O's map (batch and sequence folded into rows).
// Before writing, the warpgroup's previous store must have read the buffer (its thread waits on its bulk
// group); after, every thread's writes are made visible to the copy engine (the async proxy) and met at the
// warpgroup's barrier before the one thread issues the store. The accumulator fragment is mma.sync's C
// layout a warp: thread (qrow, lane % 4) holds columns 8 nn + 2 (lane % 4) and + 1 of rows qrow and qrow + 8.
template <class S, typename T>
__device__ __forceinline__ void store_o_staged(const float (&acc_o)[S::D / 8][4], const float (&inv)[2],
                                               Smem<S, T>& sm, const CUtensorMap* map_o, int wg, int row, int head) {
  using M = Smem<S, T>;
  using To = OutType<T>;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, qrow = lane / 4, qcol = (lane % 4) * 2;
  const bool issuer = threadIdx.x % 128 == 0;
  if (issuer) bulk_wait_read<0>();
  named_sync(kStoreBarrier + wg, 128);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int tile_row = wg * 64 + warp * 16 + qrow + 8 * r;
#pragma unroll
    for (int nn = 0; nn < S::D / 8; ++nn) {
      // 8 columns (16 bytes) a group; the 128-byte swizzle puts group g of row x at g ^ (x % 8) (x % 8 = qrow).
      const int chunk = nn / 8, group = (nn % 8) ^ qrow;
      sts32(smem_u32(&sm.o[chunk][tile_row][0]) + group * 16 + qcol * 2,
            mma::pack2<To>(acc_o[nn][2 * r] * inv[r], acc_o[nn][2 * r + 1] * inv[r]));
    }
  }
  fence_async_shared();
  named_sync(kStoreBarrier + wg, 128);
  if (issuer) {
#pragma unroll
    for (int c = 0; c < M::kOChunks; ++c) tma_store_3d(map_o, &sm.o[c][wg * 64][0], c * M::kORow, row, head);
    bulk_commit();
  }
}

// The epilogue of warpgroup wg for its tile: O_i / l_i (FP8: times V's descale, into bf16) and LSE_i; rows before
// 0 or past sq and padded columns left out. `row0` is the tile's first position (scheduler.cuh first_row),
// `rows_e` its positions (kBr, or packed kBr / pack of each of its heads).
template <class S, typename T, bool kPack>
__device__ __forceinline__ void epilogue(const float (&acc_o)[S::D / 8][4], const float (&sum)[2],
                                         const float (&max)[2], Smem<S, T>& sm, const AttentionParams& p,
                                         const Tile& tile, int row0, int rows_e, int sq, float c, int wg,
                                         const CUtensorMap* map_o, bool o_tma) {
  using To = OutType<T>;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, qrow = lane / 4, qcol = (lane % 4) * 2;
  const Sequence seq = sequence_of(p, tile.batch);
  float l[2], inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = softmax::quad_sum(sum[r]);
    inv[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
    if constexpr (sizeof(T) == 1) inv[r] *= p.descale_v;
  }
  bool staged = false;
  if constexpr (kStagedTiles<S, T> && !kPack) {
    staged = o_tma && row0 >= 0 && row0 + S::kBr <= sq;  // every row of the tile in the sequence
    if (staged) store_o_staged<S, T>(acc_o, inv, sm, map_o, wg, int(seq.row_base) + row0 + wg * 64, tile.head);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int local = wg * 64 + warp * 16 + qrow + 8 * r, head = kPack ? tile.head + local / rows_e : tile.head;
    const int row = row0 + (kPack ? local % rows_e : local);
    if (row < 0 || row >= sq) continue;
    if (!staged) {
      To* o = static_cast<To*>(p.o) + seq.o_base + int64_t(head) * p.o_head_stride;
#pragma unroll
      for (int nn = 0; nn < S::D / 8; ++nn) {
        if (nn * 8 >= p.head_dim) break;
        *reinterpret_cast<uint32_t*>(o + int64_t(row) * p.o_row_stride + nn * 8 + qcol) =
            mma::pack2<To>(acc_o[nn][2 * r] * inv[r], acc_o[nn][2 * r + 1] * inv[r]);
      }
    }
    if (lane % 4 == 0) p.lse[seq.row_array(head, tile.batch, p) + row] = softmax::lse(max[r], c, l[r]);
  }
}

}  // namespace flashlab::gpu::fa3
