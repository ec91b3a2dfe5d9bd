// fa3 backward's consumers: two warpgroups of 64 keys each of the CTA's K/V block run the five GEMMs of
// every step with wgmma, the probabilities and their gradients in registers, and hold dK and dV to the end.
//
// A step (Q block i of kBr rows, query head h), for consumer w and its keys K_w, V_w:
//   S^T = K_w Q_i^T, dP^T = V_w dO_i^T       wgmma, both operands K-major from shared memory (64 x kBr)
//   P^T = exp2(S^T scale log2e - LSE2), dS^T = P^T o (dP^T - D)   in registers (prob_grad.cuh; the
//                                          columns are query rows, their LSE2 and D read from the stage)
//   dV_w += P^T dO_i, dK_w += dS^T Q_i     wgmma, P^T and dS^T from registers (the accumulators are
//                                          the A operand's layout), dO_i and Q_i read N-major
//   dS^T -> shared memory                  in the 128-byte swizzle, keys as rows
//   dQ_i = dS K_j                          wgmma, dS^T and K both read MN-major, after both consumers'
//                                          dS^T are in (named barrier kDsFull), by consumer t % 2 alone:
//                                          the consumers take turns (issue_and_hand_dq)
//   dQ -> shared memory -> the dQ writer   (bwd_dq_writer.cuh)
#pragma once
#include "../mma.cuh"
#include "../prob_grad.cuh"
#include "bwd_dq_writer.cuh"
#include "bwd_tile.cuh"
#include "wgmma_ops.cuh"

namespace flashlab::gpu::fa3 {

// The step's dQ = dS K (A = dS, B = K, both read MN-major over the block's 128 keys) by one consumer, into
// shared memory in the scratch's order (dq_float4: two shares of 128 threads, the 64-row halves of the
// 128 x 64 block at d = 64, the 64-column halves of the 64 x 128 one at d = 128), for the dQ writer.
template <class S, typename T>
__device__ void issue_and_hand_dq(BwdSmem<S, T>& sm, int t) {
  constexpr int D = S::D, kBc = S::kBc;
  float acc_dq[2][8][4];
  wgmma_fence();
  const uint64_t b0 = fresh<true>(sw128_desc(smem_u32(&sm.k[0][0][0]), kBc * 128, 1024));
  if constexpr (S::kDqByRows) {  // d = 64: two m64n64 blocks a k-step, one a 64-query block of dS^T
    const uint64_t a0 = fresh<true>(sw128_desc(smem_u32(&sm.ds[t & 1][0][0][0]), kBc * 128, 1024));
    const uint64_t a1 = fresh<true>(sw128_desc(smem_u32(&sm.ds[t & 1][1][0][0]), kBc * 128, 1024));
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      mma_ss_tt<64, T>(acc_dq[0], desc_plus(a0, kk * 16 * 128), desc_plus(b0, kk * 16 * 128), kk > 0);
      mma_ss_tt<64, T>(acc_dq[1], desc_plus(a1, kk * 16 * 128), desc_plus(b0, kk * 16 * 128), kk > 0);
    }
  } else {  // d = 128: one m64n128 block a k-step, its accumulator blocks 0-7 and 8-15 the two shares
    const uint64_t a0 = fresh<true>(sw128_desc(smem_u32(&sm.ds[t & 1][0][0][0]), kBc * 128, 1024));
    auto& acc = reinterpret_cast<float(&)[D / 8][4]>(acc_dq);
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk)
      mma_ss_tt<D, T>(acc, desc_plus(a0, kk * 16 * 128), desc_plus(b0, kk * 16 * 128), kk > 0);
  }
  wgmma_commit();
  named_sync(kDqEmpty, kDqThreads);  // the writer has read the step before's out
  wgmma_wait<0>();
  const int c = threadIdx.x % 128;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    fence_regs(acc_dq[h]);
#pragma unroll
    for (int jj = 0; jj < 8; ++jj)
      reinterpret_cast<float4*>(sm.dq)[dq_float4(jj, h * 128 + c)] =
          make_float4(acc_dq[h][jj][0], acc_dq[h][jj][1], acc_dq[h][jj][2], acc_dq[h][jj][3]);
  }
  fence_async_shared();
  named_arrive(kDqFull, kDqThreads);
}

template <class S, typename T, bool kSoftcap, bool kMask>
__device__ void consume_bwd(BwdSmem<S, T>& sm, const BackwardParams& p, const Sequence& seq,
                            const BwdWalk<S::kBr, S::kBc>& walk, const RowMask& rm, int j, int g, int w) {
  constexpr int D = S::D, kBr = S::kBr, kBc = S::kBc;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, gr = lane / 4, tc = (lane % 4) * 2;
  const int key0 = j * kBc;
  // This thread's two keys (rows of S^T), local to the CTA's block: accumulator halves r = 0, 1.
  const int my_key = w * 64 + warp * 16 + gr;

  float acc_dv[D / 8][4], acc_dk[D / 8][4];
  mma::zero(acc_dv);
  mma::zero(acc_dk);

  if (walk.steps > 0) mbar_wait(&sm.kv_full, 0);
  for (int t = 0; t < walk.steps; ++t) {
    const int st = t % S::kStages, row0 = walk.block(t) * kBr;
    mbar_wait(&sm.full[st], (t / S::kStages) & 1);

    // S^T and dP^T: D / 16 steps of 16 along the head dim, A = this consumer's 64 keys, B = the Q block.
    // (With softcap, S and dP both held, ptxas spills 24-43 instructions in the loop.)
    float acc_s[kBr / 8][4], acc_dp[kBr / 8][4];
    wgmma_fence();
    mma_over_head_dim<kBr, D, T>(acc_s, smem_u32(&sm.k[0][w * 64][0]), sizeof(sm.k[0]), smem_u32(&sm.q[st][0][0][0]),
                                 sizeof(sm.q[0][0]));
    wgmma_commit();  // S^T's group
    mma_over_head_dim<kBr, D, T>(acc_dp, smem_u32(&sm.v[0][w * 64][0]), sizeof(sm.v[0]),
                                 smem_u32(&sm.d_o[st][0][0][0]), sizeof(sm.d_o[0][0]));
    wgmma_commit();  // dP^T's
    const TileVerdicts<kBr> verdicts = mask_verdicts<kBr, kBc, kMask>(seq, rm, key0, my_key, row0, tc);

    // P^T and dS^T in place; element (n, e): key my_key + 8 (e / 2), query row row0 + 8 n + tc + (e & 1).
    // At d = 64 (kBr = 128) P^T's exponentials run while dP^T's GEMM does (+1.5-4.9% forward+backward;
    // at d = 128 -3% to +3%, not kept there: bench/results/ab-h100-2026-11-23-fa3-bwd-split-wait.csv);
    // softcap's derivative needs both.
    if constexpr (!kSoftcap && kBr == 128) {
      wgmma_wait<1>();
      fence_regs(acc_s);
#pragma unroll
      for (int n = 0; n < kBr / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[n][e] = probability(acc_s[n][e], sm.lse2[st][n * 8 + tc + (e & 1)], p);
      wgmma_wait<0>();
      fence_regs(acc_dp);
#pragma unroll
      for (int n = 0; n < kBr / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_dp[n][e] = acc_s[n][e] * (acc_dp[n][e] - sm.dsum[st][n * 8 + tc + (e & 1)]);
    } else {
      wgmma_wait<0>();
      fence_regs(acc_s);
      fence_regs(acc_dp);
      prob_grads<kSoftcap, kBr>(acc_s, acc_dp, sm.lse2[st], sm.dsum[st], tc, p);
    }
    mask_tile<kBr, kBc, kMask>(acc_s, acc_dp, p, seq, verdicts, key0, my_key, row0, tc);

    // P^T and dS^T as A operands (16 query rows a k-step), dS^T into shared memory.
    uint32_t pa[kBr / 16][4], dsa[kBr / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      mma::c_to_a<T>(pa[kk], acc_s[2 * kk], acc_s[2 * kk + 1]);
      mma::c_to_a<T>(dsa[kk], acc_dp[2 * kk], acc_dp[2 * kk + 1]);
    }
    {
      // Row `key` of dS^T, query columns 8 n + tc, + 1: 16-byte unit n % 8 of 64-query block n / 8, swizzled
      // by the row (the copy engine's 128-byte pattern, which the dQ wgmma reads).
      unsigned char* base = reinterpret_cast<unsigned char*>(&sm.ds[t & 1][0][0][0]);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int key = my_key + 8 * r;
#pragma unroll
        for (int n = 0; n < kBr / 8; ++n) {
          const int at = ((n / 8) * kBc + key) * 128 + (((n % 8) ^ (key % 8)) * 16) + tc * 2;
          *reinterpret_cast<uint32_t*>(base + at) = dsa[n / 2][2 * (n % 2) + r];  // c_to_a's packing
        }
      }
      fence_async_shared();  // visible to the wgmma (the async proxy) once both consumers meet at kDsFull
    }

    // dV += P^T dO and dK += dS^T Q (P^T and dS^T from registers, kBr / 16 steps of 16 query rows, dO and
    // Q read N-major); then, once both consumers' dS^T are in (kDsFull), the step's whole dQ = dS K by
    // consumer t % 2 alone, while the other goes on to step t + 1 (v15): the two take turns, so that one's
    // softmax runs under the other's GEMMs. Before, each computed its half of every step's dQ after every
    // kDsFull, their softmaxes in step and the tensor cores idle through them; SDPA's cuDNN kernel takes
    // turns (its SASS at d = 128, gpu/HISTORY.md).
    wgmma_fence();
    const uint64_t o0_n = fresh<true>(sw128_desc(smem_u32(&sm.d_o[st][0][0][0]), kBr * 128, 1024));
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) mma_rs_bt<D, T>(acc_dv, pa[kk], desc_plus(o0_n, kk * 16 * 128), 1);
    const uint64_t q0_n = fresh<true>(sw128_desc(smem_u32(&sm.q[st][0][0][0]), kBr * 128, 1024));
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) mma_rs_bt<D, T>(acc_dk, dsa[kk], desc_plus(q0_n, kk * 16 * 128), 1);
    wgmma_commit();
    named_sync(kDsFull, 256);
    wgmma_wait<0>();
    fence_regs(acc_dv);
    fence_regs(acc_dk);
    if (t + S::kStages < walk.steps) named_arrive(kStageEmpty + st, kStageThreads);  // done with Q, dO, LSE2, D
    if (w == (t & 1)) issue_and_hand_dq<S, T>(sm, t);
  }

  // Epilogue: dK_j (times the scale prob_grad left out) and dV_j, zero for keys no query row sees, each
  // through shared memory (bwd_tile.cuh store_rows). The tile: the Q (consumer 0) or dO (consumer 1) stage
  // the last step did not use, free once this consumer has passed the last kDsFull (both consumers waited
  // out the GEMMs of the step before; the producer loads nothing more).
  T* dk = static_cast<T*>(p.dk) + seq.k_base + int64_t(g) * p.k_head_stride;
  T* dv = static_cast<T*>(p.dv) + seq.v_base + int64_t(g) * p.v_head_stride;
  const int free_stage = walk.steps % S::kStages;
  unsigned char* tile = reinterpret_cast<unsigned char*>(w == 0 ? &sm.q[free_stage][0][0][0] : &sm.d_o[free_stage][0][0][0]);
  static_assert(64 * D * sizeof(T) <= sizeof(sm.q[0]), "a consumer's dK or dV fits in a stage of Q");
  store_rows<D, T>(acc_dk, p.scale, dk, p.k_row_stride, tile, key0 + w * 64, 0, seq, p.head_dim, kEpilogue + w);
  store_rows<D, T>(acc_dv, 1.f, dv, p.v_row_stride, tile, key0 + w * 64, 0, seq, p.head_dim, kEpilogue + w);
}

}  // namespace flashlab::gpu::fa3
