// fa3's consumers: two warpgroups of 64 query rows each compute S = Q K^T and O += P V with wgmma and
// the online softmax in registers, then the epilogue.
//
// Two overlaps keep the tensor cores busy while the softmax runs (FA3 paper, Section 3):
//   intra-warpgroup  in iteration j a warpgroup issues S_j = Q K_j^T, then O += P_{j-1} V_{j-1} for the
//                    previous block, and computes S_j's softmax while that second GEMM runs. The
//                    softmax of block j - 1 was done in iteration j - 1, so each GEMM waits only for data.
//   ping-pong        the two warpgroups take turns issuing their GEMMs (named barriers 1 and 2): while one
//                    warpgroup's GEMMs run, the other computes its softmax.
#pragma once
#include <cmath>
#include <type_traits>

#include "../mask.cuh"
#include "../mma.cuh"
#include "../softmax.cuh"
#include "epilogue.cuh"
#include "head_dim_gemm.cuh"
#include "smem.cuh"
#include "wgmma_ops.cuh"

namespace flashlab::gpu::fa3 {

// The turns of the ping-pong: warpgroup w of n waits on barrier 1 + w before issuing its GEMMs and, once
// they are issued, lets the next warpgroup, (w + 1) mod n, go on its barrier. Each barrier counts the
// waiting warpgroup and the one that lets it go (256 threads).
// (Measured against free-running warpgroups in one process: +7-12% at s = 16k, -5% to +4% at s = 1k;
// bench/results/ab-h100-2026-11-23-fa3-pingpong.csv.)
template <int kN>
struct PingPong {
  int wg;
  static constexpr int kThreads = 256;
  __device__ void start() const {  // the last warpgroup gives warpgroup 0 the first turn
    if (wg == kN - 1) named_arrive(1, kThreads);
  }
  __device__ void wait_turn() const { named_sync(1 + wg, kThreads); }
  __device__ void pass_turn() const { named_arrive(1 + (wg + 1) % kN, kThreads); }
  __device__ void finish() const {  // warpgroup 0 takes the last warpgroup's last pass: none left pending
    if (wg == 0) named_sync(1, kThreads);
  }
};

// One warpgroup's view of a tile: its rows' running statistics and masks.
template <class S, typename T, bool kSoftcap, bool kMask>
struct Rows {
  static constexpr int kBc = S::kBc;
  float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f};
  int lo[2], hi[2];  // the key columns each of this thread's two rows sees (the window, or a mask's interval)
  int qcol;
  int batch, head, row, sq;  // kMask: where this thread's first row is, for a dense mask's bits

  // S_j's softmax in place (P~ = exp2(s c - m c)), the running max and sum updated; returns alpha, the
  // factor O must be scaled by before P~ V_j is added. A block that needs the element mask gets each
  // row's interval and, under a dense mask, its bits (read here, where needed: held through the loop,
  // the two rows' BitRows would cost six registers).
  __device__ void softmax(float (&s)[kBc / 8][4], int j, bool needs_mask, const AttentionParams& p, float c,
                          float (&alpha)[2]) {
    if constexpr (kSoftcap) softmax::softcap(s, p.softcap, p.scale / p.softcap);
    if (needs_mask) {
      softmax::mask(s, j * kBc, qcol, lo, hi);
      if (kMask && p.bits.words) {
        const BitRow bits[2] = {bit_row(p.bits, batch, head, row, sq), bit_row(p.bits, batch, head, row + 8, sq)};
        softmax::mask_bits(s, j * kBc, qcol, bits);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) alpha[r] = softmax::online_step(s, r, c, max[r], sum[r]);
  }
};

// Each GEMM's k-step descriptors from one base an operand, made where issued (ptx.cuh fresh) at d = 256,
// where the compiler held S = Q K^T's 16 of them through the loop and the consumers spilled (20-23 spill
// instructions in the main loop before, none after); d <= 128 had none, and keeps its code.
template <class S>
constexpr bool kFreshDescriptors = S::D > 128;

// S = Q K^T for this warpgroup's 64 rows of Q buffer qb against K in stage s (head_dim_gemm.cuh).
template <class S, typename T>
__device__ __forceinline__ void issue_qk(float (&acc_s)[S::kBc / 8][4], Smem<S, T>& sm, int wg, int qb, int s) {
  mma_over_head_dim<S::kBc, S::D, T, kFreshDescriptors<S>>(acc_s, smem_u32(&sm.q[qb][0][wg * 64][0]),
                                                           sizeof(sm.q[0][0]), smem_u32(&sm.k[s][0][0][0]),
                                                           sizeof(sm.k[0][0]));
  wgmma_commit();
}

// O += P~ V for V in stage s: Bc / kKStep wgmmas, P~ from registers. 16-bit V is read N-major (its rows
// run along the head dim, 64-column blocks kBc x 128 bytes apart); FP8's V^T K-major, as K is read.
template <class S, typename T>
__device__ __forceinline__ void issue_pv(float (&acc_o)[S::D / 8][4], const uint32_t (&pa)[S::kBc / kKStep<T>][4],
                                         Smem<S, T>& sm, int s) {
  const uint64_t b0 = fresh<kFreshDescriptors<S>>(
      sw128_desc(smem_u32(&sm.v[s][0][0][0]), Smem<S, T>::kVt ? 16 : S::kBc * 128, 1024));
#pragma unroll
  for (int kk = 0; kk < S::kBc / kKStep<T>; ++kk) {
    if constexpr (Smem<S, T>::kVt) {
      mma_rs<S::D, T>(acc_o, pa[kk], desc_plus(b0, (kk / 4) * uint32_t(sizeof(sm.v[0][0])) + (kk % 4) * 32), 1);
    } else {
      mma_rs_bt<S::D, T>(acc_o, pa[kk], desc_plus(b0, kk * 16 * 128), 1);
    }
  }
  wgmma_commit();
}

// Four floats as four e4m3 bytes, the first in the low byte (round to nearest even, saturating).
__device__ __forceinline__ uint32_t e4m3x4(float a, float b, float c, float d) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// P~ (S's accumulator after the softmax) as the A operand of O += P~ V, a row of pa a wgmma k-step. 16-bit
// types pack two 8-key blocks a step: the accumulator's layout is the A fragment's (mma::c_to_a). FP8
// packs four: a thread holds keys 2t, 2t + 1 of each 8-key block where the k32 A fragment names keys
// 4t .. 4t + 3 (and 16 + 4t ..), so it hands over its own keys in their place, and V^T stores each 32-key
// group's keys in the order that puts the matching V row there (fa3_fwd.cu's fp8_key_order): the sum over
// keys is the same.
template <typename T, int kBc>
__device__ __forceinline__ void p_to_a(uint32_t (&pa)[kBc / kKStep<T>][4], const float (&s)[kBc / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < kBc / kKStep<T>; ++kk) {
    if constexpr (sizeof(T) == 1) {
      const float(&b0)[4] = s[4 * kk], (&b1)[4] = s[4 * kk + 1], (&b2)[4] = s[4 * kk + 2], (&b3)[4] = s[4 * kk + 3];
      pa[kk][0] = e4m3x4(b0[0], b0[1], b1[0], b1[1]);  // row g
      pa[kk][1] = e4m3x4(b0[2], b0[3], b1[2], b1[3]);  // row g + 8
      pa[kk][2] = e4m3x4(b2[0], b2[1], b3[0], b3[1]);
      pa[kk][3] = e4m3x4(b2[2], b2[3], b3[2], b3[3]);
    } else {
      mma::c_to_a<T>(pa[kk], s[2 * kk], s[2 * kk + 1]);
    }
  }
}

// Consumer warpgroup `wg` (0 .. kConsumers - 1) computes rows [64 wg, 64 wg + 64) of each of its CTA's tiles.
// Its blocks are the producer's (producer.cuh): a run of key_blocks, or with kMask the run of the mask
// function's row intervals, or under a dense mask the Q block's list, partial blocks first (BlockWalk);
// a block needs the element mask where it crosses an interval's edge, or where the list says partial.
// O goes out through map_o where o_tma and the tile allows (epilogue.cuh).
template <class S, typename T, bool kSoftcap, bool kMask, bool kPack>
__device__ void consume(Smem<S, T>& sm, const AttentionParams& p, const TileScheduler& sched, int wg,
                        const CUtensorMap* map_o, bool o_tma) {
  constexpr int D = S::D, kBc = S::kBc, kBr = S::kBr, kStages = S::kStages;
  constexpr bool kFromEnd = fa3_forward_q_blocks_from_end(kMask, kBr, kBc);  // scheduler.cuh first_row
  constexpr bool kOwnEnds = kOwnWalkEnds<kMask, kPack>(kBr, kBc);  // below: xw
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int qrow = lane / 4;
  const float c = kSoftcap ? mma::kLog2e : p.scale * mma::kLog2e;  // scores -> log2 units
  const PingPong<S::kConsumers> turns{wg};
  turns.start();
  int it = 0, tile_it = 0;  // K/V blocks and tiles consumed so far: stages and mbarrier parities
  for (int k = 0;; ++k) {
    const int slot = k & 1;
    mbar_wait(&sm.tile_full[slot], (k >> 1) & 1);
    // The tile, its lengths, the walk's bounds and the step count are warp_uniform (ptx.cuh): the K/V stage
    // each step reads, and so its wgmma descriptors, follow from them (forward v16). Lane 0 reads the slot and
    // frees it: the read and the arrive in one thread's order (with every lane reading and a __syncwarp before
    // lane 0's arrive, racecheck reported the producer's next write to the slot, at a CTA's third tile).
    const int t = warp_uniform(lane == 0 ? *reinterpret_cast<volatile int*>(&sm.tile[slot]) : 0);
    if (lane == 0) mbar_arrive(&sm.tile_empty[slot]);
    if (t >= sched.count()) break;
    const Tile tile = sched.at(t);
    int sq, sk;  // this tile's sequence lengths (the rest of its Sequence is read again in the epilogue,
    RowMask rm;  // so that its offsets do not hold registers through the main loop); kMask: the mask
    {            // function's row intervals (this batch entry's rows of its arrays; fixed length)
      const Sequence seq = sequence_of(p, tile.batch);
      sq = warp_uniform(seq.sq);  // a varlen batch's lengths are loads
      sk = warp_uniform(seq.sk);
      rm = row_mask<kMask>(p, seq, tile.batch);
    }
    // Positions row0 .. row0 + rows - 1 (kBr of them, or packed kBr / pack of each of pack heads: thread
    // row r is head tile.head + r / rows at position row0 + r % rows; scheduler.cuh PackGQA).
    // Counted from the sequence's end where kFromEnd (scheduler.cuh first_row): rows before 0 are computed
    // and not written.
    const int rows_n = sched.rows<kBr, kPack>();
    if (!TileScheduler::in_sequence(tile.m_block, rows_n, sq)) continue;
    const TileScheduler::TileRows tr = TileScheduler::tile_rows<kFromEnd>(tile.m_block, rows_n, sq);
    const int row0 = tr.row0;
    const auto blocks = kMask ? key_blocks<kBr, kBc>(row0, rm)
                              : key_blocks<kBc>(tr.first, tr.count, sq, sk, p.window_left, p.window_right);
    const BlockWalk walk = kMask ? block_walk(p.fa3_blocks, tile.batch, tile.m_block, blocks.begin, blocks.end)
                                 : BlockWalk{};
    // The walk's steps [x0, x1): block x itself (the run; the loop below then reads as it did before
    // masks, and keeps its registers), or the walk's block x (kMask). Which block, and whether it needs
    // the element mask: with kMask, steps [f0, f1) are the full blocks, a list's after its partial ones
    // or a run's middle, where every row sees every key (KeyBlocks' full_lo / full_hi): two ints through
    // the loop in place of the list's count of partial blocks and both bounds (at d = 256, 8-12 bytes
    // fewer spills).
    const int x0 = warp_uniform(kMask ? 0 : blocks.begin), x1 = warp_uniform(kMask ? walk.count : blocks.end);
    auto block = [&](int x) { return kMask ? walk.block(x) : x; };
    int f0 = 0, f1 = 0;
    if constexpr (kMask) {
      f0 = walk.list ? walk.partial : (blocks.full_lo + kBc - 1) / kBc - blocks.begin;
      f1 = walk.list ? walk.count : blocks.full_hi / kBc - blocks.begin;
    }
    auto needs_mask = [&](int x, int j) { return kMask ? !(x >= f0 && x < f1) : blocks.needs_mask(j); };
    // This warpgroup's own end of the walk, [x0, xw) (kOwnEnds; scheduler.cuh own_end): the blocks past it are
    // the producer's to release for it, and their turns are taken without GEMMs (below).
    const int xw = kOwnEnds ? warp_uniform(TileScheduler::own_end<kBc>(row0, wg, sq, sk, p.window_right, x0, x1)) : x1;

    Rows<S, T, kSoftcap, kMask> rows;
    rows.qcol = (lane % 4) * 2;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int local = wg * 64 + warp * 16 + qrow + 8 * r, row = row0 + (kPack ? local % rows_n : local);
      rows.lo[r] = kMask ? rm.begin(row) : col_begin(row, sq, sk, p.window_left);
      rows.hi[r] = kMask ? rm.end(row) : col_end(row, sq, sk, p.window_right);
    }
    if constexpr (kMask) {
      rows.batch = tile.batch;
      rows.head = tile.head;
      rows.row = row0 + wg * 64 + warp * 16 + qrow;
      rows.sq = sq;
    }
    float acc_o[D / 8][4];
    mma::zero(acc_o);
    float acc_s[kBc / 8][4];
    uint32_t pa[kBc / kKStep<T>][4];  // P~ of the previous block as the A operand (p_to_a)
    float alpha[2];

    // Q buffer qb (smem.cuh: two where kStagedTiles), its parity from the tiles before.
    const int qb = warp_uniform(tile_it % Smem<S, T>::kQBuffers);
    mbar_wait(&sm.q_full[qb], (tile_it / Smem<S, T>::kQBuffers) & 1);
    if constexpr (kOInV<S, T>)
      if (tile_it > 0) free_o_stage(sm);  // the tile before's O, out of V's stages by now (epilogue.cuh)
    ++tile_it;
    // The step count, carried around the loop over tiles, is re-made uniform at each tile: without it ptxas
    // held it in a general register, and every K/V stage address and k-step descriptor went through general
    // registers and R2UR moves (d = 128: 77 R2UR between the first and last HGMMA, 3 with it).
    it = warp_uniform(it);
    const int n = xw - x0;  // this warpgroup's blocks (the tile's, x1 - x0, without kOwnEnds)
    if (n > 0) {
      // Block 0: S_0 alone; its softmax has no GEMM to hide under.
      {
        const int s = it % kStages;
        mbar_wait(&sm.k_full[s], (it / kStages) & 1);
        turns.wait_turn();
        wgmma_fence();
        issue_qk(acc_s, sm, wg, qb, s);
        turns.pass_turn();
        wgmma_wait<0>();
        fence_regs(acc_s);
        if (lane == 0) mbar_arrive(&sm.k_empty[s]);
        if (n == 1 && lane == 0) mbar_arrive(&sm.q_empty[qb]);  // this warp's last S = Q K^T is done
        const int j = block(x0);
        rows.softmax(acc_s, j, needs_mask(x0, j), p, c, alpha);
        p_to_a<T, kBc>(pa, acc_s);
        ++it;
      }
      // Blocks 1 .. n-1 of the walk: S_j and the previous block's P V in flight together; S_j's softmax under
      // the second.
      for (int x = x0 + 1; x < xw; ++x, ++it) {
        const int j = block(x);
        const int s = it % kStages, sp = (it - 1) % kStages;
        mbar_wait(&sm.k_full[s], (it / kStages) & 1);
        turns.wait_turn();
        wgmma_fence();
        issue_qk(acc_s, sm, wg, qb, s);
        softmax::rescale(acc_o, alpha);  // alpha of block j - 1, while S_j runs
        mbar_wait(&sm.v_full[sp], ((it - 1) / kStages) & 1);
        wgmma_fence();
        issue_pv(acc_o, pa, sm, sp);
        turns.pass_turn();
        wgmma_wait<1>();  // S_j is done (P V may still run)
        fence_regs(acc_s);
        if (lane == 0) mbar_arrive(&sm.k_empty[s]);
        if (x + 1 == xw && lane == 0) mbar_arrive(&sm.q_empty[qb]);
        rows.softmax(acc_s, j, needs_mask(x, j), p, c, alpha);
        wgmma_wait<0>();  // P_{j-1} V_{j-1} is done: its registers and V's stage are free
        fence_regs(acc_o);
        if (lane == 0) mbar_arrive(&sm.v_empty[sp]);
        p_to_a<T, kBc>(pa, acc_s);
      }
      // The last block's P V.
      {
        const int sp = (it - 1) % kStages;
        softmax::rescale(acc_o, alpha);
        mbar_wait(&sm.v_full[sp], ((it - 1) / kStages) & 1);
        turns.wait_turn();
        wgmma_fence();
        issue_pv(acc_o, pa, sm, sp);
        turns.pass_turn();
        wgmma_wait<0>();
        fence_regs(acc_o);
        if (lane == 0) mbar_arrive(&sm.v_empty[sp]);
      }
    } else if (lane == 0) {
      mbar_arrive(&sm.q_empty[qb]);  // no key to see: Q was not needed
    }
    if constexpr (kOwnEnds) {
      // The tile's blocks past this warpgroup's keys: no GEMM, no softmax, and their stages released by the
      // producer (producer.cuh), but each its turn of the ping-pong taken and passed, so that every warpgroup takes
      // a tile's x1 - x0 + 1 turns (one with no block its first one too). x1 is made again, from a fresh sq: held
      // through the loop beside xw, it cost d = 256's consumers 8 bytes more of spills.
      const int sq_e = fresh(sq);
      const TileScheduler::TileRows tr_e = TileScheduler::tile_rows<kFromEnd>(tile.m_block, kBr, sq_e);
      const int skipped =
          warp_uniform(key_blocks<kBc>(tr_e.first, tr_e.count, sq_e, sk, p.window_left, p.window_right).end) - xw;
      for (int turn = n == 0 && skipped > 0 ? -1 : 0; turn < skipped; ++turn) {
        turns.wait_turn();
        turns.pass_turn();
      }
      it += skipped;
    }

    const int rows_e = sched.rows<kBr, kPack>();  // read again: not held through the loop
    epilogue<S, T, kPack>(acc_o, rows.sum, rows.max, sm, p, tile,
                          TileScheduler::first_row<kFromEnd>(tile.m_block, rows_e, sq), rows_e, sq, c, wg, map_o,
                          o_tma, it);
  }
  turns.finish();
  if (threadIdx.x % 128 == 0) bulk_wait<0>();  // the last staged store is done (kOInV: no V load waits on o_free)
}

}  // namespace flashlab::gpu::fa3
