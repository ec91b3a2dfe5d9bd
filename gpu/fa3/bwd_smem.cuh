// fa3's backward: its tile shape, its shared memory, its scratch in global memory and the walk of Q
// blocks a CTA makes: what the producer, the consumers and the dQ writer agree on.
#pragma once
#include <type_traits>
#include <cstdint>

#include "../params.hpp"
#include "../sequence.cuh"
#include "../shapes.hpp"
#include "ptx.cuh"
#include "smem.cuh"

namespace flashlab::gpu::fa3 {

// D the (padded) head dim, kBr query rows a step, kBc keys a CTA (shapes.hpp fa3_backward_shape): up to
// d = 128 two consumer warpgroups of 64 keys each; at d = 256 (kSplitD) both take the CTA's 64 keys, each
// half the head dim of dK and dV and half the Q block's rows of S^T and dP^T (bwd_consumer_split.cuh).
template <int D_, int kBr_, int kBc_ = 128>
struct BwdShape : RegisterSplit<2, 24> {
  static constexpr int D = D_, kBr = kBr_, kBc = kBc_, kStages = 2;
  static constexpr int kConsumers = 2;
  static constexpr bool kSplitD = fa3_backward_splits_head_dim(D);
  static constexpr int kChunks = D / 64;  // 64-column (128-byte) blocks of a row of Q, dO, K, V
  static constexpr int kQChunks = kBr / 64;  // 64-query blocks of a row of dS^T
  // A step's dQ (kBr x D) is two shares in the scratch's order (dq_float4), each the accumulators of one
  // wgmma column of 128 threads: by rows where kBr = 128 (share h rows 64 h..), by columns where kBr = 64
  // (columns D / 2 h..: 64 x 64 at d = 128; at d = 256 64 x 128, consumer h's).
  static constexpr bool kDqByRows = kBr == 128;
  static constexpr int kDqCols = kDqByRows ? D : D / 2;  // a share's columns of dQ
  static_assert(kSplitD ? kBr == 64 && kBc == 64 : kBr * D == 64 * 64 * kConsumers && kBc == 128,
                "up to d = 128 each share of dQ is 64 x 64; at d = 256 the CTA is 64 x 64");
  static constexpr int kDqFloats = kBr * D;  // a step's dQ, in the consumers' accumulator order (below)
  // Deterministic semaphores a Q block (BwdScratch::sem): one for the dQ writer's reduction, or at d = 256
  // one a consumer, whose atomics add disjoint columns.
  static constexpr int kSems = kSplitD ? kConsumers : 1;
};

// Every tile as 64-column blocks of 128-byte rows in the copy engine's 128-byte swizzle (each block
// 1024-byte aligned). dS^T is written by the consumers in the same swizzle (keys are its rows), so that
// it is the dQ GEMM's A operand read M-major.
template <class S, typename T>
struct BwdSmem {
  T k[S::kChunks][S::kBc][64];
  T v[S::kChunks][S::kBc][64];
  T q[S::kStages][S::kChunks][S::kBr][64];
  T d_o[S::kStages][S::kChunks][S::kBr][64];
  T ds[2][S::kQChunks][S::kBc][64];  // dS^T of steps t even / odd
  float dq[S::kDqFloats];            // a step's dQ, for the bulk reduction into the scratch
  float lse2[S::kStages][S::kBr], dsum[S::kStages][S::kBr];
  uint64_t kv_full, full[S::kStages];  // the copies have landed (a stage is freed by a named barrier)
};

// At d = 256 (kSplitD): no fp32 dQ (the consumers add theirs into the scratch from registers), and P^T
// beside dS^T, both 64 keys x 64 query rows in the same swizzle, each consumer writing its 32 columns.
template <class S, typename T>
struct BwdSplitSmem {
  T k[S::kChunks][S::kBc][64];
  T v[S::kChunks][S::kBc][64];
  T q[S::kStages][S::kChunks][S::kBr][64];
  T d_o[S::kStages][S::kChunks][S::kBr][64];
  T ds[2][S::kBc][64];  // dS^T of steps t even / odd
  T ps[2][S::kBc][64];  // P^T likewise
  float lse2[S::kStages][S::kBr], dsum[S::kStages][S::kBr];
  uint64_t kv_full, full[S::kStages];
};
template <class S, typename T>
using BwdSmemOf = std::conditional_t<S::kSplitD, BwdSplitSmem<S, T>, BwdSmem<S, T>>;

// Named barriers (bar.sync / bar.arrive ids; 0 is __syncthreads'): the consumers' dS^T of a step all in
// (bwd_consumer.cuh), the hand-over of a step's dQ (bwd_dq_writer.cuh), and stage s free again: the
// consumers (256 threads) arrive once they are done with it and the producer's warp (32) syncs before
// refilling it. (A barrier rather than an mbarrier: the consumers read LSE2 and D with ordinary loads, and
// the sanitizer's race check follows bar.sync, not an mbarrier's arrive.)
constexpr int kDsFull = 1, kDqFull = 2, kDqEmpty = 3, kStageEmpty = 4;  // kStageEmpty + s, s < kStages
constexpr int kEpilogue = 6;  // kEpilogue + w: consumer w's own warpgroup (128 threads): its dK / dV tile
constexpr int kTraded = 8;    // d = 256: both consumers' halves of a step's P^T and dS^T written (256 threads)
// d = 256, deterministic: consumer w's turn to add into a Q block (kDqTurn + w: its turn keeper arrives, the
// warpgroup syncs) and its atomics issued (kDqAdded + w: the warpgroup arrives, the keeper syncs); 128 + 32.
constexpr int kDqTurn = 9, kDqAdded = 11, kTurnThreads = 128 + 32;
constexpr int kStageThreads = 256 + 32;
// A step's whole dQ is one consumer's, consumer t % 2 at step t (bwd_consumer.cuh issue_and_hand_dq): it
// and the dQ writer's warp meet at kDqEmpty / kDqFull (bwd_dq_writer.cuh).
constexpr int kDqThreads = 128 + 32;

// The scratch (fa3_backward_scratch_bytes): per query head, each batch entry's rows padded to whole Q
// blocks of kBr, entry b's first block at block_start(b):
//   lse2, dsum  kBr floats a block: LSE in log2 units and D = rowsum(dO o O); rows past the entry's end
//               LSE2 = +inf, D = 0, so that their P and dS are 0 with no mask
//   dq_accum    kBr x D floats a block, in the consumers' accumulator order (dq_index), the bulk
//               reductions' target; the convert kernel writes dq from it
//   sem         (deterministic only) an int a block (at d = 256 one a block and consumer: kSems): how many
//               K/V blocks have added their dQ (their consumer's columns of it) so far
// A varlen entry's first block is cu_seqlens_q[b] / kBr + b: at least one block past the previous entry's
// last, whatever the lengths.
struct BwdScratch {
  float* lse2 = nullptr;
  float* dsum = nullptr;
  float* dq_accum = nullptr;
  int* sem = nullptr;
  int64_t blocks = 0;   // padded Q blocks a query head
  bool rotate = false;  // deterministic, rotated walks (BwdWalk; the launcher's rule in fa3_bwd.cu)
};
__host__ __device__ inline int64_t padded_q_blocks(const AttentionParams& p, int br) {
  return p.cu_seqlens_q ? int64_t(p.total_q) / br + p.batch : int64_t(p.batch) * ((p.seqlen_q + br - 1) / br);
}
template <int kBr>
__device__ inline int64_t block_start(const AttentionParams& p, int b) {
  return p.cu_seqlens_q ? int64_t(p.cu_seqlens_q[b]) / kBr + b : int64_t(b) * ((p.seqlen_q + kBr - 1) / kBr);
}

// A step's dQ block (shared memory and scratch alike) in the consumers' accumulator order: accumulator
// block jj (8 columns) of consumer thread c (0..255) is float4 jj * 256 + c, so that a warp's stores (or,
// at d = 256, its atomics) are 512 contiguous bytes. Its four floats are (row, col), (row, col + 1),
// (row + 8, col), (row + 8, col + 1) of the kBr x D block: rows 16 warp + lane / 4 and columns
// 8 jj + 2 (lane % 4) of share w = c / 128 (BwdShape::kDqByRows, kDqCols). The consumers write it (dq_float4), the convert kernel reads it (dq_place).
__host__ __device__ constexpr int dq_float4(int jj, int consumer_thread) { return jj * 256 + consumer_thread; }
struct DqPlace {
  int row, col;
};
template <class S>
__device__ inline DqPlace dq_place(int f) {
  const int jj = f / 256, c = f % 256, w = c / 128, warp = (c / 32) % 4, lane = c % 32;
  return {(S::kDqByRows ? 64 * w : 0) + warp * 16 + lane / 4, (S::kDqByRows ? 0 : S::kDqCols * w) + jj * 8 + (lane % 4) * 2};
}

// The Q blocks a CTA (K/V block j of kv head g, batch entry b) walks: every query head of g's group,
// and for each the Q blocks [i_begin, i_begin + n) whose rows see any of the block's keys (sequence.cuh
// rows_seeing: the window rule's closed form, or with kMask rows_seeing_by_warp's 32-ary searches of a
// mask function's row intervals, so every thread of the CTA constructs it), step t at head
// g group + t / n, Q block i_begin + t % n (deterministic too: bwd_dq_writer.cuh says why). Rotated
// (deterministic, every CTA walking every Q block of its heads: BwdScratch::rotate), the walk starts at
// place j mod steps and wraps around (tile_order.hpp rotated_turn_rank says why).
template <int kBr, int kBc>
struct BwdWalk {
  int i_begin = 0, n = 0, head0 = 0, steps = 0, rot = 0;
  bool rotated = false;
  template <bool kMask>
  __device__ BwdWalk(const BackwardParams& p, const Sequence& s, int j, int g, const RowMask& rm,
                     std::bool_constant<kMask>) {
    const int group = p.heads_q / p.heads_kv, key0 = j * kBc, key1 = min(key0 + kBc, s.sk);
    const RowRange rows =
        kMask ? rows_seeing_by_warp(key0, key1, rm) : rows_seeing(key0, key1, s.sq, s.sk, p.window_left, p.window_right);
    i_begin = rows.lo / kBr;
    n = rows.hi > rows.lo ? (rows.hi + kBr - 1) / kBr - i_begin : 0;
    head0 = g * group;
    steps = group * n;
  }
  __device__ void rotate(int j) {
    rotated = true;
    rot = steps > 0 ? j % steps : 0;
  }
  // Step t's place in the unrotated walk: (head - head0) n + (block - i_begin).
  __device__ int at(int t) const { return t + rot < steps ? t + rot : t + rot - steps; }
  __device__ int head(int t) const { return head0 + at(t) / n; }
  __device__ int block(int t) const { return i_begin + at(t) % n; }
};

}  // namespace flashlab::gpu::fa3
