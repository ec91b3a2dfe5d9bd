// fa2: FlashAttention-2 forward on tensor cores.
//
// One CTA per (Q block of Br rows, head, batch); 4 warps, each owning 16 kMT
// query rows (Br = 128, kMT = 2 for head_dim <= 128). K_j and V_j stream through
// shared memory (cp.async, two stages; Bc = 128 keys at head_dim 64, 64 at 128),
// swizzled so that ldmatrix reads are conflict-free. The building blocks
// (swizzle, cp.async, ldmatrix, mma.sync, fragment packing) are in mma.cuh.
// Head dim 256 runs fa2_fwd_pairs.cu, where two warps share 32 rows and split
// the head dim (v8); this file's d = 256 shape is v7's, kept for A/B runs.
//   S_ij = Q_i K_j^T       mma.sync m16n8k16, fp32 accumulate (Q via ldmatrix, K via ldmatrix)
//   m, l, P~               online softmax on the accumulator fragments, exp2 with
//                          scale * log2(e) folded in; rows reduced across the 4 lanes of a quad
//   O_i += P~ V_j          P~ repacked in registers as the A operand (bf16/fp16), V via ldmatrix.trans
//   O_i / l_i, LSE_i       once, after the last K/V block (deferred normalization)
// Tiles wholly outside the causal / sliding-window mask are never visited; the
// partial ones are masked element by element.
//
// Version index (time with bench/gpu_compare.py on the GPU machine; numbers in bench/results/):
//   v1  Br = Bc = 64, 4 warps, 2-stage cp.async for K/V, XOR-swizzled smem, Q re-read per tile
//       via ldmatrix; head_dim 64/128/256; causal, window, softcap, GQA, varlen, LSE.
//       NVIDIA H200, bf16, 16k tokens, hidden 2048, forward (bench/results/gpu-fwd-h200-2026-11-22-fa2v1.csv):
//       d=64 s=4k 154 TFLOP/s vs SDPA flash 301 (0.51x), cuDNN 451; d=128 s=4k 159 vs 355 (0.45x);
//       d=256 s=4k 204 vs 319 (0.64x); causal d=128 s=16k 152 vs 323 (0.47x).
//   v2  two MMA row tiles per warp (Br = 128) for d <= 128, and the mask applied only to tiles that
//       cross its edge. Same GPU and sweep (bench/results/gpu-fwd-h200-2026-11-22-fa2v2.csv): d=64 s=4k
//       101 TFLOP/s (0.33x flash), d=128 159 (0.46x): slower at d=64 (255 registers, half the CTAs per
//       SM), no gain at d=128. Kept: the edge-only mask. Reverted: kMT = 1 (v3).
//   v3  v1's shapes with v2's edge-only mask (bench/results/gpu-fwd-h200-2026-11-22-fa2v3.csv, same sweep):
//       d=64 s=4k 138 TFLOP/s vs flash 303 (0.46x; v1 measured 154), d=128 152 vs 350 (0.43x),
//       d=256 203 vs 322 (0.63x), causal d=128 s=16k 146 vs 325 (0.45x); cuDNN 459-672 in the same run.
//   v4  softcap a template parameter and the mask test hoisted out of the element loops: per-element
//       uniform branches had split the softmax into basic blocks the compiler could not schedule
//       (PTX showed two branches an element). ex2.approx.ftz; the scale folded into one FMA with the
//       max. Same sweep at s=4k (bench/results/gpu-fwd-h200-2026-11-22-fa2v4-shape0.csv): d=64 215
//       TFLOP/s (0.70x flash), d=128 220 (0.64x); kMT = 2 (shape1.csv) 267 (0.87x) and 276 (0.80x).
//       ncu (d=128, v4 shapes): 1088 instructions per warp per K/V block for 128 MMAs, most of them
//       the tile loads' address arithmetic (a division and a 64-bit multiply per 16-byte copy).
//   v5  tile loads with one fixed chunk per thread and constant address steps (mma.cuh load_tile);
//       kMT = 2 (Br = 128) for d <= 128, now that registers allow it. Full sweep, fwd and fwd+bwd
//       (bench/results/gpu-h200-2026-11-22-fa2v5.md): d=64 1.00-1.05x SDPA flash (s >= 1024),
//       d=128 0.93-1.01x, d=256 0.88-0.93x; e.g. d=128 s=16k 349 TFLOP/s vs flash 349, cuDNN 606.
//       Tried and not kept (FLASHLAB_FA2_FWD_SHAPE, same GPU): 8 warps of 16 rows (0.66-0.88x), Q in
//       registers (0.56-0.74x), and for d=256 two K/V stages (0.70x), Bc = 32 (0.83-0.86x), 8 warps
//       (0.84x), FA2's split K/V waits in the one-stage pipeline (no change beyond noise), and 8 warps
//       with two stages (shape 5: 0.97x at s=16k non-causal, but 0.82-0.88x causal and at s=1k).
//       With any head_dim that is a multiple of 8 zero-padded to 64/128/256 (column predicates in the
//       loads and stores), the next full sweep (bench/results/gpu-h200-2026-11-22-fa2v6.md) gave d=64
//       0.99-1.03x, d=128 0.96-0.99x, d=256 0.88-0.94x: the ratios move by 2-3% between runs.
//   v6  ldmatrix addresses with the swizzle's XOR split so that it only mixes constants with the lane's
//       bits (swizzle_at, since v7 mma.cuh Ldsm): each address is a register plus a constant after unrolling. A/B in
//       one process on an NVIDIA H100 (bench/ab_libs.py, results/ab-h100-2026-11-22-swizzle-split.csv):
//       d=256 +1-4%, d=64/128 within the +-3% noise. Full sweep on the H100, fwd and fwd+bwd
//       (bench/results/gpu-h100-2026-11-22-fa2v7.md): d=64 1.00-1.05x SDPA flash (s >= 1024), d=128
//       0.97-1.02x, d=256 0.91-0.99x; e.g. d=128 s=16k 352 TFLOP/s vs flash 355, cuDNN 635.
//       Tried and not kept (same GPU): Q in registers at d=256 (FLASHLAB_FA2_FWD_SHAPE=6, since removed:
//       124 bytes of spills, 0.79-0.84x against 0.87-0.91x), a predicate-free branch for tiles wholly in range in
//       load_tile (0.94-0.99x of without: results/ab-h100-2026-11-22-inrange-fastpaths.csv), and the
//       heaviest causal Q blocks launched first (no change beyond noise: ...-fwd-reverse-order.csv).
//   v7  Fewer instructions a K/V block, found by setting ncu's SASS-level counts (source view) beside SDPA
//       flash's kernel (bench/ncu_kernels.py, d=256 s=4k: 615M instructions against flash's 488M):
//       - load_tile compares the pass index with one per-thread limit and no longer swaps a zero-filled
//         copy's address for a safe one (two selects and predicate juggling a 16-byte copy): d=256 +4%,
//         547M instructions (results/ab-h100-2026-11-22-instruction-diet.csv);
//       - ldmatrix with compile-time offsets (mma.cuh Ldsm, unroll): the compiler had hoisted every
//         load's offset into a register of its own (144 at d=256) and, short of registers, recomputed
//         them each block; now an operand has four. d=128 +4-9%, d=256 +0-3%; 482M instructions
//         (...-fwd-ldsm-immediates.csv);
//       - at d=256, O leaves through the warp's rows of shared memory as 16-byte row chunks: +1-5%;
//         d<=128 keep the fragment stores, 0-2% faster there (...-fwd-smem-epilogue.csv).
//       Full sweep on the H100 (bench/results/gpu-h100-2026-11-22-fa2v8.md), s >= 1024: d=64
//       0.99-1.12x SDPA flash, d=128 1.02-1.08x, d=256 0.97-1.06x; 19 of 30 cells reach 1.0x, the
//       others are 0.97-0.997x (d=256 below 16k, d=64 at 1k non-causal and 2k causal). E.g. d=128
//       s=16k 376 TFLOP/s vs flash 352, cuDNN 618.
//       Tried and not kept: the shared-window address as unsigned 32-bit arithmetic alone (d=256 3-5%
//       slower: ...-ldmatrix-u32-address.csv); FA2's split K/V waits at d=256 (V_j loading during
//       S = Q K_j^T, K_j+1 during P V_j: +1-4% at s=1k, -3% at s=4k: ...-bwd-ldsm-and-fwd-split-waits.csv);
//       the first block's V in a cp.async group of its own (with the shared-memory epilogue 4-8% slower
//       everywhere: ...-fwd-first-v-group-and-smem-epilogue.csv); at d=256, shapes 4 and 5 again (8
//       warps, Br=128; one stage 0.82-0.94x, two stages 0.93-1.03x against the default's 0.98-1.06x in
//       the sweep); O rescaled only when a row of the warp found a new maximum (a vote and a branch
//       a block): 3-6% slower, except d=128 at s >= 4k (+1-3%) (...-fwd-conditional-rescale.csv).
//   v8  Less shared-memory traffic a MMA where it was the limit. ncu at d=256 s=4k put this kernel's
//       shared-memory pipe 74% busy (SDPA flash's 77%: the same 4 warps of 16 rows) and its tensor pipe
//       50%; the H100's ldmatrix rate, measured (simulator/validation/microbench-h100-2026-11-22.json:
//       130 B a clock an SM, mma.sync 2496 FLOP), makes a 16-row warp's K/V fragments cost more clocks
//       than its MMAs at d=256. So:
//       - d=256 moves to fa2_fwd_pairs.cu: a pair of warps shares 32 rows, each warp computes S for
//         half the keys and accumulates O for half the head dim, P~ crosses through shared memory, and
//         FA2's split K/V waits ride on the two barriers the exchange needs. 104 ldmatrix.x4 a warp
//         and K/V block instead of 144; A/B against v7 in one process +0-6% (one cell -2%), 1.01-1.06x
//         SDPA flash (results/ab-h100-2026-11-22-fwd-d256-pairs-split-waits.csv; the version index
//         there has the steps, including the variant without split waits, which gained nothing);
//       - d=64 takes K/V blocks of 128 keys (FLASHLAB_FA2_FWD_SHAPE=4; 255 registers, no spills, 80
//         KiB): half the blocks, barriers and row-max shuffles for the same MMAs, +2-8% in one
//         process (...-fwd-d64-bc128.csv). d=128 stays at 64 keys (128 would need 160 KiB, one CTA).
//       Full sweeps on the H100 (bench/results/gpu-h100-2026-11-22-fa2v9.md, and -fa2v9-run2.csv),
//       s >= 1024: d=64 1.04-1.09x SDPA flash, d=128 1.01-1.08x, d=256 1.00-1.08x in both runs, so
//       every cell of the forward reaches 1.0x; e.g. d=256 s=16k 336 TFLOP/s vs flash 332, cuDNN 669;
//       d=64 s=16k 339 vs 313.
//       Review: the steps both forward kernels share (softcap, edge mask, row max, exp2 and sums, O's
//       rescaling, LSE) moved to softmax.cuh, the K/V block range to sequence.cuh's key_blocks: the PTX
//       is the same but for commuted FMA operands and a prologue's fused parameter loads; on the H100
//       harness 1185/1185, memcheck/racecheck clean on 4 problems, v8 against v7 +4-9%, 1.01-1.08x
//       flash at d=64/256 (ab-h100-2026-11-22-fwd-v8-review-shared-softmax.csv).
//       Second review: S = Q K^T through mma.cuh's mma_acc (also the pairs kernel's and the backward's
//       dQ loop), P~ packed by c_to_a, and the Q-in-registers experiment (shape 6) removed; every
//       remaining kernel's PTX is unchanged (register names aside). Not kept: the two forward kernels'
//       per-head pointers from one shared helper, which changed their prologues' PTX; on the H100 its
//       outputs were bit-identical and the harness passed, but d=256 s=1k timed 0.96-0.97x of the kept
//       code in one process (...-review-head-tensors.csv), so the pointer lines stay written twice.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "cuda_check.hpp"
#include "kernels.hpp"
#include "mma.cuh"
#include "sequence.cuh"
#include "shapes.hpp"
#include "softmax.cuh"

namespace flashlab::gpu {
namespace {

using namespace mma;

// A kernel's tile shape. D: head dim; kWarps: warps per CTA; kMT: 16-row MMA tiles per warp (a K/V
// fragment read from shared memory feeds kMT MMAs); kBc: keys per K/V block; kStages: K/V buffers in
// shared memory.
template <int D_, int kWarps_, int kMT_, int kBc_, int kStages_>
struct Shape {
  static constexpr int D = D_, kWarps = kWarps_, kMT = kMT_, kBc = kBc_, kStages = kStages_;
  static constexpr int kThreads = 32 * kWarps, kBr = 16 * kMT * kWarps;
  static constexpr int smem_elems() { return (kBr + 2 * kStages * kBc) * D; }
};

// ---- the kernel
template <class S, typename T, bool kSoftcap>
__global__ void __launch_bounds__(S::kThreads) fa2_forward_kernel(const AttentionParams p) {
  constexpr int D = S::D, kMT = S::kMT, kBc = S::kBc, kStages = S::kStages, kBr = S::kBr;
  constexpr int kThreads = S::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // (Br, D)
  T* sK = sQ + kBr * D;                     // (stages, Bc, D)
  T* sV = sK + kStages * kBc * D;           // (stages, Bc, D)

  const int i_block = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int g = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int qrow = lane / 4, qcol = (lane % 4) * 2;  // this thread's row in an 8-row group, first column of its pair

  const Sequence seq = sequence_of(p, b);
  const int sq = seq.sq, sk = seq.sk;
  const int row0 = i_block * kBr;
  if (row0 >= sq) return;
  const T* q = static_cast<const T*>(p.q) + seq.q_base + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + seq.k_base + g * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + seq.v_base + g * p.v_head_stride;
  T* o = static_cast<T*>(p.o) + seq.o_base + h * p.o_head_stride;
  float* lse = p.lse + seq.row_array(h, b, p);

  // The K/V blocks this Q block sees, and where they need no mask.
  const auto blocks = key_blocks<kBr, kBc>(row0, sq, sk, p.window_left, p.window_right);
  const int j_begin = blocks.begin, j_end = blocks.end;

  // Accumulators: O (16 kMT rows x D per warp) and the running max / sum of the thread's rows.
  float acc_o[kMT][D / 8][4];
  float row_max[kMT][2], row_sum[kMT][2];
  int lo[kMT][2], hi[kMT][2];  // the columns each of this thread's rows sees
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    zero(acc_o[mt]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mt][r] = -INFINITY;
      row_sum[mt][r] = 0.f;
      const int row = row0 + (warp * kMT + mt) * 16 + qrow + 8 * r;
      lo[mt][r] = col_begin(row, sq, sk, p.window_left);
      hi[mt][r] = col_end(row, sq, sk, p.window_right);
    }
  }
  const float c = kSoftcap ? kLog2e : p.scale * kLog2e;  // scores -> log2 units
  // ldmatrix addresses: four lane offsets an operand, and compile-time offsets for the blocks.
  const Ldsm<D, Frag::A> ldsm_q(lane);
  const Ldsm<D, Frag::B> ldsm_k(lane);
  const Ldsm<D, Frag::BTrans> ldsm_v(lane);
  const uint32_t q_warp = smem_addr(sQ) + 2u * uint32_t(warp * kMT * 16 * D);  // this warp's rows of Q

  if (j_begin < j_end) {
    load_tile<D, kThreads, kBr>(sQ, q, p.q_row_stride, row0, sq, p.head_dim);
    load_tile<D, kThreads, kBc>(sK, k, p.k_row_stride, j_begin * kBc, sk, p.head_dim);
    load_tile<D, kThreads, kBc>(sV, v, p.v_row_stride, j_begin * kBc, sk, p.head_dim);
    cp_async_commit();
  }

  for (int j = j_begin; j < j_end; ++j) {
    const int stage = kStages == 2 ? (j - j_begin) & 1 : 0;
    cp_async_wait<0>();
    __syncthreads();  // tile j is in shared memory for every warp; every warp is done with tile j - 1
    if (kStages == 2 && j + 1 < j_end) {  // prefetch tile j + 1 into the other stage while computing j
      load_tile<D, kThreads, kBc>(sK + (stage ^ 1) * kBc * D, k, p.k_row_stride, (j + 1) * kBc, sk, p.head_dim);
      load_tile<D, kThreads, kBc>(sV + (stage ^ 1) * kBc * D, v, p.v_row_stride, (j + 1) * kBc, sk, p.head_dim);
      cp_async_commit();
    }
    const uint32_t k_tile = smem_addr(sK + stage * kBc * D), v_tile = smem_addr(sV + stage * kBc * D);

    // S = Q_i K_j^T for this warp's rows: kMT x kBc / 8 accumulator tiles of 16 x 8.
    float acc_s[kMT][kBc / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) zero(acc_s[mt]);
    mma_acc<T, D / 16>(acc_s, ldsm_q, q_warp, ldsm_k, k_tile);  // each K fragment feeds kMT MMAs

    // Softcap if on (scores then in natural units); the mask only on tiles that cross its edge. Both
    // branches are uniform and outside the element loops, so the loops stay straight-line code.
    if constexpr (kSoftcap) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) softmax::softcap(acc_s[mt], p.softcap, p.scale / p.softcap);
    }
    if (blocks.needs_mask(j)) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) softmax::mask(acc_s[mt], j * kBc, qcol, lo[mt], hi[mt]);
    }

    // Online softmax on unscaled scores s (max taken before scaling; the scale folds into one FMA):
    //   m_new = max(m, rowmax s), alpha = exp2((m - m_new) c), P~ = exp2(s c - m_new c), l = alpha l + rowsum P~
    // with c = scale * log2(e) (log2(e) under softcap).
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m = softmax::row_max(acc_s[mt], r, row_max[mt][r]);
        const float m_c = softmax::scaled_max(m, c);
        alpha[r] = exp2_fast(row_max[mt][r] * c - m_c);
        row_max[mt][r] = m;
        // quad-reduced once, at the end
        row_sum[mt][r] = row_sum[mt][r] * alpha[r] + softmax::exp2_row(acc_s[mt], r, c, m_c);
      }
      softmax::rescale(acc_o[mt], alpha);
    }

    // O += P~ V_j: the S accumulators of two adjacent 8-key tiles form one 16-key A operand.
    unroll<kBc / 16>([&](auto kk_) {
      constexpr int kk = decltype(kk_)::value;
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        c_to_a<T>(a[mt], acc_s[mt][2 * kk], acc_s[mt][2 * kk + 1]);
      }
      unroll<D / 16>([&](auto n_) {
        constexpr int n = decltype(n_)::value;
        uint32_t bv[4];
        ldsm_v.template block<n, kk>(bv, v_tile);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) mma_16x16<T>(acc_o[mt], n, a[mt], bv);
      });
    });
    if (kStages == 1) __syncthreads();  // single stage: everyone done before the next load overwrites
    if (kStages == 1 && j + 1 < j_end) {
      load_tile<D, kThreads, kBc>(sK, k, p.k_row_stride, (j + 1) * kBc, sk, p.head_dim);
      load_tile<D, kThreads, kBc>(sV, v, p.v_row_stride, (j + 1) * kBc, sk, p.head_dim);
      cp_async_commit();
    }
  }

  // O_i = diag(l_i)^-1 O_i; LSE_i = m_i ln 2 + ln(l_i) (m was kept in log2 units). At d = 256 O goes out
  // through the warp's own rows of sQ, which no other warp reads, so that the global stores are whole
  // 16-byte chunks of rows instead of 64 fragment stores a thread of 8 rows x 16 bytes a warp: +1-5%
  // (bench/results/ab-h100-2026-11-22-fwd-smem-epilogue.csv); at d <= 128 it measured 0-2% slower.
  constexpr bool kViaSmem = D == 256;
  if constexpr (kViaSmem) __syncwarp();  // every lane's last ldmatrix of its Q rows is done
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = softmax::quad_sum(row_sum[mt][r]);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int tile_row = (warp * kMT + mt) * 16 + qrow + 8 * r, row = row0 + tile_row;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const uint32_t packed = pack2<T>(acc_o[mt][n][2 * r] * inv, acc_o[mt][n][2 * r + 1] * inv);
        if constexpr (kViaSmem) {
          *reinterpret_cast<uint32_t*>(sQ + swizzled<D>(tile_row, n * 8 + qcol)) = packed;
        } else if (row < sq) {
          if (n * 8 >= p.head_dim) break;  // a padded head_dim's zero columns
          *reinterpret_cast<uint32_t*>(o + int64_t(row) * p.o_row_stride + n * 8 + qcol) = packed;
        }
      }
      if (row < sq && lane % 4 == 0) lse[row] = softmax::lse(row_max[mt][r], c, l);
    }
  if constexpr (kViaSmem) {
    __syncwarp();
    constexpr int kChunks = D / 8, kWarpRows = 16 * kMT;
    static_assert(kWarpRows * kChunks % 32 == 0, "a warp's rows of O split evenly over its lanes");
#pragma unroll
    for (int i = 0; i < kWarpRows * kChunks / 32; ++i) {
      const int idx = i * 32 + lane;
      const int tile_row = warp * kWarpRows + idx / kChunks, chunk = idx % kChunks, row = row0 + tile_row;
      if (row < sq && chunk * 8 < p.head_dim)  // rows past sq; a padded head_dim's zero columns
        *reinterpret_cast<uint4*>(o + int64_t(row) * p.o_row_stride + chunk * 8) =
            *reinterpret_cast<const uint4*>(sQ + swizzle<D>(tile_row, chunk));
    }
  }
}

// The tile shape of each compiled head dim is shapes.hpp's fa2_forward_shape (the reason for each is
// there); d = 256 runs fa2_fwd_pairs.cu, which checks that function's shape for it the same way.
template <int D>
struct DefaultOf {
  static constexpr TileShape s = fa2_forward_shape(D);
  using type = Shape<D, s.warps, s.mma_tiles, s.block_n, s.stages>;
  static_assert(s.head_dim == D && !s.warp_pairs, "fa2_forward_shape(D) must be a shape of this file's kernel");
  static_assert(type::kBr == s.block_m && type::kThreads == s.threads &&
                    type::smem_elems() * 2 == s.smem_bytes,
                "Shape<> and shapes.hpp must agree on Br, the threads and the shared memory");
};
template <int D>
using Default = typename DefaultOf<D>::type;

template <class S, typename T>
void launch(const AttentionParams& p, cudaStream_t stream) {
  constexpr size_t smem = size_t(S::smem_elems()) * sizeof(T);
  auto kernel = p.softcap > 0.f ? fa2_forward_kernel<S, T, true> : fa2_forward_kernel<S, T, false>;
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid((p.seqlen_q + S::kBr - 1) / S::kBr, p.heads_q, p.batch);
  kernel<<<grid, S::kThreads, smem, stream>>>(p);
  FLASHLAB_CUDA_LAUNCHED();
}

#if defined(FLASHLAB_SHAPE_EXPERIMENTS)
// Experimental shapes for bf16, picked with FLASHLAB_FA2_FWD_SHAPE=N: a development knob for timing
// them side by side in one process (unset or 0: Default). Compiled only with
// -DFLASHLAB_SHAPE_EXPERIMENTS=ON (gpu/README.md).
template <int D>
bool launch_experiment(const AttentionParams& p, cudaStream_t stream) {
  static const int which = [] {
    const char* e = std::getenv("FLASHLAB_FA2_FWD_SHAPE");
    return e ? std::atoi(e) : 0;
  }();
  using T = __nv_bfloat16;
  if constexpr (D <= 128) {
    switch (which) {
      case 1: launch<Shape<D, 4, 1, 64, 2>, T>(p, stream); return true;  // v3: Br = 64
      case 2: launch<Shape<D, 8, 1, 64, 2>, T>(p, stream); return true;  // Br = 128, eight warps
      case 3: launch<Shape<D, 4, 2, 32, 2>, T>(p, stream); return true;  // Bc = 32
      case 4: launch<Shape<D, 4, 2, 128, 2>, T>(p, stream); return true;  // Bc = 128 (v8's d = 64)
      case 5: launch<Shape<D, 4, 2, 64, 2>, T>(p, stream); return true;   // Bc = 64 (v7's d = 64)
    }
  } else {
    switch (which) {
      case 1: launch<Shape<D, 4, 1, 64, 2>, T>(p, stream); return true;  // two K/V stages (160 KiB)
      case 2: launch<Shape<D, 4, 1, 32, 2>, T>(p, stream); return true;  // Bc = 32, two stages
      case 3: launch<Shape<D, 4, 1, 32, 1>, T>(p, stream); return true;  // Bc = 32, one stage
      case 4: launch<Shape<D, 8, 1, 64, 1>, T>(p, stream); return true;  // Br = 128, eight warps
      case 5: launch<Shape<D, 8, 1, 64, 2>, T>(p, stream); return true;  // ... two stages (192 KiB)
      case 7: launch<Shape<D, 4, 1, 64, 1>, T>(p, stream); return true;  // v7: 16 rows a warp
    }
  }
  return false;
}
#endif

template <typename T>
void dispatch_dim(const AttentionParams& p, cudaStream_t stream) {
#if defined(FLASHLAB_SHAPE_EXPERIMENTS)
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (p.head_dim == 64 && launch_experiment<64>(p, stream)) return;
    if (p.head_dim == 128 && launch_experiment<128>(p, stream)) return;
    if (p.head_dim == 256 && launch_experiment<256>(p, stream)) return;
  }
#endif
  switch (fa2_padded_head_dim(p.head_dim)) {
    case 64: return launch<Default<64>, T>(p, stream);
    case 128: return launch<Default<128>, T>(p, stream);
    case 256: return fa2_forward_pairs_d256(p, stream);
  }
  throw Error("fa2 forward: head_dim " + std::to_string(p.head_dim) + " is not supported");
}

}  // namespace

bool fa2_forward_supports(const AttentionParams& p) {
  return fa2_padded_head_dim(p.head_dim) != 0 && p.dtype != Dtype::fp32;
}

void fa2_forward(const AttentionParams& p, cudaStream_t stream) {
  if (!fa2_forward_supports(p))
    throw Error("fa2 forward supports bf16/fp16 with a head_dim that is a multiple of 8 up to 256");
  if (p.dtype == Dtype::bf16) dispatch_dim<__nv_bfloat16>(p, stream);
  else dispatch_dim<__half>(p, stream);
}

}  // namespace flashlab::gpu
