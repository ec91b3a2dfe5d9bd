// fa3 backward's dQ writer: warp 1 of warpgroup 0 adds each step's dQ (shared memory, fp32) into the
// scratch with one bulk reduction, so that the consumers never wait on global atomics.
#pragma once
#include "bwd_smem.cuh"

namespace flashlab::gpu::fa3 {

// The hand-over of sm.dq between the consumers (256 threads) and the writer (one warp), two named
// barriers of kDqThreads (bwd_smem.cuh): the consumers sync on kDqEmpty before writing a step's dQ and
// arrive on kDqFull after; the writer syncs on kDqFull and arrives on kDqEmpty once its reduction has read
// shared memory (and once before the first step).

// Deterministic: the K/V blocks that see Q block i add into it one at a time, in the order of j (a CTA
// waits, before its reduction, until the semaphore of (head, Q block) counts the blocks before it, and
// raises it once its reduction has landed), so every element of dQ is summed in one order. CTAs wait
// only on CTAs of lower j of the same head and entry, launched before them: no cycle. Every CTA walks
// its Q blocks from the last (BwdWalk), so that under a causal mask or a window, where K/V block j's
// walk starts further down than j - 1's, all reach a Q block at the same step and each waits only for
// its predecessor's reduction (walking from the first, CTA j would sit out the steps j - 1 takes to get
// there, and hold its SM until the first CTA of its head ends: 0.69-0.74x of the atomic backward, H100,
// d = 128 causal).
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
  constexpr int kBr = S::kBr, kBc = S::kBc;
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
        const int first_j = kMask ? key_blocks<kBr, kBc>(i * kBr, rm).begin
                                  : key_blocks<kBr, kBc>(i * kBr, seq.sq, seq.sk, p.window_left, p.window_right).begin;
        const int rank = j - first_j;
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

}  // namespace flashlab::gpu::fa3
