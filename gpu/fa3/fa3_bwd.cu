// fa3: a FlashAttention-3-style backward for Hopper (sm_90a), bf16 / fp16 in, fp32 accumulate; causal and
// sliding-window masks (bottom-right) with tile skipping, softcap, GQA/MQA (dK and dV summed over a kv
// head's query heads inside the CTA), seqlen_q != seqlen_k, varlen. Head dims up to 256 (multiples of 8,
// zero-padded to 64, 128 or 256 by the copy engine). dQ by bulk reductions (cp.reduce.async.bulk) into an
// fp32 scratch, or, deterministic, the same reductions in a fixed order of the K/V blocks; at d = 256 by
// float4 atomics from the consumers' registers (deterministic: each consumer's in that order). The
// interval mask functions (prefix-LM, document, chunked; params.hpp mask_lo / mask_hi, fixed-length
// batches) in a kMask instantiation; a dense mask, ALiBi and dropout are fa2's backward's only.
//
// Three kernels, in launch order, by role:
//   preprocess  a CTA a Q block of (head, entry): D = rowsum(dO o O) and LSE2 = LSE log2 e into the padded
//               scratch (bwd_smem.cuh BwdScratch; rows past the entry's end LSE2 = +inf, D = 0), the
//               block's dQ scratch and semaphore zeroed.
//   main        one CTA a (K/V block of 128 keys, 64 at d = 256, kv head, batch entry); a producer and two
//               consumer warpgroups (setmaxnreg 24 / 240):
//     scheduler   the grid itself, and bwd_smem.cuh BwdWalk: the Q blocks whose rows see the CTA's keys
//                 (rows_seeing: causal and window blocks skipped; under a mask function 32-ary searches
//                 of its row intervals by each warp, sequence.cuh rows_seeing_by_warp), for each query
//                 head of the group.
//     producer    bwd_producer.cuh, warpgroup 0's first warp (one lane issues): K_j and V_j once, then Q_i,
//                 dO_i (TMA) and the rows' LSE2 and D (bulk copies) through two stages.
//     consumers   bwd_consumer.cuh: S^T, dP^T, dV, dK and dQ by wgmma (64 keys each), P^T and dS^T in
//                 registers; dK and dV in registers to the end (the epilogue scales dK and stores both).
//                 At d = 256 bwd_consumer_split.cuh: both take the CTA's 64 keys and half the head dim of
//                 dK and dV, S^T and dP^T for half the Q block's rows, and trade P^T and dS^T halves
//                 through shared memory; each adds its dQ into the scratch by atomics.
//     dQ writer   bwd_dq_writer.cuh, warpgroup 0's second warp: each step's dQ from shared memory into the
//                 scratch by one bulk reduction (deterministic: after the K/V blocks before it); not at
//                 d = 256, where a step's fp32 dQ (64 KiB) does not fit beside two stages of Q and dO;
//                 there, deterministic, warps 1 and 2 keep the consumers' turns (keep_dq_turns).
//   convert     a CTA a Q block: the scratch's dQ (the consumers' accumulator order) times the scale -> dq.
//
// Tile shape: shapes.hpp's fa3_backward_shape (`flashlab shapes --algo fa3 --pass bwd`).
//
// Where it stands (bf16, batch x seqlen = 16k, heads x d = 2048, s = 1k-16k, forward (fa3) + backward against
// SDPA's cuDNN backend timed in the same process): NVIDIA H100 80GB HBM3, 2026-12-07, backward v15 with forward v23,
// two runs (bench/results/gpu-h100-2026-12-07-fa3-v23-fwdbwd.csv, -v23-run2-fwdbwd.csv): d = 64 1.00-1.11x (causal
// 1.03-1.11x), d = 128 0.97-1.05x (causal 0.97-1.06x), d = 256 1.08-1.14x (causal 0.99-1.09x); deterministic against
// atomic (gpu-h100-2026-12-07-fa3-bwd-v15-deterministic.csv) d = 64 0.92-1.13x, d = 128 0.90-1.06x, d = 256
// 0.84-1.04x (s = 1k without a mask 0.844). NVIDIA H200, 2026-11-29, backward v15 with forward v23
// (bench/results/gpu-h200-2026-11-29-fa3-v23-fwdbwd.csv): d = 64 0.99-1.10x (causal 1.04-1.12x), d = 128
// 0.95-1.06x (causal 0.95-1.05x; s = 1k the shortest, where the kernels' device times are 1.00-1.01x cuDNN's and
// the loss follows do_bench's dirty L2 flush: gpu/HISTORY.md), d = 256 1.06-1.14x (causal 1.03-1.11x); the
// deterministic backward against the atomic one (gpu-h200-2026-11-29-fa3-bwd-v15-deterministic.csv) d = 64
// 0.97-1.08x, d = 128 0.93-1.06x, d = 256 0.86-0.94x. H200 and H100 times are not comparable.
//
// Version index: each step and what it measured (bench/gpu_compare.py --passes fwd+bwd; A/B in one process,
// both orders where marked). Every entry in full, with its runs and the steps tried and not kept: gpu/HISTORY.md.
//   v1  the structure above, one CTA a K/V block, no overlap inside a warpgroup. H100, 2026-11-23 (v3's sweep):
//       forward + backward 0.77-0.97x cuDNN at d <= 128; deterministic 0.82-1.14x the atomic backward.
//   v2  d = 64: P^T's exponentials under dP^T's GEMM: +1.5% to +4.9%.
//   v3  dK and dV out through shared memory with 16-byte stores: s = 1k +1.9% to +4.9%.
//   v4  interval mask functions (kMask): prefix-LM 1.08-1.24x density x unmasked, documents 1.31-1.72x.
//   v5  k-step descriptors made where issued (ptx.cuh fresh): d = 64's loop without spills; 0.987-1.029x a cell.
//   v6  a mask function's K/V block rows by a 32-ary search a warp: masked 0.99-1.07x.
//   v7  d = 256: 64 keys a CTA, the head dim split between the consumers, dQ by float4 atomics: 0.95-1.06x
//       cuDNN, causal 0.85-1.00x (H100, 2026-11-27); before it d = 256 ran fa2's backward.
//   v8  the dQ conversion through shared memory (3x faster): +7% to +18% at s = 1k.
//   v9  d <= 128: dV's, dQ's, then dK's GEMM, the step's dQ to shared memory under dK's: +1.3% to +3.5% (both orders).
//   v10 the consumer index broadcast from lane 0: d = 256 +1.3% to +4.8% (both orders).
//   v11 the deterministic order as a pipeline (a head's K/V blocks launched from the last, each walking from
//       its first), d = 256's turns kept by warps of the producer warpgroup: deterministic against atomic
//       d = 256 0.78-0.90x (was 0.65-0.74x).
//   v12 rotated deterministic walks without a mask (tile_order.hpp rotated_turn_rank): d = 256 0.88-0.94x.
//   v13 d = 256's turn keepers let the consumers into a free next turn before the release: causal 0.87-0.91x
//       (the issue's 0.85 on every cell of that H100 run, 2026-11-28).
//   v14 a masked tile's verdicts taken under its S^T and dP^T wgmmas: the mask kernel's step at d = 128 23.0 ->
//       21.9 ns (NVIDIA H200, 2026-11-28).
//   v15 d <= 128: a step's dQ GEMM by one consumer, the two taking turns, so that their softmaxes no longer
//       coincide (cuDNN's order, read from its SASS): +3.1% to +6.0% a cell, masked +3.5% to +9.9% (both
//       orders, NVIDIA H200, 2026-11-29).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "../cuda_check.hpp"
#include "../kernels.hpp"
#include "../shapes.hpp"
#include "bwd_consumer.cuh"
#include "bwd_consumer_split.cuh"
#include "bwd_producer.cuh"
#include "tensor_maps.hpp"

namespace flashlab::gpu {
namespace {

using namespace fa3;

BwdScratch scratch_of(const BackwardParams& p, int br, int d) {
  BwdScratch sc;
  sc.blocks = padded_q_blocks(p, br);
  const int64_t rows = int64_t(p.heads_q) * sc.blocks * br;
  float* base = static_cast<float*>(p.scratch);
  sc.lse2 = base;
  sc.dsum = base + rows;
  sc.dq_accum = base + 2 * rows;
  sc.sem = p.deterministic ? reinterpret_cast<int*>(base + 2 * rows + rows * d) : nullptr;
  return sc;
}

// ---- 1. preprocess: a CTA of 256 threads a Q block; each thread takes 8 columns of a row (16-byte loads),
// D / 8 threads a row.
template <class S, typename T>
__global__ void __launch_bounds__(256) bwd_preprocess_kernel(const BackwardParams p, const BwdScratch sc) {
  constexpr int D = S::D, kBr = S::kBr, kLanes = D / 8, kRows = 256 / kLanes;
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const Sequence s = sequence_of(p, b);
  if (i * kBr >= s.sq) return;
  const int64_t block = int64_t(h) * sc.blocks + block_start<kBr>(p, b) + i;
  const int c = (threadIdx.x % kLanes) * 8;
  for (int r = threadIdx.x / kLanes; r < kBr; r += kRows) {
    const int row = i * kBr + r;
    const bool in = row < s.sq && c < p.head_dim;
    float acc = 0.f;
    if (in) {
      const int64_t at = s.o_base + int64_t(row) * p.o_row_stride + int64_t(h) * p.o_head_stride + c;
      const uint4 x = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.o) + at);
      const uint4 y = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.d_o) + at);
      const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 a = mma::unpack2<T>(xs[e]), d = mma::unpack2<T>(ys[e]);
        acc += a.x * d.x + a.y * d.y;
      }
    }
#pragma unroll
    for (int off = kLanes / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffff, acc, off);  // the row's lanes
    if (c == 0) {
      float lse2 = INFINITY;  // rows past the end, and rows that see no key: P = 0
      if (row < s.sq) {
        const float lse = p.lse[s.row_array(h, b, p) + row];
        lse2 = lse == -INFINITY ? INFINITY : lse * mma::kLog2e;
      }
      sc.lse2[block * kBr + r] = lse2;
      sc.dsum[block * kBr + r] = row < s.sq ? acc : 0.f;
    }
  }
  float4* accum = reinterpret_cast<float4*>(sc.dq_accum + block * S::kDqFloats);
  for (int f = threadIdx.x; f < S::kDqFloats / 4; f += 256) accum[f] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (sc.sem && threadIdx.x < S::kSems) sc.sem[block * S::kSems + threadIdx.x] = 0;
}

// ---- 2. dK, dV and dQ's reductions: set up the mbarriers, split the warpgroups into their roles.
template <class S, typename T, bool kSoftcap, bool kDeterministic, bool kMask>
__global__ void __launch_bounds__(S::kThreads, 1)
    fa3_backward_kernel(const __grid_constant__ BackwardParams p, const __grid_constant__ CUtensorMap map_q,
                        const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                        const __grid_constant__ CUtensorMap map_do, const BwdScratch sc) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a only: other targets compile an empty kernel, never launched
  extern __shared__ unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<BwdSmemOf<S, T>*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // Deterministic: a head's K/V blocks launched from the last, the order of their turns (bwd_dq_writer.cuh).
  const int j = kDeterministic ? gridDim.x - 1 - blockIdx.x : blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const Sequence seq = sequence_of(p, b);
  if (j * S::kBc >= seq.sk) return;  // varlen: a K/V block past this entry's keys (the whole CTA leaves)
  const RowMask rm = row_mask<kMask>(p, seq, b);  // kMask: a mask function's row intervals; else the window
  BwdWalk<S::kBr, S::kBc> walk(p, seq, j, g, rm, std::bool_constant<kMask>{});
  if (kDeterministic && sc.rotate) walk.rotate(j);  // tile_order.hpp rotated_turn_rank
  const int wg = warp_uniform_index(128);
  if (threadIdx.x == 0) {
    tma_prefetch_map(&map_q);
    tma_prefetch_map(&map_k);
    tma_prefetch_map(&map_v);
    tma_prefetch_map(&map_do);
    mbar_init(&sm.kv_full, 1);
    for (int st = 0; st < S::kStages; ++st) mbar_init(&sm.full[st], 1);
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    regs_dealloc<S::kProducerRegs>();
    const int warp = threadIdx.x / 32;
    if (warp == 0) produce_bwd<S, T>(sm, p, sc, seq, walk, j, g, b, &map_q, &map_k, &map_v, &map_do);
    if constexpr (!S::kSplitD) {
      if (warp == 1) write_dq<S, T, kDeterministic, kMask>(sm, p, sc, seq, walk, rm, j, b);
    } else if constexpr (kDeterministic) {  // d = 256: the consumers add their dQ by atomics, no writer
      if (warp == 1 || warp == 2) keep_dq_turns<S, kMask>(p, sc, seq, walk, rm, j, b, warp - 1);
    }
  } else {
    regs_alloc<S::kConsumerRegs>();
    if constexpr (S::kSplitD)
      consume_bwd_split<S, T, kSoftcap, kDeterministic, kMask>(sm, p, sc, seq, walk, rm, j, g, b, wg - 1);
    else consume_bwd<S, T, kSoftcap, kMask>(sm, p, seq, walk, rm, j, g, wg - 1);
  }
#endif
}

// ---- 3. dq = scale x the scratch's dQ, a CTA of 256 threads a Q block: each float4 of the consumers'
// accumulator order (bwd_smem.cuh dq_place) read in turn, scaled and rounded into a shared-memory tile of
// the block's rows, which then goes out in 16-byte chunks of whole rows. (Written straight from the
// accumulator order, a warp's stores were 4-byte pieces of 8 rows: 0.22 ms for 16k tokens x 2048 at
// every length on an H100, against cuDNN's 0.075 for the same conversion.) The rows are padded by 16
// bytes so that the 8 rows a warp writes at once fall on different banks. `wide`: dq's base and strides
// are 16-byte aligned (else 4-byte stores, as before).
template <class S, typename T>
__global__ void __launch_bounds__(256) bwd_convert_kernel(const BackwardParams p, const BwdScratch sc, bool wide) {
  constexpr int kBr = S::kBr, D = S::D, kRow = D + 8;
  __shared__ alignas(16) T tile[kBr * kRow];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const Sequence s = sequence_of(p, b);
  if (i * kBr >= s.sq) return;
  const float4* accum =
      reinterpret_cast<const float4*>(sc.dq_accum + (int64_t(h) * sc.blocks + block_start<kBr>(p, b) + i) * S::kDqFloats);
  T* dq = static_cast<T*>(p.dq) + s.q_base + int64_t(h) * p.q_head_stride;
  for (int f = threadIdx.x; f < S::kDqFloats / 4; f += 256) {
    const DqPlace at = dq_place<S>(f);
    const float4 v = accum[f];
    *reinterpret_cast<uint32_t*>(&tile[at.row * kRow + at.col]) = mma::pack2<T>(v.x * p.scale, v.y * p.scale);
    *reinterpret_cast<uint32_t*>(&tile[(at.row + 8) * kRow + at.col]) = mma::pack2<T>(v.z * p.scale, v.w * p.scale);
  }
  __syncthreads();
  const int rows = min(kBr, s.sq - i * kBr);
  if (wide) {
    for (int c = threadIdx.x; c < rows * (D / 8); c += 256) {
      const int r = c / (D / 8), col = (c % (D / 8)) * 8;
      if (col < p.head_dim)  // a padded head dim's columns are not stored
        *reinterpret_cast<uint4*>(dq + int64_t(i * kBr + r) * p.q_row_stride + col) =
            *reinterpret_cast<const uint4*>(&tile[r * kRow + col]);
    }
  } else {
    for (int c = threadIdx.x; c < rows * (D / 2); c += 256) {
      const int r = c / (D / 2), col = (c % (D / 2)) * 2;
      if (col < p.head_dim)
        *reinterpret_cast<uint32_t*>(dq + int64_t(i * kBr + r) * p.q_row_stride + col) =
            *reinterpret_cast<const uint32_t*>(&tile[r * kRow + col]);
    }
  }
}

// ---- launch
// Deterministic: whether the CTAs' walks rotate (tile_order.hpp rotates_walks).
template <class Kernel>
bool rotate_walks(const BackwardParams& p, Kernel kernel, int blocks_kv, int threads, size_t smem) {
  const bool every_place = !p.mask_lo && p.window_left < 0 && p.window_right < 0;
  if (!every_place) return false;
  int per_sm = 0;
  FLASHLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return rotates_walks(every_place, blocks_kv, (long long)per_sm * device_attribute(cudaDevAttrMultiProcessorCount));
}

template <int D, typename T>
void launch(const BackwardParams& p, cudaStream_t stream) {
  constexpr TileShape shape = fa3_backward_shape(D);
  using S = BwdShape<D, shape.block_m, shape.block_n>;
  static_assert(shape.head_dim == D && shape.block_n == S::kBc && shape.threads == S::kThreads &&
                    shape.stages == S::kStages,
                "fa3_backward_shape(D) must be a shape of this file's kernel");
  static_assert(sizeof(BwdSmemOf<S, __nv_bfloat16>) + 1024 <= size_t(shape.smem_bytes),
                "shapes.hpp's shared memory must cover the kernel's (with its 1024-byte alignment)");
  constexpr size_t smem = shape.smem_bytes;
  BwdScratch sc = scratch_of(p, S::kBr, D);
  const dim3 q_blocks((p.seqlen_q + S::kBr - 1) / S::kBr, p.heads_q, p.batch);
  bwd_preprocess_kernel<S, T><<<q_blocks, 256, 0, stream>>>(p, sc);
  FLASHLAB_CUDA_LAUNCHED();

  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t q_rows = varlen ? p.total_q : int64_t(p.batch) * p.seqlen_q;
  const int64_t k_rows = varlen ? p.total_k : int64_t(p.batch) * p.seqlen_k;
  const CUtensorMap map_q = rows_heads_map(p.q, q_rows, p.heads_q, p.head_dim, p.q_row_stride, p.q_head_stride, S::kBr);
  const CUtensorMap map_do =
      rows_heads_map(p.d_o, q_rows, p.heads_q, p.head_dim, p.o_row_stride, p.o_head_stride, S::kBr);
  const CUtensorMap map_k = rows_heads_map(p.k, k_rows, p.heads_kv, p.head_dim, p.k_row_stride, p.k_head_stride, S::kBc);
  const CUtensorMap map_v = rows_heads_map(p.v, k_rows, p.heads_kv, p.head_dim, p.v_row_stride, p.v_head_stride, S::kBc);
  // kMask: a mask function's row intervals (fa3_backward_unsupported refuses dense masks, ALiBi, dropout).
  const auto pick = [&](auto cap, auto mask) {
    return p.deterministic ? &fa3_backward_kernel<S, T, decltype(cap)::value, true, decltype(mask)::value>
                           : &fa3_backward_kernel<S, T, decltype(cap)::value, false, decltype(mask)::value>;
  };
  const auto with = [&](auto cap) {
    return p.mask_lo ? pick(cap, std::true_type{}) : pick(cap, std::false_type{});
  };
  const auto kernel = p.softcap > 0.f ? with(std::true_type{}) : with(std::false_type{});
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid((p.seqlen_k + S::kBc - 1) / S::kBc, p.heads_kv, p.batch);
  sc.rotate = p.deterministic && rotate_walks(p, kernel, grid.x, S::kThreads, smem);
  kernel<<<grid, S::kThreads, smem, stream>>>(p, map_q, map_k, map_v, map_do, sc);
  FLASHLAB_CUDA_LAUNCHED();

  const bool wide = reinterpret_cast<uintptr_t>(p.dq) % 16 == 0 && p.q_row_stride % 8 == 0 &&
                    p.q_head_stride % 8 == 0 && (p.cu_seqlens_q || p.q_batch_stride % 8 == 0);
  bwd_convert_kernel<S, T><<<q_blocks, 256, 0, stream>>>(p, sc, wide);
  FLASHLAB_CUDA_LAUNCHED();
}

template <typename T>
void dispatch_dim(const BackwardParams& p, cudaStream_t stream) {
  switch (fa3_padded_head_dim(p.head_dim)) {
    case 64: return launch<64, T>(p, stream);
    case 128: return launch<128, T>(p, stream);
    case 256: return launch<256, T>(p, stream);
  }
  throw Error("fa3 backward: head_dim " + std::to_string(p.head_dim) + " is not supported");
}

}  // namespace

std::string fa3_backward_unsupported(const BackwardParams& p) {
  if (const std::string why = fa3_forward_unsupported(p); !why.empty()) return why;
  if (!fa3_backward_shape(p.head_dim).supported())
    return "head_dim " + std::to_string(p.head_dim) + " (the fa3 backward takes multiples of 8 up to 256)";
  if (p.features() == Features::extras) return "ALiBi and dropout (fa2's backward has them)";
  if (p.bits.words) return "a dense mask (fa2's backward takes it; fa3's takes the interval masks: prefix-LM, "
                           "document, chunked)";
  if (p.mask_lo && p.cu_seqlens_q) return "a mask function with varlen (fa3 takes masks on fixed-length batches)";
  if (p.o_batch_stride != int64_t(p.seqlen_q) * p.o_row_stride && !p.cu_seqlens_q)
    return "an O / dO batch stride other than seqlen x row stride (fa3 folds batch and sequence into rows)";
  return "";
}

size_t fa3_backward_scratch_bytes(const BackwardParams& p) {
  const TileShape s = fa3_backward_shape(p.head_dim);
  if (!s.supported()) return 0;
  const int64_t blocks = padded_q_blocks(p, s.block_m) * p.heads_q;
  const int64_t floats = blocks * s.block_m * (2 + s.head_dim);
  constexpr TileShape split = fa3_backward_shape(256);
  const int sems = fa3_backward_splits_head_dim(s.head_dim) ? BwdShape<256, split.block_m, split.block_n>::kSems : 1;
  return size_t(floats) * sizeof(float) + (p.deterministic ? size_t(blocks) * sems * sizeof(int) : 0);
}

void fa3_backward(const BackwardParams& p, cudaStream_t stream) {
  const std::string why = fa3_backward_unsupported(p);
  if (!why.empty()) throw Error("fa3 backward: unsupported: " + why);
  if (!p.d_o || !p.dq || !p.dk || !p.dv || !p.o || !p.lse || !p.scratch)
    throw Error("fa3 backward: o, lse, d_o, dq, dk, dv and scratch must all be set");
  if (p.dtype == Dtype::bf16) dispatch_dim<__nv_bfloat16>(p, stream);
  else dispatch_dim<__half>(p, stream);
}

}  // namespace flashlab::gpu
