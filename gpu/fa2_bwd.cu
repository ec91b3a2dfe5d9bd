// fa2: FlashAttention-2 backward on tensor cores (FA2 paper, Algorithm 2), the head dims and dtypes of
// the forward (fa2_fwd.cu). dK and dV a K/V block at a time; dQ by fp32 reductions into a scratch
// buffer, or, deterministic, by a Q-outer kernel of its own.
//
// Four kernels, in launch order, by role:
//   preprocess  D_i = rowsum(dO_i o O_i) and LSE_i in log2 units a query row (fp32, 16-byte accesses);
//               zeroes the row's dQ scratch (atomic path).
//   dkdv        scheduler: one CTA per (K/V block of Bc keys, kv head, batch); rows_seeing gives the Q
//                 blocks that see the block, and the CTA walks (query head of the GQA group, Q block)
//                 steps with counters; under a mask function the blocks that need the element mask
//                 first, then the whole ones, each kind in a loop of its own (sequence.cuh
//                 key_block_rows, SplitWalk).
//               producer: K_j and V_j once into shared memory; Q_i, dO_i, LSE2 and D of each step through
//                 a 2-stage cp.async pipeline.
//               consumer: 8 warps, along the keys (16 mma_tiles each) and along the queries or the head
//                 dim, five GEMMs a step (mma.cuh mma_pair / mma_acc through Ldsm):
//                   S^T = K_j Q_i^T, dP^T = V_j dO_i^T
//                   P^T = exp2(S^T scale log2e - LSE2), dS^T / scale = P^T o (dP^T - D)   (prob_grad,
//                     softcap's derivative folded in; ALiBi's bias off the score, dropout's keep / (1 - p)
//                     on dP and on P for dV (the Features::extras instantiation); edge tiles masked with two compares;
//                     a mask function's partial tiles by verdicts taken before the MMAs, a bit an element)
//                   P^T, dS^T -> shared memory (the transposes the next MMAs read)
//                   dV_j += P^T dO_i, dK_j += dS^T Q_i                   (in registers)
//                   dQ_i += dS K_j                  (red.add into the fp32 scratch, 16 bytes a lane on sm_90)
//               epilogue: dK_j times scale and dV_j to HBM once (zero for keys no query sees).
//   dq          deterministic only: one CTA per (Q block of 64, head, batch), 4 warps of 16 rows,
//               recomputing S, P, dP and dS over its K/V blocks (key_blocks, as the forward) so that dQ
//               is summed in a fixed order, without atomics.
//   convert     dQ's fp32 scratch times scale -> dq in the input dtype (atomic path).
//
// Tile shape: shapes.hpp's fa2_backward_shape by the device's shared memory per block, and
// fa2_backward_dq_shape (`flashlab shapes --pass bwd --hdim 64,128,256 --gpu h100-sxm`). dkdv Bc x Br:
// 128 x 128 at d = 64 (128 x 64 under 162 KiB a block), 128 x 64 at d = 128, 64 x 64 at d = 256 (64 x 32
// with one key tile a warp under 209 KiB, as on an A100); two 16-key MMA tiles a warp, one CTA an SM.
//
// Where it stands: NVIDIA H100 80GB HBM3, 2026-11-22, backward v7 with forward v8, bf16, batch x seqlen
// = 16k, heads x d = 2048, forward + backward against SDPA flash in the same process, s = 1k-16k, two
// sweeps (bench/results/gpu-h100-2026-11-22-fa2v9.md, -fa2v9-run2.csv): d = 64 0.96-1.01x (296 vs 300
// TFLOP/s at s = 16k), d = 128 0.96-1.01x (329 vs 328), d = 256 0.91-0.96x (265 vs 283); deterministic
// 0.82-0.93x (-fa2v9-deterministic.md). ncu, d = 256 s = 2k: dkdv 2.96 ms to flash's 2.65 ms.
//
// Version index (forward + backward against SDPA flash; the full entries, with every experiment tried
// and not kept, are in gpu/HISTORY.md):
//   v1  16 keys a warp, Bc = 64, scalar fp32 atomicAdd for dQ: H200 s = 4k 0.38-0.52x.
//   v2  softcap a template parameter, mask out of the element loops, cheap tile loads: 0.46-0.61x.
//   v3  Bc = 128 for d <= 128, 8-byte dQ reductions (red.global.add.v2.f32), Br = 64 at d = 256: 0.79-0.82x.
//   v4  two 16-key MMA tiles a warp (each Q / dO fragment feeds two MMAs): H200 0.78-0.89x.
//   v5  dQ with two 16-row tiles a warp for d >= 128: +2-3%; H200 0.77-0.91x.
//   v6  Br = 128 at d = 64; 16-byte dQ reductions; dQ scratch zeroed by preprocess: H100 0.85-0.95x.
//   v7  fewer instructions a step (edge masks by two compares, counters for the steps, scale out of dS,
//       predicated reductions), Ldsm immediate offsets: H100 0.90-1.00x; deterministic 0.80-0.92x.
//   v8  under a mask function dK/dV's K/V blocks dealt longest walk first (the Q blocks that see them),
//       in L2 sections of (batch, kv head) pairs (tile_order.hpp), with the forward's v9: forward +
//       backward mask_ms / (density x nomask_ms) 0.97-1.30 (grid order 1.09-1.39, the same H100,
//       2026-11-26), within 1.2 on 11 and 10 of 12 cells in two runs (grid order 6). No new spills.
//   v9  under a mask function's intervals, the Q blocks a K/V block's rows span found by a 32-ary search
//       over the warp (sequence.cuh rows_seeing_by_warp) in place of two binary searches of dependent
//       global loads: aligned documents (no partial tiles) against density x unmasked 1.07-1.20 (was
//       1.09-1.23); masked forward + backward 0.96-1.05x v8 in one process (median 1.02x, H100,
//       2026-11-27, bench/results/masks-h100-2026-11-27-fa2-bwd-warp-search.csv). Fixed the same day:
//       a search that found no row could end one past the sequence (row_search.hpp), a wasted step here
//       and wrong gradients in fa3 (gpu/HISTORY.md); the fix 0.98-1.02x in one process.
//   v10 under a mask function a K/V block's partial steps and whole steps in loops of their own, the
//       whole ones without any mask code (a whole tile had cost 1.10x an unmasked one: 7% more
//       instructions a step), the rows and the whole Q blocks by four 32-ary searches on four warps at
//       once: per-CTA timelines (%globaltimer, bench/dkdv_timeline.py) of instrumented builds on the
//       H100, 2026-11-28, d = 64 s = 8k: a step of one document as long as the sequence 5.27 -> 4.75 us
//       (unmasked 4.75-4.80), uneven documents' dK/dV kernel 2344 -> 2159 us; uninstrumented, forward +
//       backward against density x unmasked d = 128 documents 1.05-1.12 (v9 1.13-1.18); d = 64, whose mask
//       kernel ptxas now spills 10 instructions in its loops, 1.10-1.23 (v9 1.11-1.25).
//   v11 a partial step's element verdicts taken before the S/dP MMAs (one bit an element, straight-line
//       tests, a dense mask's bits in loops of their own), applied after: tested after the MMAs each element
//       was a branch around a load. bench/mask_step_costs.py, H200, 2026-11-28, v10 beside it: a partial
//       step 1.72x -> 1.43x a whole one at d = 64 (1.33x -> 1.24x at d = 128); mask_compare forward +
//       backward against density x unmasked 0.995-1.14 on every cell (v10 up to 1.21).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <string>

#include "cuda_check.hpp"
#include "flashlab/dropout.hpp"
#include "kernels.hpp"
#include "mma.cuh"
#include "prob_grad.cuh"
#include "sequence.cuh"
#include "shapes.hpp"
#include "tile_order.hpp"

namespace flashlab::gpu {
namespace {

using namespace mma;

// Scratch layout (fa2_backward_scratch_bytes): [dQ fp32, atomic path only][D][LSE2].
struct Scratch {
  float* dq_accum;  // (rows, heads_q, head_dim), row stride heads_q * head_dim
  float* dsum;      // laid out as lse
  float* lse2;      // laid out as lse; +inf where LSE is -inf (a fully masked row: P = 0)
};
__host__ __device__ inline Scratch scratch_of(const BackwardParams& p) {
  const int64_t rows = p.cu_seqlens_q ? p.total_q : int64_t(p.batch) * p.seqlen_q;
  float* base = static_cast<float*>(p.scratch);
  float* accum = p.deterministic ? nullptr : base;
  float* dsum = base + (p.deterministic ? 0 : rows * p.heads_q * p.head_dim);
  return {accum, dsum, dsum + rows * p.heads_q};
}

// ---- 1. D = rowsum(dO * O) and LSE2, and dQ's scratch row zeroed. Each thread takes 8 columns of a
// row with 16-byte accesses: D / 8 threads a row, 256 / (D / 8) rows a block.
template <int D, typename T>
__global__ void __launch_bounds__(256) preprocess_kernel(const BackwardParams p) {
  constexpr int kLanes = D / 8, kRows = 256 / kLanes;
  const int h = blockIdx.y, b = blockIdx.z;
  const Sequence s = sequence_of(p, b);
  const int row = blockIdx.x * kRows + threadIdx.x / kLanes, c = (threadIdx.x % kLanes) * 8;
  const bool in = row < s.sq && c < p.head_dim;  // a padded head_dim's columns and rows past sq add nothing
  float acc = 0.f;
  if (in) {
    const int64_t at = s.o_base + int64_t(row) * p.o_row_stride + h * p.o_head_stride + c;
    const uint4 x = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.o) + at);
    const uint4 y = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.d_o) + at);
    const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 a = unpack2<T>(xs[e]), d = unpack2<T>(ys[e]);
      acc += a.x * d.x + a.y * d.y;
    }
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffff, acc, off);  // the row's lanes
  if (row >= s.sq) return;
  const Scratch sc = scratch_of(p);
  if (sc.dq_accum && in) {  // the dQ scratch the dkdv kernel adds into: zeroed here rather than by a memset
    float4* accum = reinterpret_cast<float4*>(sc.dq_accum + ((s.row_base + row) * p.heads_q + h) * p.head_dim + c);
    accum[0] = accum[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if (c == 0) {
    const int64_t at = s.row_array(h, b, p) + row;
    const float lse = p.lse[at];
    sc.dsum[at] = acc;
    sc.lse2[at] = lse == -INFINITY ? INFINITY : lse * kLog2e;
  }
}

// ALiBi's bias in log2 units and dropout's scale for score (row, key) of head h: what prob_grad takes.
// Extras<false> is 0 and 1 at compile time, so the kernels without them keep their code.
template <bool kOn>
struct Extras {
  float slope2 = 0.f;  // slope[h] log2e; 0: no ALiBi
  uint64_t key = 0;    // dropout::head_key(seed, b, h)
  __device__ Extras(const BackwardParams& p, int b, int h) {
    if constexpr (kOn) {
      slope2 = p.alibi_slopes ? p.alibi_slopes[h] * kLog2e : 0.f;
      key = p.dropout_threshold ? flashlab::dropout::head_key(p.dropout_seed, b, h) : 0;
    }
  }
  __device__ float bias2(int row, int key_col, int diag_offset) const {
    if constexpr (!kOn) return 0.f;
    return slope2 * fabsf(float(row + diag_offset - key_col));
  }
  __device__ float z(const BackwardParams& p, int row, int key_col) const {
    if constexpr (!kOn) return 1.f;
    if (!p.dropout_threshold) return 1.f;
    return flashlab::dropout::keep(key, uint64_t(row), uint64_t(key_col), p.dropout_threshold) ? p.dropout_keep_scale
                                                                                              : 0.f;
  }
};

// Adds one thread's share of two adjacent 16 x 8 accumulator tiles of dQ (columns col0 .. col0 + 15 of one
// row, C-fragment layout: this lane holds (c, c + 1) of each, c = col0 + tc) into the fp32 scratch row,
// if `ok` (the row exists). Every lane of the warp must call it (it shuffles).
// On sm_90 the lane pair (tc, tc + 2) first swaps halves with one shuffle each way, so that each lane
// owns four consecutive columns of one tile and adds them with one 16-byte reduction: half the
// reduction instructions, which otherwise fill the load/store unit's queue (ncu, v5: the `lg` stall,
// 19% of the warps' stall samples at d = 256; scalar reductions, as FA2's atomicAdd, measured 13-30%
// slower than 8-byte ones).
__device__ __forceinline__ void add_two_tiles(float* row, int col0, int tc, float2 a, float2 b, int head_dim,
                                              bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool odd = (tc / 2) & 1;  // holds columns 2..3 or 6..7 of its 8
  const float2 give = odd ? a : b;
  const float2 got = make_float2(__shfl_xor_sync(0xffffffff, give.x, 1), __shfl_xor_sync(0xffffffff, give.y, 1));
  const int col = col0 + (odd ? 8 + tc - 2 : tc);  // even lanes: tile a's 4 columns; odd: tile b's
  const float4 v = odd ? make_float4(got.x, got.y, b.x, b.y) : make_float4(a.x, a.y, got.x, got.y);
  // Predicated in PTX (ptxas still branches around each one; adding whole blocks without the tests
  // measured no faster, v7).
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n @p red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n}\n" ::"l"(
          row + col),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(int(ok && col < head_dim))
      : "memory");
#else  // before sm_90: 4-byte reductions (atomicAdd with its result unused compiles to one)
  if (ok && col0 + tc < head_dim) {
    atomicAdd(row + col0 + tc, a.x);
    atomicAdd(row + col0 + tc + 1, a.y);
  }
  if (ok && col0 + 8 + tc < head_dim) {
    atomicAdd(row + col0 + 8 + tc, b.x);
    atomicAdd(row + col0 + 8 + tc + 1, b.y);
  }
#endif
}

// ---- 2. dK, dV (and dQ by atomics). The tiles are shapes.hpp's fa2_backward_shape, eight warps at
// every shape (launch_dkdv_for checks each instantiation against it).
constexpr int kWarpsKV = 8, kThreadsKV = 32 * kWarpsKV;

template <int D, int kBc, int kBr, typename T>
struct KVSmem {
  T k[kBc * D], v[kBc * D];
  T q[2][kBr * D], d_o[2][kBr * D];
  T p[kBc * kBr], ds[kBc * kBr];  // P^T, dS^T: (keys, queries)
  float lse2[2][kBr], dsum[2][kBr];
};

// kKT: 16-key MMA tiles per warp (a Q / dO fragment read from shared memory feeds kKT MMAs);
// kMinBlocks: CTAs an SM should hold at once (caps the registers at 65536 / (256 kMinBlocks)); 0 leaves
// the register count to ptxas.
template <int D, int kBcKV, int kBr, int kKT, int kMinBlocks, typename T, bool kSoftcap, Features kF>
__global__ void __launch_bounds__(kThreadsKV, kMinBlocks) dkdv_kernel(const BackwardParams p) {
  constexpr bool kMask = kF != Features::none;      // a mask function's rows, bits and block lists
  constexpr bool kExtras = kF == Features::extras;  // ALiBi and dropout
  constexpr int kKG = kBcKV / (16 * kKT);  // S^T, dK, dV: warps along the keys (16 kKT each) ...
  constexpr int kCH = kWarpsKV / kKG;      // ... and along the queries (S^T) or head_dim (dK, dV)
  constexpr int kQ = kBr / kCH;            // queries per warp in S^T
  constexpr int kDh = D / kCH;             // dK / dV columns per warp
  constexpr int kQT = D >= 128 || kBr >= 128 ? 2 : 1;  // dQ: 16-row tiles a warp (a K fragment feeds kQT MMAs)
  constexpr int kWM = kBr / (16 * kQT);    // dQ: warps along the query rows ...
  constexpr int kWN = kWarpsKV / kWM;      // ... and along head_dim
  constexpr int kDq = D / kWN;             // dQ columns per warp
  static_assert(kKG * kCH == kWarpsKV && kQ % 16 == 0 && kDh % 16 == 0 && kDq % 16 == 0, "tile shapes");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<KVSmem<D, kBcKV, kBr, T>*>(smem_raw);

  // The tile: the grid's (K/V block, kv head, entry), or under a mask function (no ALiBi or dropout) the
  // longest-first deal of tile_order.hpp, blockIdx.x its index (launch_dkdv says why).
  int j = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  if constexpr (kF == Features::mask) {
    if (p.fa2_dkdv_deal.lines) {
      const AttentionParams::Deal& deal = p.fa2_dkdv_deal;
      const DealtTile t = longest_first_tile(int(blockIdx.x), deal.len, p.heads_kv * p.batch, deal.sections, deal.lines);
      j = t.line;
      g = t.pair % p.heads_kv;
      b = t.pair / p.heads_kv;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, tc = (lane % 4) * 2;
  const int wr = warp % kKG, wc = warp / kKG;  // S^T, dK, dV: key group, query / head_dim part
  const Sequence s = sequence_of(p, b);
  const int key0 = j * kBcKV;
  if (key0 >= s.sk) return;
  const int key_end = min(key0 + kBcKV, s.sk);
  const int group = p.heads_q / p.heads_kv;
  const Scratch sc = scratch_of(p);

  const T* k = static_cast<const T*>(p.k) + s.k_base + g * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + s.v_base + g * p.v_head_stride;
  const RowMask rm = row_mask<kMask>(p, s, b);
  // The query rows that see the block (every lane of the CTA is here); under a mask function also the Q
  // blocks that see all of it, [full_lo, full_hi): their steps run without the element mask's code.
  RowRange rows;
  int full_lo = 0, full_hi = 0;
  if constexpr (kF == Features::mask) {
    __shared__ int met[4];
    const KeyBlockRows kb = key_block_rows<kBr, kBcKV>(key0, key_end, rm, met);
    rows = kb.rows;
    full_lo = kb.full_lo;
    full_hi = kb.full_hi;
  } else {
    rows = rows_seeing_by_warp(key0, key_end, rm);
  }
  const int i_begin = rows.lo / kBr, i_end = rows.hi > rows.lo ? (rows.hi + kBr - 1) / kBr : i_begin;
  // The Q blocks walked: the run [i_begin, i_end), or under a dense mask this K/V block's list (kMask).
  const BlockWalk walk = kMask ? block_walk(p.dkdv_blocks, b, j, i_begin, i_end)
                                 : BlockWalk{nullptr, i_begin, i_end - i_begin, 0};
  const int n_i = walk.count, steps = group * n_i;
  // Under a mask function the steps go the blocks that need the element mask first, then the whole ones,
  // each kind in a loop of its own (below), each query head of the group in turn.
  const SplitWalk split = split_walk(walk, full_lo, full_hi);
  const int partial_steps = group * split.partial, whole = n_i - split.partial;

  // The steps walk the Q blocks of each query head of the group in turn.
  auto load_step = [&](int h, int i, int stage) {
    const T* q = static_cast<const T*>(p.q) + s.q_base + h * p.q_head_stride;
    const T* d_o = static_cast<const T*>(p.d_o) + s.o_base + h * p.o_head_stride;
    load_tile<D, kThreadsKV, kBr>(sm.q[stage], q, p.q_row_stride, i * kBr, s.sq, p.head_dim);
    load_tile<D, kThreadsKV, kBr>(sm.d_o[stage], d_o, p.o_row_stride, i * kBr, s.sq, p.head_dim);
    if (threadIdx.x < 2 * kBr) {  // rows past sq: LSE2 = 0 and D = 0 with Q = dO = 0 give P dO = dS = 0
      const int r = threadIdx.x % kBr, row = i * kBr + r;
      const bool ok = row < s.sq;
      const int64_t at = s.row_array(h, b, p) + (ok ? row : 0);
      if (threadIdx.x < kBr) cp_async_4(&sm.lse2[stage][r], sc.lse2 + at, ok);
      else cp_async_4(&sm.dsum[stage][r], sc.dsum + at, ok);
    }
    cp_async_commit();
  };

  float acc_dv[kKT][kDh / 8][4], acc_dk[kKT][kDh / 8][4];
#pragma unroll
  for (int mt = 0; mt < kKT; ++mt) {
    zero(acc_dv[mt]);
    zero(acc_dk[mt]);
  }
  if (steps > 0) {
    load_tile<D, kThreadsKV, kBcKV>(sm.k, k, p.k_row_stride, key0, s.sk, p.head_dim);
    load_tile<D, kThreadsKV, kBcKV>(sm.v, v, p.v_row_stride, key0, s.sk, p.head_dim);
    if constexpr (kF == Features::mask) {
      load_step(g * group, partial_steps > 0 ? split.partial_block(0) : split.whole_block(0), 0);
    } else {
      load_step(g * group, walk.block(0), 0);
    }
  }
  // This thread's rows of S^T (keys, local to the block): tile mt, accumulator half r.
  auto key_of = [&](int mt, int r) { return (wr * kKT + mt) * 16 + gr + 8 * r; };
  // ldmatrix addresses (mma.cuh Ldsm): the warp's row offsets in the tile bases, its column offsets
  // (in 16-byte chunks) in the lane parts, block offsets as immediates.
  const Ldsm<D, Frag::A> ldsm_kv(lane);                         // K, V as A of S^T, dP^T
  const Ldsm<D, Frag::B> ldsm_qo(lane);                         // Q, dO as B of S^T, dP^T
  const Ldsm<kBr, Frag::A> ldsm_pds(lane);                      // P^T, dS^T as A of dV, dK
  const Ldsm<D, Frag::BTrans> ldsm_qo_t(lane, wc * kDh / 8);    // dO, Q as B of dV, dK
  const int qm = warp % kWM, qn = warp / kWM;                   // dQ: this warp's row tiles and columns
  const Ldsm<kBr, Frag::ATrans> ldsm_ds_t(lane, qm * kQT * 2);  // dS as A of dQ
  const Ldsm<D, Frag::BTrans> ldsm_k_t(lane, qn * kDq / 8);     // K as B of dQ
  const uint32_t k_rows = smem_addr(sm.k) + 2u * uint32_t(wr * kKT * 16 * D);
  const uint32_t v_rows = smem_addr(sm.v) + 2u * uint32_t(wr * kKT * 16 * D);
  const uint32_t p_rows = smem_addr(sm.p) + 2u * uint32_t(wr * kKT * 16 * kBr);
  const uint32_t ds_rows = smem_addr(sm.ds) + 2u * uint32_t(wr * kKT * 16 * kBr);

  int h = g * group, at = 0;                                         // step t's query head and place in the walk
  int h_next = at + 1 < n_i ? h : h + 1, at_next = at + 1 < n_i ? at + 1 : 0;  // step t + 1's
  // One step: Q block row0 / kBr of query head h from stage `stage`. Under a mask function a step is
  // compiled twice, with the element mask (kPartial) and without any mask code: before v10 a whole tile
  // of the mask kernel took 1.10x the unmasked kernel's step (7% more instructions a step in the SASS:
  // the mask's tests and the walk's list in the loop; gpu/HISTORY.md).
  auto step = [&](auto partial, int stage, int row0) {
    constexpr bool kPartial = decltype(partial)::value;
    const T* sQ = sm.q[stage];
    const T* sdO = sm.d_o[stage];

    // S^T = K_j Q_i^T and dP^T = V_j dO_i^T for this warp's 16 kKT keys x kQ queries.
    // Where the tile crosses a mask function's edge (or a dense mask's holes), each element's verdict,
    // bit (kKT n + mt) 4 + 2 c + r for query column wc kQ + 8 n + tc + c and key key_of(mt, r), taken
    // here, before the MMAs, while only dK and dV's accumulators hold registers: the row intervals' loads
    // then issue together, and the tests run as straight-line code (v11; taken after the MMAs, each
    // element was a branch around a load, and a partial step cost 1.8x a whole one at d = 64).
    const int last_row = min(row0 + kBr, s.sq) - 1;
    const bool edge = kF != Features::mask && !(key0 >= rm.begin(last_row) && key0 + kBcKV <= rm.end(row0));
    const bool element_mask =
        kF == Features::mask ? kPartial : kMask && walk.list ? walk.listed_partial(at) : rm.lo && edge;
    constexpr int kVerdicts = kKT * kQ / 2;  // 4 a (query column, key tile) pair
    uint32_t seen[(kVerdicts + 31) / 32] = {};
    auto seen_bit = [](int n, int c, int mt, int r) { return (kKT * n + mt) * 4 + 2 * c + r; };
    if (element_mask) {
      // Key m of the thread's 2 kKT is key_of(m / 2, m % 2); rm's ends are within sk already (INT_MAX: no cap).
      seen_pairs<kQ / 8, 2 * kKT>(
          seen, rm, INT_MAX, [=](int n, int c) { return row0 + wc * kQ + n * 8 + tc + c; },
          [=](int m) { return key0 + key_of(m / 2, m % 2); },
          [=](int n, int c, int m) { return seen_bit(n, c, m / 2, m % 2); });
      if (kMask && p.bits.words) {
#pragma unroll
        for (int n = 0; n < kQ / 8; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const BitRow bits = bit_row(p.bits, b, h, row0 + wc * kQ + n * 8 + tc + c, s.sq);
#pragma unroll
            for (int mt = 0; mt < kKT; ++mt)
#pragma unroll
              for (int r = 0; r < 2; ++r) {
                const int bit = seen_bit(n, c, mt, r);
                seen[bit / 32] &= ~(uint32_t(!bits.visible(key0 + key_of(mt, r))) << (bit % 32));
              }
          }
      }
    }

    float acc_s[kKT][kQ / 8][4], acc_dp[kKT][kQ / 8][4];
#pragma unroll
    for (int mt = 0; mt < kKT; ++mt) {
      zero(acc_s[mt]);
      zero(acc_dp[mt]);
    }
    const uint32_t q_rows = smem_addr(sQ) + 2u * uint32_t(wc * kQ * D);
    const uint32_t do_rows = smem_addr(sdO) + 2u * uint32_t(wc * kQ * D);
    mma_pair<T, D / 16>(acc_s, acc_dp, ldsm_kv, k_rows, v_rows, ldsm_qo, q_rows, do_rows);

    // P^T and dS^T (in place of S^T and dP^T), masked where the tile crosses the mask's edge; with
    // kExtras, ALiBi and dropout per (query row, key) of head h.
    const Extras<kExtras> ex(p, b, h);
#pragma unroll
    for (int mt = 0; mt < kKT; ++mt)
#pragma unroll
      for (int n = 0; n < kQ / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qc = wc * kQ + n * 8 + tc + (e & 1), row = row0 + qc, key = key0 + key_of(mt, e / 2);
          prob_grad<kSoftcap, kExtras>(acc_s[mt][n][e], acc_dp[mt][n][e], sm.lse2[stage][qc], sm.dsum[stage][qc], p,
                                       ex.bias2(row, key, s.sk - s.sq), ex.z(p, row, key));
        }
    if (element_mask) {
#pragma unroll
      for (int n = 0; n < kQ / 8; ++n)
#pragma unroll
        for (int mt = 0; mt < kKT; ++mt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int bit = seen_bit(n, e & 1, mt, e / 2);  // element (mt, n, e): column c = e & 1, key half r = e / 2
            if (!((seen[bit / 32] >> (bit % 32)) & 1u)) acc_s[mt][n][e] = acc_dp[mt][n][e] = 0.f;
          }
    } else if (kF != Features::mask && !rm.lo && edge) {
      // Row row_t + c (c = n * 8 + (e & 1), a constant once unrolled) sees key `key` iff band_lo <=
      // key - row <= band_hi (mask.cuh's rule before its clamps) and key < sk, that is iff above >= c
      // and below <= c: two compares with a constant an element.
      const int row_t = row0 + wc * kQ + tc;
      const int band_lo = p.window_left < 0 ? -(1 << 30) : s.sk - s.sq - p.window_left;
      const int band_hi = p.window_right < 0 ? (1 << 30) : s.sk - s.sq + p.window_right;
#pragma unroll
      for (int mt = 0; mt < kKT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int key = key0 + key_of(mt, r);
          const int above = key < s.sk ? key - row_t - band_lo : -(1 << 30);  // masked iff above < c
          const int below = key - row_t - band_hi;                               // masked iff below > c
#pragma unroll
          for (int n = 0; n < kQ / 8; ++n)
#pragma unroll
            for (int e = 2 * r; e < 2 * r + 2; ++e) {
              const int c = n * 8 + (e & 1);
              if (above < c || below > c) acc_s[mt][n][e] = acc_dp[mt][n][e] = 0.f;
            }
        }
    }
#pragma unroll
    for (int mt = 0; mt < kKT; ++mt)
#pragma unroll
      for (int n = 0; n < kQ / 8; ++n)
#pragma unroll
        for (int r = 0; r < 2; ++r) {  // c0, c1: key gr; c2, c3: key gr + 8
          const int at = swizzled<kBr>(key_of(mt, r), wc * kQ + n * 8 + tc);
          *reinterpret_cast<uint32_t*>(&sm.p[at]) = pack2<T>(acc_s[mt][n][2 * r], acc_s[mt][n][2 * r + 1]);
          *reinterpret_cast<uint32_t*>(&sm.ds[at]) = pack2<T>(acc_dp[mt][n][2 * r], acc_dp[mt][n][2 * r + 1]);
        }
    __syncthreads();  // P^T and dS^T complete

    // dV_j += P^T dO_i and dK_j += dS^T Q_i: 16 kKT keys x kDh columns per warp.
    const uint32_t q_tile = smem_addr(sQ), do_tile = smem_addr(sdO);
    mma_pair<T, kBr / 16>(acc_dv, acc_dk, ldsm_pds, p_rows, ds_rows, ldsm_qo_t, do_tile, q_tile);

    // dQ_i += dS K_j, added into the fp32 scratch: 16 kQT queries x kDq columns per warp.
    if (sc.dq_accum) {
      float acc_dq[kQT][kDq / 8][4];
#pragma unroll
      for (int mt = 0; mt < kQT; ++mt) zero(acc_dq[mt]);
      mma_acc<T, kBcKV / 16>(acc_dq, ldsm_ds_t, smem_addr(sm.ds), ldsm_k_t, smem_addr(sm.k));
      const int row_elems = p.heads_q * p.head_dim;  // the scratch's row stride
      float* dq_block = sc.dq_accum + ((s.row_base + row0) * p.heads_q + h) * p.head_dim;
#pragma unroll
      for (int mt = 0; mt < kQT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int rr = (qm * kQT + mt) * 16 + gr + 8 * r, row = row0 + rr;
          float* dst = dq_block + rr * row_elems;
#pragma unroll
          for (int n = 0; n < kDq / 8; n += 2)
            add_two_tiles(dst, qn * kDq + n * 8, tc, make_float2(acc_dq[mt][n][2 * r], acc_dq[mt][n][2 * r + 1]),
                          make_float2(acc_dq[mt][n + 1][2 * r], acc_dq[mt][n + 1][2 * r + 1]), p.head_dim,
                          row < s.sq);
        }
    }
  };

  if constexpr (kF == Features::mask) {
    // Steps [t0, t1), all partial or all whole, n blocks a query head: the whole ones' loop holds none
    // of the element mask's values, and a step's head and block come from counters (a division a step
    // cost as much as the mask's tests).
    auto run = [&](auto partial, int t0, int t1, int n) {
      constexpr bool kPartial = decltype(partial)::value;
      auto block = [&](int at_k) { return kPartial ? split.partial_block(at_k) : split.whole_block(at_k); };
      int at_k = 0;
      h = g * group;
      for (int t = t0; t < t1; ++t) {
        const int stage = t & 1, row0 = block(at_k) * kBr;
        cp_async_wait<0>();
        __syncthreads();  // step t's tiles are in; every warp is done with step t - 1
        const bool wrap = at_k + 1 == n;  // the next step is the next head's first block
        if (t + 1 < t1) load_step(h + wrap, block(wrap ? 0 : at_k + 1), stage ^ 1);
        else if (t + 1 < steps) load_step(g * group, split.whole_block(0), stage ^ 1);  // the first whole step
        step(partial, stage, row0);
        if (++at_k == n) {
          at_k = 0;
          ++h;
        }
      }
    };
    run(std::true_type{}, 0, partial_steps, split.partial);
    run(std::false_type{}, partial_steps, steps, whole);
  } else {
    for (int t = 0; t < steps; ++t) {
      const int stage = t & 1, row0 = walk.block(at) * kBr;
      cp_async_wait<0>();
      __syncthreads();  // step t's tiles are in; every warp is done with step t - 1
      if (t + 1 < steps) load_step(h_next, walk.block(at_next), stage ^ 1);
      step(std::false_type{}, stage, row0);
      h = h_next;
      at = at_next;
      if (++at_next == n_i) {
        at_next = 0;
        ++h_next;
      }
    }
  }

  // dK_j, dV_j to HBM once (zero for keys no query sees).
  T* dk = static_cast<T*>(p.dk) + s.k_base + g * p.k_head_stride;
  T* dv = static_cast<T*>(p.dv) + s.v_base + g * p.v_head_stride;
#pragma unroll
  for (int mt = 0; mt < kKT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = key0 + key_of(mt, r);
      if (key >= s.sk) continue;
#pragma unroll
      for (int n = 0; n < kDh / 8; ++n) {
        const int col = wc * kDh + n * 8 + tc;
        if (col >= p.head_dim) break;  // a padded head_dim's zero columns
        *reinterpret_cast<uint32_t*>(dk + int64_t(key) * p.k_row_stride + col) =
            pack2<T>(acc_dk[mt][n][2 * r] * p.scale, acc_dk[mt][n][2 * r + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dv + int64_t(key) * p.v_row_stride + col) =
            pack2<T>(acc_dv[mt][n][2 * r], acc_dv[mt][n][2 * r + 1]);
      }
    }
}

// ---- 3. dQ without atomics (deterministic): Q outer, as the forward. Shape: shapes.hpp's
// fa2_backward_dq_shape (Config checks it).
constexpr int kWarpsQ = 4, kThreadsQ = 32 * kWarpsQ, kBrQ = 16 * kWarpsQ;

template <int D, int kBc, typename T, bool kSoftcap, Features kF>
__global__ void __launch_bounds__(kThreadsQ) dq_kernel(const BackwardParams p) {
  constexpr bool kMask = kF != Features::none;      // a mask function's rows, bits and block lists
  constexpr bool kExtras = kF == Features::extras;  // ALiBi and dropout
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // (Br, D)
  T* sdO = sQ + kBrQ * D;                   // (Br, D)
  T* sK = sdO + kBrQ * D;                   // (2, Bc, D)
  T* sV = sK + 2 * kBc * D;                 // (2, Bc, D)

  const int i_block = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, tc = (lane % 4) * 2;
  const Sequence s = sequence_of(p, b);
  const int row0 = i_block * kBrQ;
  if (row0 >= s.sq) return;
  const Scratch sc = scratch_of(p);
  const T* q = static_cast<const T*>(p.q) + s.q_base + h * p.q_head_stride;
  const T* d_o = static_cast<const T*>(p.d_o) + s.o_base + h * p.o_head_stride;
  const T* k = static_cast<const T*>(p.k) + s.k_base + g * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + s.v_base + g * p.v_head_stride;

  // The K/V blocks this Q block sees, and where they need no mask (as the forward's).
  const RowMask rm = row_mask<kMask>(p, s, b);
  const auto blocks = key_blocks<kBrQ, kBc>(row0, rm);
  // The blocks walked: the run [begin, end), or under a dense mask this Q block's list (kMask only).
  const BlockWalk walk = kMask ? block_walk(p.dq_blocks, b, i_block, blocks.begin, blocks.end)
                                 : BlockWalk{nullptr, blocks.begin, blocks.end - blocks.begin, 0};

  int my_row[2], lo[2], hi[2];
  float lse2[2], dsum[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    my_row[r] = row0 + warp * 16 + gr + 8 * r;
    lo[r] = rm.begin(my_row[r]);
    hi[r] = rm.end(my_row[r]);
    const int64_t at = s.row_array(h, b, p) + min(my_row[r], s.sq - 1);
    lse2[r] = sc.lse2[at];
    dsum[r] = sc.dsum[at];
  }
  float acc_dq[D / 8][4];
  zero(acc_dq);
  const Ldsm<D, Frag::A> ldsm_qo(lane);        // Q, dO as A of S, dP
  const Ldsm<D, Frag::B> ldsm_kv(lane);        // K, V as B of S, dP
  const Ldsm<D, Frag::BTrans> ldsm_k_t(lane);  // K as B of dQ
  const uint32_t q_rows = smem_addr(sQ) + 2u * uint32_t(warp * 16 * D);  // this warp's rows
  const uint32_t do_rows = smem_addr(sdO) + 2u * uint32_t(warp * 16 * D);

  if (walk.count > 0) {
    load_tile<D, kThreadsQ, kBrQ>(sQ, q, p.q_row_stride, row0, s.sq, p.head_dim);
    load_tile<D, kThreadsQ, kBrQ>(sdO, d_o, p.o_row_stride, row0, s.sq, p.head_dim);
    load_tile<D, kThreadsQ, kBc>(sK, k, p.k_row_stride, walk.block(0) * kBc, s.sk, p.head_dim);
    load_tile<D, kThreadsQ, kBc>(sV, v, p.v_row_stride, walk.block(0) * kBc, s.sk, p.head_dim);
    cp_async_commit();
  }
  for (int at = 0; at < walk.count; ++at) {
    const int j = walk.block(at), stage = at & 1;
    cp_async_wait<0>();
    __syncthreads();
    if (at + 1 < walk.count) {
      const int key_next = walk.block(at + 1) * kBc;
      load_tile<D, kThreadsQ, kBc>(sK + (stage ^ 1) * kBc * D, k, p.k_row_stride, key_next, s.sk, p.head_dim);
      load_tile<D, kThreadsQ, kBc>(sV + (stage ^ 1) * kBc * D, v, p.v_row_stride, key_next, s.sk, p.head_dim);
      cp_async_commit();
    }
    const uint32_t k_tile = smem_addr(sK + stage * kBc * D), v_tile = smem_addr(sV + stage * kBc * D);

    float s_tiles[1][kBc / 8][4], dp_tiles[1][kBc / 8][4];  // one 16-row tile: S and dP for this warp's rows
    auto& acc_s = s_tiles[0];
    auto& acc_dp = dp_tiles[0];
    zero(acc_s);
    zero(acc_dp);
    mma_pair<T, D / 16>(s_tiles, dp_tiles, ldsm_qo, q_rows, do_rows, ldsm_kv, k_tile, v_tile);
    const Extras<kExtras> ex(p, b, h);  // ALiBi and dropout per (query row, key), with kExtras
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = my_row[e / 2], key = j * kBc + n * 8 + tc + (e & 1);
        prob_grad<kSoftcap, kExtras>(acc_s[n][e], acc_dp[n][e], lse2[e / 2], dsum[e / 2], p,
                                     ex.bias2(row, key, s.sk - s.sq), ex.z(p, row, key));
      }
    if (kMask && walk.list ? walk.listed_partial(at) : blocks.needs_mask(j)) {
      const bool dense = kMask && p.bits.words;  // a dense mask's holes as well
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const BitRow bits = dense ? bit_row(p.bits, b, h, my_row[r], s.sq) : BitRow{nullptr, 0};
#pragma unroll
        for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            const int col = j * kBc + n * 8 + tc + (e & 1);
            if (col < lo[r] || col >= hi[r] || (dense && !bits.visible(col))) acc_dp[n][e] = 0.f;
          }
      }
    }
    // dQ += dS K_j: dS's accumulators are the A operand.
    unroll<kBc / 16>([&](auto kk_) {
      constexpr int kk = decltype(kk_)::value;
      uint32_t a[4];
      c_to_a<T>(a, acc_dp[2 * kk], acc_dp[2 * kk + 1]);  // dS
      unroll<D / 16>([&](auto n_) {
        constexpr int n = decltype(n_)::value;
        uint32_t bk[4];
        ldsm_k_t.template block<n, kk>(bk, k_tile);
        mma_16x16<T>(acc_dq, n, a, bk);
      });
    });
  }

  T* dq = static_cast<T*>(p.dq) + s.q_base + h * p.q_head_stride;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (my_row[r] >= s.sq) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      if (n * 8 >= p.head_dim) break;
      *reinterpret_cast<uint32_t*>(dq + int64_t(my_row[r]) * p.q_row_stride + n * 8 + tc) =
          pack2<T>(acc_dq[n][2 * r] * p.scale, acc_dq[n][2 * r + 1] * p.scale);
    }
  }
}

// ---- 4. dQ fp32 scratch -> dq, times the softmax scale: 8 columns a thread (two 16-byte reads, one
// 16-byte write).
template <int D, typename T>
__global__ void __launch_bounds__(256) convert_dq_kernel(const BackwardParams p) {
  const int h = blockIdx.y, b = blockIdx.z;
  const Sequence s = sequence_of(p, b);
  const float* accum = scratch_of(p).dq_accum;
  T* dq = static_cast<T*>(p.dq) + s.q_base + h * p.q_head_stride;
  const int64_t n = int64_t(s.sq) * (D / 8);  // 8-column chunks of this head's rows
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int row = int(idx / (D / 8)), col = int(idx % (D / 8)) * 8;
    if (col >= p.head_dim) continue;  // a padded head_dim's columns
    const float4* from = reinterpret_cast<const float4*>(accum + ((s.row_base + row) * p.heads_q + h) * p.head_dim + col);
    const float4 lo = from[0], hi = from[1];
    const float c = p.scale;  // dS was summed without it
    *reinterpret_cast<uint4*>(dq + int64_t(row) * p.q_row_stride + col) = make_uint4(
        pack2<T>(lo.x * c, lo.y * c), pack2<T>(lo.z * c, lo.w * c), pack2<T>(hi.x * c, hi.y * c), pack2<T>(hi.z * c, hi.w * c));
  }
}

// ---- launch
template <int D>
struct Config {
  static constexpr TileShape dq = fa2_backward_dq_shape(D);
  static constexpr int kBcQ = dq.block_n;
  static_assert(dq.head_dim == D && dq.warps == kWarpsQ && dq.threads == kThreadsQ && dq.block_m == kBrQ &&
                    dq.stages == 2 && dq.smem_bytes == (2 * kBrQ + 2 * dq.stages * kBcQ) * D * 2,
                "shapes.hpp's fa2_backward_dq_shape must describe dq_kernel");
};

template <typename Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <int D, int kBc, int kBr, typename T, int kKT, int kMinBlocks = 0>
void launch_dkdv(const BackwardParams& p, cudaStream_t stream) {
  constexpr size_t smem = sizeof(KVSmem<D, kBc, kBr, T>);
  const auto kernel = pick_instantiation(p, [](auto cap, auto f) {
    return &dkdv_kernel<D, kBc, kBr, kKT, kMinBlocks, T, decltype(cap)::value, decltype(f)::value>;
  });
  check_block_lists(p.dkdv_blocks, kBr, kBc, "fa2 backward (dK, dV)");
  allow_smem(kernel, smem);
  // Under a mask function the K/V blocks' walks differ (documents follow their lengths): the tiles go
  // longest walk first in L2-sized sections of (batch, kv head) pairs (tile_order.hpp, the order DeviceMask
  // made; a section sized by the Q, dO and fp32 dQ rows its CTAs stream), one grid dimension of all of them.
  const int num_n = (p.seqlen_k + kBc - 1) / kBc;
  dim3 grid(num_n, p.heads_kv, p.batch);
  if (p.fa2_dkdv_deal.lines && p.features() == Features::mask) {
    if (p.fa2_dkdv_deal.len != num_n)
      throw Error("fa2 backward: the mask's K/V block order has " + std::to_string(p.fa2_dkdv_deal.len) +
                  " blocks, the launch " + std::to_string(num_n) + " (made for other tiles)");
    grid = dim3(unsigned(num_n * p.heads_kv * p.batch));
  }
  kernel<<<grid, kThreadsKV, smem, stream>>>(p);
  FLASHLAB_CUDA_LAUNCHED();
}

// The dkdv kernel in the shape fa2_backward_shape gives head dim D on a device with kSmemPerBlock bytes
// of shared memory per block.
template <int D, int kSmemPerBlock, typename T>
void launch_dkdv_for(const BackwardParams& p, cudaStream_t stream) {
  constexpr TileShape s = fa2_backward_shape(D, kSmemPerBlock);
  static_assert(s.head_dim == D && s.threads == kThreadsKV && s.stages == 2 &&
                    sizeof(KVSmem<D, s.block_n, s.block_m, T>) == size_t(s.smem_bytes),
                "shapes.hpp's fa2_backward_shape must describe dkdv_kernel");
  launch_dkdv<D, s.block_n, s.block_m, T, s.mma_tiles>(p, stream);
}

constexpr bool same_tiles(const TileShape& a, const TileShape& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.mma_tiles == b.mma_tiles;
}

// dK and dV (and dQ's atomic sum), in the shape shapes.hpp's fa2_backward_shape picks for this device's
// shared memory. Compiled: the shape it picks with the least shared memory and the one with the most
// (the same at d = 128, where the device is not asked).
template <int D, typename T>
void launch_dkdv_default(const BackwardParams& p, cudaStream_t stream) {
  constexpr int kLeast = 0, kMost = 1 << 30;
  constexpr TileShape least = fa2_backward_shape(D, kLeast), most = fa2_backward_shape(D, kMost);
  if constexpr (same_tiles(least, most)) {
    launch_dkdv_for<D, kMost, T>(p, stream);
  } else {
    const TileShape s = fa2_backward_shape(D, int(max_smem_per_block()));
    if (same_tiles(s, least)) launch_dkdv_for<D, kLeast, T>(p, stream);
    else if (same_tiles(s, most)) launch_dkdv_for<D, kMost, T>(p, stream);
    else throw Error("fa2 backward: fa2_backward_shape chose a dkdv shape that fa2_bwd.cu does not compile");
  }
}

#if defined(FLASHLAB_SHAPE_EXPERIMENTS)
// Experimental dkdv shapes for bf16, picked with FLASHLAB_FA2_BWD_SHAPE=N: a development knob for
// timing them side by side in one process (unset or 0: the default). Compiled only with
// -DFLASHLAB_SHAPE_EXPERIMENTS=ON (gpu/README.md).
template <int D, typename T>
bool launch_dkdv_experiment(const BackwardParams& p, cudaStream_t stream) {
  static const int which = [] {
    const char* e = std::getenv("FLASHLAB_FA2_BWD_SHAPE");
    return e ? std::atoi(e) : 0;
  }();
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    switch (which) {
      case 1: launch_dkdv<D, 64, 64, T, 1>(p, stream); return true;  // v1: one key tile a warp, 64 keys
    }
    if constexpr (D == 64) {
      switch (which) {
        case 2: launch_dkdv<D, 128, 64, T, 2>(p, stream); return true;     // v4-v5: Br = 64
        case 3: launch_dkdv<D, 128, 64, T, 2, 2>(p, stream); return true;  // two CTAs an SM (spills)
      }
    } else if constexpr (D == 128) {
      switch (which) {
        case 3: launch_dkdv<D, 64, 64, T, 2, 2>(p, stream); return true;  // 64 keys, two CTAs an SM
      }
    }
  }
  return false;
}
#endif

template <int D, typename T>
void launch(const BackwardParams& p, cudaStream_t stream) {
  using C = Config<D>;
  // D, LSE2, and a zeroed dQ scratch (atomic path). The largest sequence bounds the grid; CTAs past
  // their entry's length return at once.
  constexpr int kPreRows = 256 / (D / 8);
  preprocess_kernel<D, T><<<dim3((p.seqlen_q + kPreRows - 1) / kPreRows, p.heads_q, p.batch), 256, 0, stream>>>(p);
  FLASHLAB_CUDA_LAUNCHED();

#if defined(FLASHLAB_SHAPE_EXPERIMENTS)
  const bool experiment = launch_dkdv_experiment<D, T>(p, stream);
#else
  const bool experiment = false;
#endif
  if (!experiment) launch_dkdv_default<D, T>(p, stream);

  if (p.deterministic) {
    constexpr size_t q_smem = size_t(2 * kBrQ + 4 * C::kBcQ) * D * sizeof(T);
    static_assert(q_smem == size_t(C::dq.smem_bytes), "dq_kernel's shared memory as shapes.hpp has it");
    const auto dq = pick_instantiation(p, [](auto cap, auto f) {
      return &dq_kernel<D, C::kBcQ, T, decltype(cap)::value, decltype(f)::value>;
    });
    check_block_lists(p.dq_blocks, kBrQ, C::kBcQ, "fa2 backward (deterministic dQ)");
    allow_smem(dq, q_smem);
    dq<<<dim3((p.seqlen_q + kBrQ - 1) / kBrQ, p.heads_q, p.batch), kThreadsQ, q_smem, stream>>>(p);
  } else {
    const int64_t chunks = int64_t(p.seqlen_q) * (D / 8);  // one 8-column chunk a thread, at most 1024 blocks
    convert_dq_kernel<D, T><<<dim3(unsigned(std::min<int64_t>(1024, (chunks + 255) / 256)), p.heads_q, p.batch),
                              256, 0, stream>>>(p);
  }
  FLASHLAB_CUDA_LAUNCHED();
}

template <typename T>
void dispatch_dim(const BackwardParams& p, cudaStream_t stream) {
  switch (fa2_padded_head_dim(p.head_dim)) {
    case 64: return launch<64, T>(p, stream);
    case 128: return launch<128, T>(p, stream);
    case 256: return launch<256, T>(p, stream);
  }
  throw Error("fa2 backward: head_dim " + std::to_string(p.head_dim) + " is not supported");
}

}  // namespace

size_t max_smem_per_block() {
  int dev = 0, bytes = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  FLASHLAB_CUDA(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return size_t(bytes);
}

double l2_cache_bytes() {
  int dev = 0, bytes = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  FLASHLAB_CUDA(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, dev));
  return double(bytes);
}

size_t fa2_backward_scratch_bytes(const BackwardParams& p) {
  const int64_t rows = p.cu_seqlens_q ? p.total_q : int64_t(p.batch) * p.seqlen_q;
  const int64_t per_row = (p.deterministic ? 0 : p.head_dim) + 2;
  return size_t(rows * p.heads_q * per_row) * sizeof(float);
}

void fa2_backward(const BackwardParams& p, cudaStream_t stream) {
  if (!fa2_forward_supports(p))
    throw Error("fa2 backward supports bf16/fp16 with a head_dim that is a multiple of 8 up to 256");
  if (!p.d_o || !p.dq || !p.dk || !p.dv || !p.o || !p.lse || !p.scratch)
    throw Error("fa2 backward: o, lse, d_o, dq, dk, dv and scratch must all be set");
  if (p.cu_seqlens_q && p.total_q <= 0) throw Error("fa2 backward: varlen needs total_q (cu_seqlens_q[batch])");
  if (p.dtype == Dtype::bf16) dispatch_dim<__nv_bfloat16>(p, stream);
  else dispatch_dim<__half>(p, stream);
}

}  // namespace flashlab::gpu
