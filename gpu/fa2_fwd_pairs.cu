// fa2 forward at head dim 256 (every multiple of 8 above 128, zero-padded): warp pairs split the head dim.
//
// Why a kernel of its own. At d = 256 a warp's O accumulator for 16 rows is already 128 registers, so
// fa2_fwd.cu's kernel (like SDPA flash's) could give a warp only 16 query rows, and then every K and V
// fragment read from shared memory fed one row tile's MMAs: an ldmatrix.x4 (512 bytes) per two m16n8k16.
// On an H100 (simulator/validation/microbench-h100-2026-11-22.json: shared memory 130 bytes a clock an
// SM, mma.sync 2496 FLOP) a 64 x 64 block of S and P V then needs 2270 clocks of ldmatrix against 1680
// of MMA: shared memory, not the tensor cores, set the pace (ncu: its pipe 74% busy, the tensor pipe 50%).
//
// The kernel body, top to bottom, by role:
//   scheduler  one CTA per (Q block of 64 rows, head, batch), as fa2_fwd.cu; key_blocks picks the K/V
//              blocks and the edge ones (a dense mask's block list, BlockWalk). Two warp pairs a CTA,
//              each owning 32 query rows.
//   producer   every thread issues cp.async: Q once; one K and one V buffer, loaded in turn (FA2's
//              split waits): V_j under S = Q K_j^T, K_j+1 under the softmax and P~ V_j.
//   consumer   warp h of a pair computes S for its pair's 32 rows against keys [32 h, 32 h + 32) of the
//              block (each K and Q fragment feeds two MMAs), then accumulates O's columns
//              [128 h, 128 h + 128) over all 64 keys: its own half of P~ from registers, the other
//              warp's through shared memory (stmatrix, ldmatrix); each V fragment feeds two MMAs.
//   softmax    softmax.cuh's steps; the row max needs both halves: each warp writes its partial max to
//              shared memory and, after the barrier the K buffer needs anyway, takes the larger of its
//              pair's two, so both rescale by the same alpha and their partial row sums add at the end.
//   epilogue   the pair's row sums add through shared memory; O_i / l_i leaves through the warp's part of
//              sQ as 16-byte row chunks; LSE from the first warp of the pair.
// Per warp and K/V block: 104 ldmatrix.x4 and 4 stmatrix.x4 for 256 MMAs, against 144 ldmatrix.x4.
//
// Tile shape: shapes.hpp's fa2_forward_shape(256) (`flashlab shapes --hdim 256`): Br = Bc = 64, 4 warps
// (2 pairs), one K and one V buffer: 96 KiB with Q, plus 8.5 KiB for P~ and the row statistics, so two
// CTAs share an SM (__launch_bounds__(128, 2)).
//
// Where it stands: NVIDIA H100 80GB HBM3, 2026-11-22, bf16, batch x seqlen = 16k, heads x d = 2048,
// against SDPA flash in the same process, s = 1k-16k, two sweeps (bench/results/gpu-h100-2026-11-22-
// fa2v9.md, -fa2v9-run2.csv): 1.00-1.08x (336 vs 332 TFLOP/s at s = 16k; cuDNN 669). ncu at s = 4k
// (bench/results/ncu-h100-2026-11-22-fwd-v8.txt): 1609 us to flash's 1664, 213M shared-memory load
// wavefronts to 303M (pipe 60% busy to 77%), tensor pipe 53% to 52%.
//
// Version index (bench/ab_libs.py against fa2_fwd.cu's v7 d = 256 kernel in one process; the full
// entries are in gpu/HISTORY.md):
//   v1  pairs with named pair barriers, K_j+1 and V_j+1 loaded together after P V_j: 0.97-1.03x v7, no gain.
//   v2  FA2's split waits on the two barriers the pairs' exchanges need anyway: 1.00-1.06x v7 (causal
//       s = 4k 0.98x), 1.01-1.06x SDPA flash; the kernel forward v8 runs at d = 256.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "cuda_check.hpp"
#include "kernels.hpp"
#include "mask.cuh"
#include "mma.cuh"
#include "sequence.cuh"
#include "shapes.hpp"
#include "softmax.cuh"

namespace flashlab::gpu {
namespace {

using namespace mma;

// The shape is shapes.hpp's fa2_forward_shape(256) (the reason is there).
constexpr TileShape kShape = fa2_forward_shape(256);
constexpr int D = kShape.head_dim, kWarps = kShape.warps, kThreads = kShape.threads;
constexpr int kBr = kShape.block_m, kBc = kShape.block_n;  // query rows and keys a block
constexpr int kPairRows = 32;          // query rows a warp pair owns
constexpr int kHalfKeys = kBc / 2;     // keys of S a warp computes
constexpr int kHalfCols = D / 2;       // columns of O a warp accumulates
constexpr int kMT = kPairRows / 16;    // 16-row MMA tiles a warp
constexpr int kPairs = kWarps / 2;

// Shared memory: Q, K, V tiles (swizzled, D wide), then per pair and half the P~ tile (32 x 32,
// swizzled 32 wide) and 32 floats of row statistics (the partial max, and at the end the row sum).
constexpr int kTileElems = (kBr + 2 * kBc) * D;
constexpr int kPElems = kPairs * 2 * kPairRows * kHalfKeys;
constexpr size_t kSmemBytes = size_t(kTileElems + kPElems) * 2 + kPairs * 2 * kPairRows * sizeof(float);
static_assert(D == 256 && kShape.warp_pairs && kShape.stages == 1 && kThreads == 32 * kWarps &&
                  kBr == kPairs * kPairRows && kMT == kShape.mma_tiles && kSmemBytes == size_t(kShape.smem_bytes),
              "shapes.hpp's fa2_forward_shape(256) must describe this kernel");

template <typename T, bool kSoftcap, Features kF>
__global__ void __launch_bounds__(kThreads, kShape.min_ctas_per_sm) fa2_forward_pairs_kernel(const AttentionParams p) {
  constexpr bool kMask = kF != Features::none;      // a mask function's rows, bits and block lists
  constexpr bool kExtras = kF == Features::extras;  // ALiBi and dropout
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // (Br, D)
  T* sK = sQ + kBr * D;                     // (Bc, D)
  T* sV = sK + kBc * D;                     // (Bc, D)
  T* sP = sV + kBc * D;                     // (pairs, 2 halves, 32 rows, 32 keys)
  float* sStat = reinterpret_cast<float*>(sP + kPElems);  // (pairs, 2 halves, 32 rows)

  const int i_block = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int g = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int pair = warp / 2, half = warp % 2;
  const int qrow = lane / 4, qcol = (lane % 4) * 2;

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
  // With kMask a mask function's row intervals may replace the window rule (sequence.cuh RowMask);
  // without, the window rule as it was (the same registers: ptxas spilled more through the struct).
  const RowMask rm = row_mask<kMask>(p, seq, b);
  const auto blocks = kMask ? key_blocks<kBr, kBc>(row0, rm)
                              : key_blocks<kBr, kBc>(row0, sq, sk, p.window_left, p.window_right);
  // The blocks walked: the run [begin, end), or under a dense mask this Q block's list (kMask only).
  const BlockWalk walk = kMask ? block_walk(p.forward_blocks, b, i_block, blocks.begin, blocks.end)
                                 : BlockWalk{nullptr, blocks.begin, blocks.end - blocks.begin, 0};

  // This warp's rows within the block: pair_row0 + 16 mt + qrow + 8 r.
  const int pair_row0 = pair * kPairRows;
  float acc_o[kMT][kHalfCols / 8][4];
  float row_max[kMT][2], row_sum[kMT][2];
  int lo[kMT][2], hi[kMT][2];
  int rows[kMT][2], diag[kMT][2];  // this thread's rows, and their diagonal's column (ALiBi)
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    zero(acc_o[mt]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mt][r] = -INFINITY;
      row_sum[mt][r] = 0.f;
      const int row = row0 + pair_row0 + mt * 16 + qrow + 8 * r;
      lo[mt][r] = kMask ? rm.begin(row) : col_begin(row, sq, sk, p.window_left);
      hi[mt][r] = kMask ? rm.end(row) : col_end(row, sq, sk, p.window_right);
      rows[mt][r] = row;
      diag[mt][r] = row + sk - sq;
    }
  }
  const float c = kSoftcap ? kLog2e : p.scale * kLog2e;
  const float slope = kExtras && p.alibi_slopes ? p.alibi_slopes[h] / (kSoftcap ? 1.f : p.scale) : 0.f;
  const uint64_t drop_key = kExtras ? flashlab::dropout::head_key(p.dropout_seed, b, h) : 0;

  // Shared addresses (bytes). Offsets by whole rows, or by multiples of 8 chunks, leave the swizzle's
  // lane parts unchanged, so one Ldsm an operand serves every warp's part of the tile.
  const Ldsm<D, Frag::A> ldsm_q(lane);
  const Ldsm<D, Frag::B> ldsm_k(lane);
  const Ldsm<D, Frag::BTrans> ldsm_v(lane);
  const Ldsm<kHalfKeys, Frag::A> ldsm_p(lane);
  const uint32_t q_pair = smem_addr(sQ) + 2u * uint32_t(pair_row0 * D);
  const uint32_t k_half = smem_addr(sK) + 2u * uint32_t(half * kHalfKeys * D);
  const uint32_t v_own = smem_addr(sV) + 2u * uint32_t(half * kHalfKeys * D + half * kHalfCols);
  const uint32_t v_other = smem_addr(sV) + 2u * uint32_t((half ^ 1) * kHalfKeys * D + half * kHalfCols);
  const uint32_t p_own = smem_addr(sP + (pair * 2 + half) * kPairRows * kHalfKeys);
  const uint32_t p_other = smem_addr(sP + (pair * 2 + (half ^ 1)) * kPairRows * kHalfKeys);
  float* stat_own = sStat + (pair * 2 + half) * kPairRows;
  const float* stat_other = sStat + (pair * 2 + (half ^ 1)) * kPairRows;

  if (walk.count > 0) {
    load_tile<D, kThreads, kBr>(sQ, q, p.q_row_stride, row0, sq, p.head_dim);
    load_tile<D, kThreads, kBc>(sK, k, p.k_row_stride, walk.block(0) * kBc, sk, p.head_dim);
    cp_async_commit();
  }

  // One K and one V buffer, loaded in turn (FA2's split waits): V_j under S = Q K_j^T, K_j+1 under the
  // softmax and P~ V_j. cp.async groups in flight, in order: ... V_j, K_j+1, V_j+1 ...
  for (int n = 0; n < walk.count; ++n) {
    const int j = walk.block(n);
    cp_async_wait<0>();
    __syncthreads();  // K_j (and Q) are in shared memory; every warp is done with V_j-1
    load_tile<D, kThreads, kBc>(sV, v, p.v_row_stride, j * kBc, sk, p.head_dim);
    cp_async_commit();

    // S = Q K^T for the pair's 32 rows and this warp's 32 keys.
    float acc_s[kMT][kHalfKeys / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) zero(acc_s[mt]);
    mma_acc<T, D / 16>(acc_s, ldsm_q, q_pair, ldsm_k, k_half);

    if constexpr (kSoftcap) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) softmax::softcap(acc_s[mt], p.softcap, p.scale / p.softcap);
    }
    if (kExtras && slope != 0.f) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) softmax::alibi(acc_s[mt], j * kBc + half * kHalfKeys, qcol, diag[mt], slope);
    }
    if (kMask && walk.list ? walk.listed_partial(n) : blocks.needs_mask(j)) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) softmax::mask(acc_s[mt], j * kBc + half * kHalfKeys, qcol, lo[mt], hi[mt]);
      if (kMask && p.bits.words) {  // a dense mask's holes, this thread's rows of bits
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          const BitRow bits[2] = {bit_row(p.bits, b, h, rows[mt][0], sq), bit_row(p.bits, b, h, rows[mt][1], sq)};
          softmax::mask_bits(acc_s[mt], j * kBc + half * kHalfKeys, qcol, bits);
        }
      }
    }

    // The row max over both halves: this warp's (with the running max) to shared memory, the CTA
    // meets, each warp takes the larger of its pair's two. A row's max is held by the 4 lanes of its quad.
    float m_new[kMT][2];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m_new[mt][r] = softmax::row_max(acc_s[mt], r, row_max[mt][r]);
        if (lane % 4 == 0) stat_own[mt * 16 + qrow + 8 * r] = m_new[mt][r];
      }
    __syncthreads();  // the partial maxima are in shared memory, and every warp is done with K_j
    if (n + 1 < walk.count) {
      load_tile<D, kThreads, kBc>(sK, k, p.k_row_stride, walk.block(n + 1) * kBc, sk, p.head_dim);
      cp_async_commit();
    }

    // P~ = exp2(s c - m c) for this warp's keys; O rescaled by alpha = exp2((m_old - m) c).
    uint32_t p_frag[kMT][kHalfKeys / 16][4];  // this warp's half of P~ as A fragments
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m = fmaxf(m_new[mt][r], stat_other[mt * 16 + qrow + 8 * r]);
        const float m_c = softmax::scaled_max(m, c);
        alpha[r] = exp2_fast(row_max[mt][r] * c - m_c);
        row_max[mt][r] = m;
        // this half's keys only; the halves add at the end
        row_sum[mt][r] = row_sum[mt][r] * alpha[r] + softmax::exp2_row(acc_s[mt], r, c, m_c);
      }
      softmax::rescale(acc_o[mt], alpha);
      if (kExtras && p.dropout_threshold != 0)  // after the row sums: the statistics are dropout's input
        softmax::dropout(acc_s[mt], j * kBc + half * kHalfKeys, qcol, rows[mt], drop_key, p.dropout_threshold);
#pragma unroll
      for (int kk = 0; kk < kHalfKeys / 16; ++kk) {
        c_to_a<T>(p_frag[mt][kk], acc_s[mt][2 * kk], acc_s[mt][2 * kk + 1]);
      }
    }
    unroll<kMT>([&](auto mt_) {  // the same fragments into this warp's P~ tile, for its pair
      constexpr int mt = decltype(mt_)::value;
      unroll<kHalfKeys / 16>([&](auto kk_) {
        constexpr int kk = decltype(kk_)::value;
        ldsm_p.template store<mt, kk>(p_frag[mt][kk], p_own, lane);
      });
    });
    if (n + 1 < walk.count) cp_async_wait<1>();  // V_j has landed; the next K may still be on its way
    else cp_async_wait<0>();
    __syncthreads();  // V_j and the other half of P~ are in shared memory

    // O[:, 128 half ..] += P~ V_j: this warp's keys from registers, the other warp's through ldmatrix.
    unroll<kHalfKeys / 16>([&](auto kk_) {
      constexpr int kk = decltype(kk_)::value;
      unroll<kHalfCols / 16>([&](auto n_) {
        constexpr int n = decltype(n_)::value;
        uint32_t bv[4];
        ldsm_v.template block<n, kk>(bv, v_own);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) mma_16x16<T>(acc_o[mt], n, p_frag[mt][kk], bv);
      });
    });
    mma_acc<T, kHalfKeys / 16>(acc_o, ldsm_p, p_other, ldsm_v, v_other);
  }

  // The row sums of the two halves add (both rescaled by the same alphas); then O_i / l_i and LSE_i.
  // O leaves through the warp's part of sQ (its pair's rows, its columns) as 16-byte row chunks.
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[mt][r] = softmax::quad_sum(row_sum[mt][r]);
      if (lane % 4 == 0) stat_own[mt * 16 + qrow + 8 * r] = row_sum[mt][r];
    }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int pair_row = mt * 16 + qrow + 8 * r, tile_row = pair_row0 + pair_row, row = row0 + tile_row;
      const float l = row_sum[mt][r] + stat_other[pair_row];
      const float inv = l > 0.f ? (kExtras ? p.dropout_keep_scale : 1.f) / l : 0.f;
#pragma unroll
      for (int n = 0; n < kHalfCols / 8; ++n)
        *reinterpret_cast<uint32_t*>(sQ + swizzled<D>(tile_row, half * kHalfCols + n * 8 + qcol)) =
            pack2<T>(acc_o[mt][n][2 * r] * inv, acc_o[mt][n][2 * r + 1] * inv);
      if (half == 0 && row < sq && lane % 4 == 0)
        lse[row] = softmax::lse(row_max[mt][r], c, l);
    }
  __syncwarp();
  constexpr int kChunks = kHalfCols / 8;  // 16-byte chunks of a warp's part of a row
#pragma unroll
  for (int i = 0; i < kPairRows * kChunks / 32; ++i) {
    const int idx = i * 32 + lane;
    const int tile_row = pair_row0 + idx / kChunks, chunk = half * kChunks + idx % kChunks, row = row0 + tile_row;
    if (row < sq && chunk * 8 < p.head_dim)
      *reinterpret_cast<uint4*>(o + int64_t(row) * p.o_row_stride + chunk * 8) =
          *reinterpret_cast<const uint4*>(sQ + swizzle<D>(tile_row, chunk));
  }
}

template <typename T>
void launch(const AttentionParams& p, cudaStream_t stream) {
  check_block_lists(p.forward_blocks, kBr, kBc, "fa2 forward (d = 256)");
  const auto kernel = pick_instantiation(p, [](auto cap, auto f) {
    return &fa2_forward_pairs_kernel<T, decltype(cap)::value, decltype(f)::value>;
  });
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
  const dim3 grid((p.seqlen_q + kBr - 1) / kBr, p.heads_q, p.batch);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(p);
  FLASHLAB_CUDA_LAUNCHED();
}

}  // namespace

void fa2_forward_pairs_d256(const AttentionParams& p, cudaStream_t stream) {
  if (p.dtype == Dtype::bf16) launch<__nv_bfloat16>(p, stream);
  else launch<__half>(p, stream);
}

}  // namespace flashlab::gpu
