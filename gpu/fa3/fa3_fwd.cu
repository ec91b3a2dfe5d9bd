// fa3: a FlashAttention-3-style forward for Hopper (sm_90a), bf16 / fp16 in, fp32 accumulate; causal and
// sliding-window masks (bottom-right), softcap, GQA/MQA, seqlen_q != seqlen_k, varlen, LSE out. Head dims
// 64, 128 and 256 (every multiple of 8 up to 256, zero-padded by the copy engine).
//
// The kernel, by role (one CTA per SM, persistent; 3 warpgroups of 128 threads):
//   scheduler  scheduler.cuh: tiles (Q block of Br rows, head, batch) dealt round-robin to the persistent
//              CTAs; under a causal mask a head's longest Q blocks first.
//   producer   warpgroup 0 (one thread issues, the rest of the warpgroup exits after giving back its
//              registers): Q_i by the bulk tensor copy engine (TMA), then K_j and V_j into `stages`
//              128-byte-swizzled buffers, each completing on its own mbarrier; a buffer is refilled
//              when the consumers' arrivals on its "empty" mbarrier say they are done with it.
//   consumer   warpgroups 1 and 2, 64 query rows each: S = Q_i K_j^T by wgmma (both operands from shared
//              memory), softmax on the accumulators in registers, O += P V_j by wgmma with P from
//              registers and V read transposed from shared memory.
//   softmax    gpu/softmax.cuh on the wgmma accumulators (their layout is mma.sync's C fragment a warp):
//              softcap, the edge mask (blocks that cross it), row max, exp2 with the scale folded in, row
//              sums, O's rescale; a row's four lanes reduce by shuffles.
//   epilogue   O_i / l_i and LSE_i from registers to global memory.
//
// Tile shape: shapes.hpp's fa3_forward_shape (`flashlab shapes --algo fa3`).
//
// Version index (bench/gpu_compare.py; NVIDIA H100, bf16, batch x seqlen = 16k, heads x d = 2048; full
// entries in gpu/HISTORY.md):
//   v1  TMA + wgmma, one producer and two consumer warpgroups, two K/V stages, persistent round-robin tiles,
//       no overlap between softmax and the GEMMs yet.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "../cuda_check.hpp"
#include "../kernels.hpp"
#include "../mma.cuh"
#include "../sequence.cuh"
#include "../shapes.hpp"
#include "../softmax.cuh"
#include "ptx.cuh"
#include "scheduler.cuh"
#include "tensor_maps.hpp"
#include "wgmma_ops.cuh"

namespace flashlab::gpu {
namespace {

using namespace fa3;

// A kernel's tile shape: D the (padded) head dim, kBc keys a K/V block, kStages K/V buffers.
template <int D_, int kBc_, int kStages_>
struct Shape {
  static constexpr int D = D_, kBc = kBc_, kStages = kStages_;
  static constexpr int kConsumers = 2;               // consumer warpgroups, 64 query rows each
  static constexpr int kBr = 64 * kConsumers;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kChunks = D / 64;             // 64-column (128-byte) blocks of a row
  static constexpr int kConsumerWarps = 4 * kConsumers;
};

// Shared memory: every tile as 64-column blocks of 128-byte rows, as the copy engine's 128-byte swizzle
// lays them (each block 1024-byte aligned: the swizzle is a function of the address).
template <class S, typename T>
struct Smem {
  T q[S::kChunks][S::kBr][64];
  T k[S::kStages][S::kChunks][S::kBc][64];
  T v[S::kStages][S::kChunks][S::kBc][64];
  uint64_t q_full, q_empty;
  uint64_t k_full[S::kStages], k_empty[S::kStages], v_full[S::kStages], v_empty[S::kStages];
};

// Where a tile's rows start in the (rows, heads, d) views the tensor maps take: batch and sequence
// folded into rows (fixed length), or the packed rows (varlen).
__device__ inline int q_rows_base(const AttentionParams& p, const Sequence& seq, int b) {
  return p.cu_seqlens_q ? seq.q_start : b * p.seqlen_q;
}
__device__ inline int k_rows_base(const AttentionParams& p, const Sequence& seq, int b) {
  return p.cu_seqlens_k ? seq.k_start : b * p.seqlen_k;
}

// ---- producer: one thread of warpgroup 0 feeds every tile's Q and its K/V blocks through the stages.
template <class S, typename T>
__device__ void produce(Smem<S, T>& sm, const AttentionParams& p, const TileScheduler& sched,
                        const CUtensorMap* map_q, const CUtensorMap* map_k, const CUtensorMap* map_v) {
  constexpr int D = S::D, kBc = S::kBc, kBr = S::kBr, kStages = S::kStages;
  constexpr uint32_t kQBytes = kBr * D * sizeof(T), kKVBytes = kBc * D * sizeof(T);
  const int group = p.heads_q / p.heads_kv;
  int it = 0, tile_it = 0;  // K/V blocks and tiles issued so far: the stage and the mbarrier parities
  for (int t = blockIdx.x; t < sched.count(); t += gridDim.x) {
    const Tile tile = sched.at(t);
    const Sequence seq = sequence_of(p, tile.batch);
    const int row0 = tile.m_block * kBr;
    if (row0 >= seq.sq) continue;
    const auto blocks = key_blocks<kBr, kBc>(row0, seq.sq, seq.sk, p.window_left, p.window_right);
    const int kv_head = tile.head / group, k_rows = k_rows_base(p, seq, tile.batch);

    mbar_wait(&sm.q_empty, (tile_it & 1) ^ 1);  // the previous tile's last S = Q K^T is done
    mbar_arrive_expect_tx(&sm.q_full, kQBytes);
#pragma unroll
    for (int c = 0; c < S::kChunks; ++c)
      tma_load_3d(&sm.q[c][0][0], map_q, &sm.q_full, c * 64, q_rows_base(p, seq, tile.batch) + row0, tile.head);
    for (int j = blocks.begin; j < blocks.end; ++j, ++it) {
      const int s = it % kStages, parity = (it / kStages) & 1;
      mbar_wait(&sm.k_empty[s], parity ^ 1);
      mbar_arrive_expect_tx(&sm.k_full[s], kKVBytes);
#pragma unroll
      for (int c = 0; c < S::kChunks; ++c)
        tma_load_3d(&sm.k[s][c][0][0], map_k, &sm.k_full[s], c * 64, k_rows + j * kBc, kv_head);
      mbar_wait(&sm.v_empty[s], parity ^ 1);
      mbar_arrive_expect_tx(&sm.v_full[s], kKVBytes);
#pragma unroll
      for (int c = 0; c < S::kChunks; ++c)
        tma_load_3d(&sm.v[s][c][0][0], map_v, &sm.v_full[s], c * 64, k_rows + j * kBc, kv_head);
    }
    ++tile_it;
  }
}

// ---- consumer: warpgroup `wg` (0 or 1 among the consumers) computes rows [64 wg, 64 wg + 64) of each tile.
template <class S, typename T, bool kSoftcap>
__device__ void consume(Smem<S, T>& sm, const AttentionParams& p, const TileScheduler& sched, int wg) {
  constexpr int D = S::D, kBc = S::kBc, kBr = S::kBr, kStages = S::kStages;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int qrow = lane / 4, qcol = (lane % 4) * 2;
  const float c = kSoftcap ? mma::kLog2e : p.scale * mma::kLog2e;  // scores -> log2 units
  int it = 0, tile_it = 0;
  for (int t = blockIdx.x; t < sched.count(); t += gridDim.x) {
    const Tile tile = sched.at(t);
    const Sequence seq = sequence_of(p, tile.batch);
    const int sq = seq.sq, sk = seq.sk, row0 = tile.m_block * kBr;
    if (row0 >= sq) continue;
    const auto blocks = key_blocks<kBr, kBc>(row0, sq, sk, p.window_left, p.window_right);

    float acc_o[D / 8][4];
    mma::zero(acc_o);
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
    int lo[2], hi[2];  // the key columns each of this thread's two rows sees
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + wg * 64 + warp * 16 + qrow + 8 * r;
      lo[r] = col_begin(row, sq, sk, p.window_left);
      hi[r] = col_end(row, sq, sk, p.window_right);
    }

    mbar_wait(&sm.q_full, tile_it & 1);
    for (int j = blocks.begin; j < blocks.end; ++j, ++it) {
      const int s = it % kStages, parity = (it / kStages) & 1;

      // S = Q_i K_j^T: D / 16 wgmmas of 16 columns of the head dim, a 128-byte row block every four.
      float acc_s[kBc / 8][4];
      mbar_wait(&sm.k_full[s], parity);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t off = (kk % 4) * 32;  // bytes into the 128-byte swizzled row
        const uint64_t a = sw128_desc(smem_u32(&sm.q[kk / 4][wg * 64][0]) + off, 16, 1024);
        const uint64_t b = sw128_desc(smem_u32(&sm.k[s][kk / 4][0][0]) + off, 16, 1024);
        mma_ss<kBc, T>(acc_s, a, b, kk > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc_s);
      if (lane == 0) mbar_arrive(&sm.k_empty[s]);  // this warp is done with K_j

      if constexpr (kSoftcap) softmax::softcap(acc_s, p.softcap, p.scale / p.softcap);
      if (blocks.needs_mask(j)) softmax::mask(acc_s, j * kBc, qcol, lo, hi);
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m = softmax::row_max(acc_s, r, row_max[r]);
        const float m_c = softmax::scaled_max(m, c);
        alpha[r] = mma::exp2_fast(row_max[r] * c - m_c);
        row_max[r] = m;
        row_sum[r] = row_sum[r] * alpha[r] + softmax::exp2_row(acc_s, r, c, m_c);
      }
      softmax::rescale(acc_o, alpha);
      uint32_t pa[kBc / 16][4];  // P~ as the A operand: two adjacent 8-key accumulator blocks a 16-key step
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) mma::c_to_a<T>(pa[kk], acc_s[2 * kk], acc_s[2 * kk + 1]);

      // O += P~ V_j: Bc / 16 wgmmas of 16 keys; V is read N-major (its rows are the head dim).
      mbar_wait(&sm.v_full[s], parity);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        const uint64_t b = sw128_desc(smem_u32(&sm.v[s][0][kk * 16][0]), kBc * 128, 1024);
        mma_rs_bt<D, T>(acc_o, pa[kk], b, 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc_o);
      if (lane == 0) mbar_arrive(&sm.v_empty[s]);
    }
    if (lane == 0) mbar_arrive(&sm.q_empty);  // this warp's last S = Q K^T is done
    ++tile_it;

    // Epilogue: O_i = diag(l_i)^-1 O_i, LSE_i = m_i ln 2 + ln l_i, rows past sq and padded columns left out.
    T* o = static_cast<T*>(p.o) + seq.o_base + int64_t(tile.head) * p.o_head_stride;
    float* lse = p.lse + seq.row_array(tile.head, tile.batch, p);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = softmax::quad_sum(row_sum[r]);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int row = row0 + wg * 64 + warp * 16 + qrow + 8 * r;
      if (row >= sq) continue;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        if (n * 8 >= p.head_dim) break;
        *reinterpret_cast<uint32_t*>(o + int64_t(row) * p.o_row_stride + n * 8 + qcol) =
            mma::pack2<T>(acc_o[n][2 * r] * inv, acc_o[n][2 * r + 1] * inv);
      }
      if (lane % 4 == 0) lse[row] = softmax::lse(row_max[r], c, l);
    }
  }
}

// ---- the kernel: set up the mbarriers, split the warpgroups into their roles.
constexpr int kProducerRegs = 24, kConsumerRegs = 240;  // 128 x 24 + 256 x 240 <= 64K registers an SM

template <class S, typename T, bool kSoftcap>
__global__ void __launch_bounds__(S::kThreads, 1)
    fa3_forward_kernel(const __grid_constant__ AttentionParams p, const __grid_constant__ CUtensorMap map_q,
                       const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                       const TileScheduler sched) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a only: other targets compile an empty kernel, never launched
  extern __shared__ unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<Smem<S, T>*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    tma_prefetch_map(&map_q);
    tma_prefetch_map(&map_k);
    tma_prefetch_map(&map_v);
    mbar_init(&sm.q_full, 1);
    mbar_init(&sm.q_empty, S::kConsumerWarps);
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(&sm.k_full[s], 1);
      mbar_init(&sm.v_full[s], 1);
      mbar_init(&sm.k_empty[s], S::kConsumerWarps);
      mbar_init(&sm.v_empty[s], S::kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    regs_dealloc<kProducerRegs>();
    if (threadIdx.x == 0) produce(sm, p, sched, &map_q, &map_k, &map_v);
  } else {
    regs_alloc<kConsumerRegs>();
    consume<S, T, kSoftcap>(sm, p, sched, wg - 1);
  }
#endif
}

// The shape of each compiled head dim is shapes.hpp's fa3_forward_shape.
template <int D>
struct DefaultOf {
  static constexpr TileShape s = fa3_forward_shape(D);
  using type = Shape<D, s.block_n, s.stages>;
  static_assert(s.head_dim == D && type::kBr == s.block_m && type::kThreads == s.threads,
                "fa3_forward_shape(D) must be a shape of this file's kernel");
  static_assert(sizeof(Smem<type, __nv_bfloat16>) + 1024 <= size_t(s.smem_bytes),
                "shapes.hpp's shared memory must cover the kernel's (with its 1024-byte alignment)");
  static constexpr size_t smem = s.smem_bytes;
};

int sm_count() {
  static const int n = [] {
    int dev = 0, count = 0;
    FLASHLAB_CUDA(cudaGetDevice(&dev));
    FLASHLAB_CUDA(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev));
    return count;
  }();
  return n;
}

template <int D, typename T>
void launch(const AttentionParams& p, cudaStream_t stream) {
  using S = typename DefaultOf<D>::type;
  constexpr size_t smem = DefaultOf<D>::smem;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t q_rows = varlen ? p.total_q : int64_t(p.batch) * p.seqlen_q;
  const int64_t k_rows = varlen ? p.total_k : int64_t(p.batch) * p.seqlen_k;
  const CUtensorMap map_q = rows_heads_map(p.q, q_rows, p.heads_q, p.head_dim, p.q_row_stride, p.q_head_stride, S::kBr);
  const CUtensorMap map_k = rows_heads_map(p.k, k_rows, p.heads_kv, p.head_dim, p.k_row_stride, p.k_head_stride, S::kBc);
  const CUtensorMap map_v = rows_heads_map(p.v, k_rows, p.heads_kv, p.head_dim, p.v_row_stride, p.v_head_stride, S::kBc);
  const bool causal = p.window_right == 0 && p.window_left < 0;
  const TileScheduler sched{(p.seqlen_q + S::kBr - 1) / S::kBr, p.heads_q, p.batch, causal};
  auto kernel = p.softcap > 0.f ? fa3_forward_kernel<S, T, true> : fa3_forward_kernel<S, T, false>;
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int grid = std::min(sched.count(), sm_count());
  kernel<<<grid, S::kThreads, smem, stream>>>(p, map_q, map_k, map_v, sched);
  FLASHLAB_CUDA_LAUNCHED();
}

template <typename T>
void dispatch_dim(const AttentionParams& p, cudaStream_t stream) {
  switch (fa3_padded_head_dim(p.head_dim)) {
    case 64: return launch<64, T>(p, stream);
    case 128: return launch<128, T>(p, stream);
    case 256: return launch<256, T>(p, stream);
  }
  throw Error("fa3 forward: head_dim " + std::to_string(p.head_dim) + " is not supported");
}

}  // namespace

std::string fa3_forward_unsupported(const AttentionParams& p) {
  if (p.dtype == Dtype::fp32) return "fp32 (fa3 runs bf16 and fp16)";
  if (fa3_padded_head_dim(p.head_dim) == 0) return "head_dim " + std::to_string(p.head_dim) + " (" + kFa3HeadDims + ")";
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return "no CUDA device";
  if (major != 9 || minor != 0)
    return "compute capability " + std::to_string(major) + "." + std::to_string(minor) +
           " (fa3 needs sm_90a: wgmma and the bulk tensor copy engine exist only on Hopper)";
  if (p.cu_seqlens_q && (p.total_q <= 0 || p.total_k <= 0)) return "varlen without total_q / total_k";
  const bool folded = p.cu_seqlens_q != nullptr ||
                      (p.q_batch_stride == int64_t(p.seqlen_q) * p.q_row_stride &&
                       p.k_batch_stride == int64_t(p.seqlen_k) * p.k_row_stride &&
                       p.v_batch_stride == int64_t(p.seqlen_k) * p.v_row_stride);
  if (!folded) return "batch strides other than seqlen x row stride (fa3 folds batch and sequence into rows)";
  return "";
}

void fa3_forward(const AttentionParams& p, cudaStream_t stream) {
  const std::string why = fa3_forward_unsupported(p);
  if (!why.empty()) throw Error("fa3 forward: unsupported: " + why);
  if (p.dtype == Dtype::bf16) dispatch_dim<__nv_bfloat16>(p, stream);
  else dispatch_dim<__half>(p, stream);
}

}  // namespace flashlab::gpu
