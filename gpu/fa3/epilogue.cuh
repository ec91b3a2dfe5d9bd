// fa3's epilogue: a consumer warpgroup's 64 rows of O_i = diag(l_i)^-1 O_i and LSE_i = m_i ln 2 + ln l_i out to
// global memory, once its last O += P V is done.
//
// Two ways out for O:
//   staged  (a tile whose rows all lie in the sequence, not packed, O's strides as a tensor map takes
//           them): the warpgroup writes its rows into shared memory in the copy engine's 128-byte swizzle and
//           one thread hands them to a bulk tensor store, which runs on while the warpgroup goes on to its
//           next tile. D <= 128 into O's own buffer (smem.cuh kStagedTiles), D = 256 into V's stages (kOInV).
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

// O (the accumulator, its rows scaled by inv) of warpgroup wg into its 64 rows of staging, then out by the copy
// engine to rows [row, row + 64) of head `head` in O's map (batch and sequence folded into rows). The staging is
// O's own buffer (kStagedTiles), whose previous store must have read it first (its thread waits on its bulk
// group), or (kOInV) a stage of V: the stage of the CTA's block `it - 2 + wg` (`it` blocks walked so far), once
// every warp's P V has released it (v_empty; warpgroup 0 takes the block before the last, which the other
// has long passed, warpgroup 1 the last, which warpgroup 0's P V has read before its own epilogue). After the
// writes every thread's stores are made visible to the copy engine (the async proxy) and met at the
// warpgroup's barrier before the one thread issues the store (under kOInV the stage is freed for the producer
// a tile later: free_o_stage). The accumulator fragment is mma.sync's C layout a warp: thread (qrow, lane % 4)
// holds columns 8 nn + 2 (lane % 4) and + 1 of rows qrow and qrow + 8.
template <class S, typename T>
__device__ __forceinline__ void store_o_staged(const float (&acc_o)[S::D / 8][4], const float (&inv)[2],
                                               Smem<S, T>& sm, const CUtensorMap* map_o, int wg, int row, int head,
                                               int it) {
  using M = Smem<S, T>;
  using To = OutType<T>;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, qrow = lane / 4, qcol = (lane % 4) * 2;
  const bool issuer = threadIdx.x % 128 == 0;
  // Row x of chunk c (64 columns, 128-byte rows) of the warpgroup's 64: its own buffer's row 64 wg + x, or
  // under kOInV row x of the chunk's 8 KiB in V's stage.
  auto row_of = [&](int c, int x) -> const void* {
    if constexpr (kOInV<S, T>) {
      const int st = (it + wg) % 2;  // the stage of block it - 2 + wg
      return reinterpret_cast<const unsigned char*>(&sm.v[st]) + c * (64 * 128) + x * 128;
    } else {
      return &sm.o[c][wg * 64 + x][0];
    }
  };
  if constexpr (kOInV<S, T>) {
    const int block = it - 2 + wg;  // (-1 or -2: a stage no block of this CTA has used)
    if (issuer && block >= 0) mbar_wait(&sm.v_empty[block % 2], (block / 2) & 1);
  } else {
    if (issuer) bulk_wait_read<0>();
  }
  named_sync(kStoreBarrier + wg, 128);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int x = warp * 16 + qrow + 8 * r;
#pragma unroll
    for (int nn = 0; nn < S::D / 8; ++nn) {
      // 8 columns (16 bytes) a group; the 128-byte swizzle puts group g of row x at g ^ (x % 8) (x % 8 = qrow).
      const int chunk = nn / 8, group = (nn % 8) ^ qrow;
      sts32(smem_u32(row_of(chunk, x)) + group * 16 + qcol * 2,
            mma::pack2<To>(acc_o[nn][2 * r] * inv[r], acc_o[nn][2 * r + 1] * inv[r]));
    }
  }
  fence_async_shared();
  named_sync(kStoreBarrier + wg, 128);
  if (issuer) {
#pragma unroll
    for (int c = 0; c < M::kOChunks; ++c) tma_store_3d(map_o, row_of(c, 0), c * M::kORow, row, head);
    bulk_commit();
  }
}

// kOInV: this warpgroup's part of V's stages free for the producer's next V loads (o_free), once its last staged
// store, if any, has read them (the issuer's bulk group). Called at the warpgroup's next tile, once that tile's Q is
// in, when the read is long done: waiting for it right after the store held the warpgroup there (forward v22:
// 1.03-1.07x at d = 256). Every tile arrives, staged or not, so that o_free counts tiles.
template <class S, typename T>
__device__ __forceinline__ void free_o_stage(Smem<S, T>& sm) {
  if (threadIdx.x % 128 == 0) {
    bulk_wait_read<0>();
    mbar_arrive(&sm.o_free);
  }
}

// The epilogue of warpgroup wg for its tile: O_i / l_i (FP8: times V's descale, into bf16) and LSE_i; rows before
// 0 or past sq and padded columns left out. `row0` is the tile's first position (scheduler.cuh first_row),
// `rows_e` its positions (kBr, or packed kBr / pack of each of its heads).
template <class S, typename T, bool kPack>
__device__ __forceinline__ void epilogue(const float (&acc_o)[S::D / 8][4], const float (&sum)[2],
                                         const float (&max)[2], Smem<S, T>& sm, const AttentionParams& p,
                                         const Tile& tile, int row0, int rows_e, int sq, float c, int wg,
                                         const CUtensorMap* map_o, bool o_tma, int it) {
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
  if constexpr (!kPack) {
    staged = o_tma && row0 >= 0 && row0 + S::kBr <= sq;  // every row of the tile in the sequence
    if (staged)
      store_o_staged<S, T>(acc_o, inv, sm, map_o, wg, int(seq.row_base) + row0 + wg * 64, tile.head, it);
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
