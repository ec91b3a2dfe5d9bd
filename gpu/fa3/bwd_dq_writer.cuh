// fa3 backward's dQ writer: warp 1 of warpgroup 0 adds each step's dQ (shared memory, fp32) into the
// scratch with one bulk reduction, so that the consumers never wait on global atomics.
#pragma once
#include "../tile_order.hpp"
#include "bwd_smem.cuh"

namespace flashlab::gpu::fa3 {

// The hand-over of sm.dq between the consumer whose turn the step is (128 threads) and the writer (one
// warp), two named barriers of kDqThreads (bwd_smem.cuh): the consumer syncs on kDqEmpty before writing a
// step's dQ and arrives on kDqFull after; the writer syncs on kDqFull and arrives on kDqEmpty once its
// reduction has read shared memory (and once before the first step).

// Deterministic: the K/V blocks that see Q block i add into it one at a time, from the last of them down
// (a CTA waits, before its reduction, until the semaphore of (head, Q block) counts the blocks after it,
// and raises it once its reduction has landed), so every element of dQ is summed in one order. The grid
// launches a head's K/V blocks from the last (fa3_bwd.cu), so a CTA waits only on CTAs launched before
// it: no cycle. Every CTA walks its Q blocks from its first: under a causal mask K/V block j + 1's walk
// starts a block further down than j's, so it reaches each Q block a step before j does, and j finds its
// turn ready: the CTAs of a head form a pipeline. (In the order of j, with every walk from the last, all
// reached a Q block at the same step and each waited for its predecessor's reduction, the CTAs of a head
// in a chain: 0.65-0.77x of the atomic backward at d = 256 causal, H100.) Without a mask every walk would
// start at the first block, and the chain remain: there the walks rotate (tile_order.hpp
// rotated_turn_rank) where a head's K/V blocks fit on the device at once. (Launching the heads of a K/V
// block together instead, so that a wave's CTAs are of different heads, broke the chain, but each CTA then
// read its own head's Q and dO from DRAM: 0.42-0.77x of the atomic backward, H100, but at s = 16k.)
// K/V block j's turn at Q block i: how many of the blocks that block sees (the forward's key_blocks) come
// after j.
template <class S, bool kMask>
__device__ inline int seen_rank(const BackwardParams& p, const Sequence& seq, const RowMask& rm, int i, int j) {
  constexpr int kBr = S::kBr, kBc = S::kBc;
  const int end = kMask ? key_blocks<kBr, kBc>(i * kBr, rm).end
                        : key_blocks<kBr, kBc>(i * kBr, seq.sq, seq.sk, p.window_left, p.window_right).end;
  return end - 1 - j;
}
// K/V block j's turn at step t of its walk.
template <class S, bool kMask>
__device__ inline int turn_rank(const BackwardParams& p, const Sequence& seq, const RowMask& rm,
                                const BwdWalk<S::kBr, S::kBc>& walk, int t, int j) {
  if (walk.rotated) return rotated_turn_rank(walk.steps, t, j, (seq.sk + S::kBc - 1) / S::kBc);  // tile_order.hpp
  return seen_rank<S, kMask>(p, seq, rm, walk.block(t), j);
}

__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void add_release(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

template <class S, typename T, bool kDeterministic, bool kMask>
__device__ void write_dq(BwdSmem<S, T>& sm, const BackwardParams& p, const BwdScratch& sc, const Sequence& seq,
                         const BwdWalk<S::kBr, S::kBc>& walk, const RowMask& rm, int j, int b) {
  constexpr int kBr = S::kBr;
  const bool leader = threadIdx.x % 32 == 0;
  const int64_t first = block_start<kBr>(p, b);
  if (walk.steps > 0) named_arrive(kDqEmpty, kDqThreads);
  for (int t = 0; t < walk.steps; ++t) {
    const int h = walk.head(t), i = walk.block(t);
    const int64_t block = int64_t(h) * sc.blocks + first + i;
    named_sync(kDqFull, kDqThreads);
    if (leader) {
      if constexpr (kDeterministic) {
        // This K/V block's place among those Q block i sees (the forward's key_blocks of that block).
        const int rank = turn_rank<S, kMask>(p, seq, rm, walk, t, j);
        while (load_acquire(sc.sem + block) != rank) {
        }
        fence_async_global();
      }
      bulk_reduce_add(sc.dq_accum + block * S::kDqFloats, sm.dq, S::kDqFloats * sizeof(float));
      bulk_commit();
      if constexpr (kDeterministic) {
        bulk_wait<0>();  // landed in global memory, not only read out of shared memory
        fence_async_global();
        add_release(sc.sem + block, 1);
      } else {
        bulk_wait_read<0>();
      }
    }
    __syncwarp();
    if (t + 1 < walk.steps) named_arrive(kDqEmpty, kDqThreads);
  }
  if (leader) bulk_wait<0>();  // every reduction complete before the CTA's shared memory goes away
}

// d = 256, deterministic: the consumers add their dQ by atomics from registers (bwd_consumer_split.cuh),
// each into its own columns, so each has its semaphore a Q block and its turn keeper, warp 1 + w of
// warpgroup 0, which does what would otherwise stall the consumer: it waits for the turn (the K/V blocks
// after this one have added theirs into the block), lets the warpgroup in (kDqTurn + w), waits until its
// atomics are issued (kDqAdded + w; the consumers arrive and go on) and raises the count with a release,
// which the barrier orders after the warpgroup's atomics (PTX's causality order is cumulative through
// bar.arrive / bar.sync; CUTLASS's GenericBarrier relies on the same). The release waits for the atomics
// to land: when the consumers raised the count themselves, every step stalled on that (0.65-0.75x of the
// atomic backward, H100). (A turn for each half of the consumer's columns, so that the step's dV and dK
// GEMMs, which the consumers wait for between the halves, were outside the turns: 0.81-0.90x of one turn
// a step, H100: the keeper, one warp, then released and waited twice a step, one after the other.)
template <class S, bool kMask>
__device__ void keep_dq_turns(const BackwardParams& p, const BwdScratch& sc, const Sequence& seq,
                              const BwdWalk<S::kBr, S::kBc>& walk, const RowMask& rm, int j, int b, int w) {
  const bool leader = threadIdx.x % 32 == 0;
  const int64_t first = block_start<S::kBr>(p, b);
  const auto sem_at = [&](int t) {
    return sc.sem + (int64_t(walk.head(t)) * sc.blocks + first + walk.block(t)) * S::kSems + w;
  };
  bool let_in = false;  // step t's turn already given (looked ahead at step t - 1)
  for (int t = 0; t < walk.steps; ++t) {
    int* sem = sem_at(t);
    if (!let_in) {
      if (leader) {
        const int rank = turn_rank<S, kMask>(p, seq, rm, walk, t, j);
        while (load_acquire(sem) != rank) {
        }
      }
      __syncwarp();
      named_arrive(kDqTurn + w, kTurnThreads);
    }
    named_sync(kDqAdded + w, kTurnThreads);
    // Look ahead (not on rotated walks): if the next turn is already this block's, let the consumers in
    // before this release, which waits for this step's adds to land; never wait on another CTA before
    // releasing (that could cycle). On rotated walks the consumers' next adds then land before this
    // release too, a step late for the block that follows at this Q block (0.81-0.83x of atomic at d = 256
    // without a mask, against 0.85-0.88x, H100).
    let_in = false;
    if (!walk.rotated && t + 1 < walk.steps) {
      int ready = 0;
      if (leader) ready = load_acquire(sem_at(t + 1)) == turn_rank<S, kMask>(p, seq, rm, walk, t + 1, j);
      ready = __shfl_sync(0xffffffffu, ready, 0);
      if (ready) {
        named_arrive(kDqTurn + w, kTurnThreads);
        let_in = true;
      }
    }
    if (leader) add_release(sem, 1);
  }
}

}  // namespace flashlab::gpu::fa3
