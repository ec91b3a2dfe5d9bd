// fa3 backward's consumers at d = 256: the two warpgroups share the CTA's 64 keys and split the head dim,
// since one warpgroup's dK and dV for 64 keys x 256 columns would take 256 registers a thread.
//
// A step (Q block i of 64 rows, query head h), for consumer w (columns c_w = 128 w .. 128 w + 127 of the
// head dim, query rows r_w = 32 w .. 32 w + 31 of the block):
//   S^T[:, r_w] = K Q_i[r_w]^T, dP^T[:, r_w] = V dO_i[r_w]^T   wgmma 64 x 32, both operands K-major
//   P^T, dS^T for those rows                  in registers (prob_grad.cuh), masked as bwd_consumer.cuh
//   its halves of P^T and dS^T -> shared memory, in the 128-byte swizzle with keys as rows; both
//                                             consumers meet (named barrier kTraded), then each reads the
//                                             other's half back into the A-operand layout
//   dQ_i[:, c_w] (+)= dS K[:, c_w]            in two 64 x 64 halves, dS^T and K read MN-major, added into
//                                             the scratch by float4 atomics (red.global.add.v4.f32): the
//                                             first half's while dV's and dK's GEMMs run, the second after
//   dV[:, c_w] += P^T dO_i[:, c_w], dK[:, c_w] += dS^T Q_i[:, c_w]   wgmma 64 x 128, P^T, dS^T from registers
// The A operand of a 16-row k-step holds, for thread (warp, lane), keys 16 warp + g (+ 8) and query rows
// 16 kk + 2 t (+ 1, + 8, + 9): the words consumer w wrote for k-steps 2 w, 2 w + 1 are exactly those its
// thread of the same place in the other warpgroup reads, so the trade is a store and a load of the same
// addresses, conflict-free (each 8-key group's rows land on distinct 16-byte units under the swizzle).
#pragma once
#include "../mma.cuh"
#include "../prob_grad.cuh"
#include "bwd_dq_writer.cuh"
#include "bwd_smem.cuh"
#include "bwd_tile.cuh"
#include "wgmma_ops.cuh"

namespace flashlab::gpu::fa3 {

// Byte offset of (key, query column pair 8 n + 2 t) in a 64 x 64 tile of P^T or dS^T (keys as 128-byte
// rows, 16-byte unit n swizzled by the key).
__device__ __forceinline__ int traded_at(int key, int n, int tc) { return key * 128 + ((n ^ (key % 8)) * 16) + tc * 2; }

template <class S, typename T, bool kSoftcap, bool kDeterministic, bool kMask>
__device__ void consume_bwd_split(BwdSplitSmem<S, T>& sm, const BackwardParams& p, const BwdScratch& sc,
                                  const Sequence& seq, const BwdWalk<S::kBr, S::kBc>& walk, const RowMask& rm, int j,
                                  int g, int b, int w) {
  constexpr int D = S::D, kBr = S::kBr, kBc = S::kBc, kHalf = D / 2, kRows = kBr / 2;
  static_assert(S::kSplitD && kBr == 64 && kBc == 64 && kHalf == S::kDqCols);
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, gr = lane / 4, tc = (lane % 4) * 2;
  const int key0 = j * kBc;
  const int my_key = warp * 16 + gr;  // this thread's keys (rows of S^T): my_key, my_key + 8

  float acc_dv[kHalf / 8][4], acc_dk[kHalf / 8][4];
  mma::zero(acc_dv);
  mma::zero(acc_dk);
  const int64_t first = block_start<kBr>(p, b);

  if (walk.steps > 0) mbar_wait(&sm.kv_full, 0);
  for (int t = 0; t < walk.steps; ++t) {
    const int st = t % S::kStages, row0 = walk.block(t) * kBr + w * kRows;  // this consumer's first query row
    mbar_wait(&sm.full[st], (t / S::kStages) & 1);

    // S^T and dP^T for this consumer's 32 query rows: D / 16 steps of 16 along the head dim.
    float acc_s[kRows / 8][4], acc_dp[kRows / 8][4];
    wgmma_fence();
    mma_over_head_dim<kRows, D, T>(acc_s, smem_u32(&sm.k[0][0][0]), sizeof(sm.k[0]),
                                   smem_u32(&sm.q[st][0][w * kRows][0]), sizeof(sm.q[0][0]));
    mma_over_head_dim<kRows, D, T>(acc_dp, smem_u32(&sm.v[0][0][0]), sizeof(sm.v[0]),
                                   smem_u32(&sm.d_o[st][0][w * kRows][0]), sizeof(sm.d_o[0][0]));
    wgmma_commit();
    const TileVerdicts<kRows> verdicts = mask_verdicts<kRows, kBc, kMask>(seq, rm, key0, my_key, row0, tc);
    wgmma_wait<0>();
    fence_regs(acc_s);
    fence_regs(acc_dp);
    // Element (n, e): key my_key + 8 (e / 2), query row row0 + 8 n + tc + (e & 1).
    prob_grads<kSoftcap, kRows>(acc_s, acc_dp, sm.lse2[st] + w * kRows, sm.dsum[st] + w * kRows, tc, p);
    mask_tile<kRows, kBc, kMask>(acc_s, acc_dp, p, seq, verdicts, key0, my_key, row0, tc);

    // The A operands of the four 16-row k-steps: this consumer's two (kk / 2 == w) from its accumulators,
    // written to shared memory for the other, whose two are read back once both have written (kTraded).
    // Every index below is a constant (the test on w picks, it does not index): a register array indexed
    // by w would go to local memory. Word 2 h + r of k-step kk: key my_key + 8 r, 16-byte unit 2 kk + h.
    uint32_t pa[kBr / 16][4], dsa[kBr / 16][4];
    unsigned char* ps = reinterpret_cast<unsigned char*>(&sm.ps[t & 1][0][0]);
    unsigned char* ds = reinterpret_cast<unsigned char*>(&sm.ds[t & 1][0][0]);
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk)
      if (kk / 2 == w) {
        mma::c_to_a<T>(pa[kk], acc_s[2 * (kk % 2)], acc_s[2 * (kk % 2) + 1]);
        mma::c_to_a<T>(dsa[kk], acc_dp[2 * (kk % 2)], acc_dp[2 * (kk % 2) + 1]);
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int at = traded_at(my_key + 8 * r, 2 * kk + h, tc);
            *reinterpret_cast<uint32_t*>(ps + at) = pa[kk][2 * h + r];
            *reinterpret_cast<uint32_t*>(ds + at) = dsa[kk][2 * h + r];
          }
      }
    fence_async_shared();  // dS^T visible to the dQ wgmma (the async proxy) once both have met
    named_sync(kTraded, 256);
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk)
      if (kk / 2 != w) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int at = traded_at(my_key + 8 * r, 2 * kk + h, tc);
            pa[kk][2 * h + r] = *reinterpret_cast<const uint32_t*>(ps + at);
            dsa[kk][2 * h + r] = *reinterpret_cast<const uint32_t*>(ds + at);
          }
      }

    // dQ's first 64 columns of c_w = dS K (A = dS^T read M-major, B = K's block 2 w read MN-major, four
    // k-steps of 16 keys), then dV[:, c_w] += P^T dO and dK[:, c_w] += dS^T Q (four k-steps of 16 query
    // rows, B read N-major from the stage's blocks 2 w, 2 w + 1), then dQ's second half (K's block
    // 2 w + 1) once the first half's atomics are out. One half at a time holds 32 accumulators, not 64:
    // with the whole 64 x 128 at once, ptxas spilled (30 spill instructions in the loop) and the atomics
    // waited for every GEMM; in halves, 0 spills and 1.15-1.20x forward + backward (H100, v7).
    float acc_dq[kHalf / 16][4];
    wgmma_fence();
    const uint64_t a0 = fresh<true>(sw128_desc(smem_u32(&sm.ds[t & 1][0][0]), kBc * 128, 1024));
    const uint64_t b0 = fresh<true>(sw128_desc(smem_u32(&sm.k[2 * w][0][0]), kBc * 128, 1024));
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk)
      mma_ss_tt<kHalf / 2, T>(acc_dq, desc_plus(a0, kk * 16 * 128), desc_plus(b0, kk * 16 * 128), kk > 0);
    wgmma_commit();
    const uint64_t o0_n = fresh<true>(sw128_desc(smem_u32(&sm.d_o[st][2 * w][0][0]), kBr * 128, 1024));
    const uint64_t q0_n = fresh<true>(sw128_desc(smem_u32(&sm.q[st][2 * w][0][0]), kBr * 128, 1024));
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) mma_rs_bt<kHalf, T>(acc_dv, pa[kk], desc_plus(o0_n, kk * 16 * 128), 1);
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) mma_rs_bt<kHalf, T>(acc_dk, dsa[kk], desc_plus(q0_n, kk * 16 * 128), 1);
    wgmma_commit();

    // The step's dQ into the scratch, in the accumulator order the convert kernel reads (dq_place).
    const int64_t block = int64_t(walk.head(t)) * sc.blocks + first + walk.block(t);
    float4* accum = reinterpret_cast<float4*>(sc.dq_accum + block * S::kDqFloats);
    const int c = w * 128 + threadIdx.x % 128;
    // Deterministic: consumer w of this K/V block adds its columns of Q block i after the K/V blocks that
    // precede it in bwd_dq_writer.cuh's order (a semaphore a consumer: the two add disjoint columns). Its
    // turn keeper (bwd_dq_writer.cuh keep_dq_turns) waits for the turn and raises the count after; the
    // warpgroup only meets it, before the first atomics and (without waiting) after the last.
    if constexpr (kDeterministic) named_sync(kDqTurn + w, kTurnThreads);
    const auto add_dq = [&](int half) {
#pragma unroll
      for (int jj = 0; jj < kHalf / 16; ++jj)
        atomicAdd(accum + dq_float4(half * (kHalf / 16) + jj, c),
                  make_float4(acc_dq[jj][0], acc_dq[jj][1], acc_dq[jj][2], acc_dq[jj][3]));
    };
    wgmma_wait<1>();
    fence_regs(acc_dq);
    add_dq(0);
    wgmma_fence();
    const uint64_t b1 = fresh<true>(sw128_desc(smem_u32(&sm.k[2 * w + 1][0][0]), kBc * 128, 1024));
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk)
      mma_ss_tt<kHalf / 2, T>(acc_dq, desc_plus(a0, kk * 16 * 128), desc_plus(b1, kk * 16 * 128), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(acc_dv);
    fence_regs(acc_dk);
    fence_regs(acc_dq);
    if (t + S::kStages < walk.steps) named_arrive(kStageEmpty + st, kStageThreads);  // done with Q, dO, LSE2, D
    add_dq(1);
    if constexpr (kDeterministic) named_arrive(kDqAdded + w, kTurnThreads);  // the keeper releases the turn
  }

  // Epilogue: dK[:, c_w] (times the scale prob_grad left out) and dV[:, c_w], zero for keys no query row
  // sees, through shared memory as bwd_consumer.cuh's (bwd_tile.cuh store_rows; the Q or dO stage the last
  // step did not use: both consumers are past the last step's kTraded, so past every GEMM of the step
  // before it).
  T* dk = static_cast<T*>(p.dk) + seq.k_base + int64_t(g) * p.k_head_stride;
  T* dv = static_cast<T*>(p.dv) + seq.v_base + int64_t(g) * p.v_head_stride;
  const int free_stage = walk.steps % S::kStages;
  unsigned char* tile = reinterpret_cast<unsigned char*>(w == 0 ? &sm.q[free_stage][0][0][0] : &sm.d_o[free_stage][0][0][0]);
  static_assert(kBc * kHalf * sizeof(T) <= sizeof(sm.q[0]), "a consumer's dK or dV fits in a stage of Q");
  store_rows<kHalf, T>(acc_dk, p.scale, dk, p.k_row_stride, tile, key0, w * kHalf, seq, p.head_dim, kEpilogue + w);
  store_rows<kHalf, T>(acc_dv, 1.f, dv, p.v_row_stride, tile, key0, w * kHalf, seq, p.head_dim, kEpilogue + w);
}

}  // namespace flashlab::gpu::fa3
