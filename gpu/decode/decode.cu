// decode: KV-cache decoding on tensor cores (sm_80+), as flash_attn_with_kvcache does it: rotary and
// append into the cache in place, then flash-decoding (the keys split over CTAs, each writing a partial
// O and LSE, and a combine that merges them with the online-softmax rule). bf16 / fp16, head dims as fa2
// (multiples of 8 up to 256, zero-padded), contiguous or paged caches (a block table), GQA with the
// query heads of a kv head packed into one tile, causal (bottom-right), softcap, LSE out.
//
// Three kernels, in launch order, by role:
//   append     (new_len > 0) one thread a (entry, new row, kv head, 8 dims): K_new rotated at position
//              cache_seqlens + t and V_new written into the cache rows the block table gives them;
//              the queries rotated at their positions into scratch (flash-attn's convention: every
//              query of a non-causal call sits at cache_seqlens).
//   split      scheduler: one CTA per (16 packed query rows, split, kv head, batch). A kv head's rows
//                are its group's query heads times q_len (row r: query r / group of head g group +
//                r % group), so one K/V block read from the cache feeds every query head that shares it.
//                Split s takes the key blocks [s n, (s + 1) n) of the entry, n = ceil(blocks / splits).
//              producer: each warp gathers its own 32-key blocks of K and V (blocks w, w + 4, ... of the
//                split) through the block table with cp.async, zero-filling keys past the entry's
//                length, two stages at d <= 128 (one at 256).
//              consumer: per warp, S = Q K^T and O += P~ V with mma.sync m16n8k16 (mma.cuh), the online
//                softmax on the accumulators (softmax.cuh), the causal edge and the entry's end masked.
//              epilogue: the four warps' (m, l, O) merge through shared memory; O / l and LSE go to the
//                outputs (one split) or to the split's partial (fp32) in scratch.
//   combine    (num_splits > 1) one warp a (entry, query, head): LSE = log sum_s exp(LSE_s),
//              O = sum_s exp(LSE_s - LSE) O_s, the weights computed once a row, the sums unrolled.
//
// Version index (checks: the decode harness; bench/decode_compare.py against PyTorch SDPA on the same
// decode shapes, and the HBM roofline; NVIDIA H100 80GB HBM3, 2026-11-23, q_len 1, 32 heads over 8 kv
// heads, d = 128, bf16, batch x cache 1..64 x 1k..128k, one process):
//   v1  the kernels above; the combine a chain of dependent reads (48 us at 32 splits under ncu).
//   v2  the combine's weights once a row, its partials loaded four splits at a time (17 us); the Python call
//       without a device sync: 0.64-1.00x the best SDPA backend (cuDNN), 0.94-1.25x SDPA flash; the
//       cache streams at 98-103% of a device copy's 3.02 TB/s from 0.5 GB of cache up (batch 8 x 64k,
//       batch 64 x 4k..64k), 8-70% at batch 1 (the split kernel's 32-key blocks a warp and the
//       combine's 17 us leave small problems latency-bound).
//   v3  the combine a CTA a row, a thread a column; a block's rows looked up once a key (lane), not once a
//       16-byte chunk: paged caches (256) from 52-70% to 71-100% of the copy rate, as contiguous
//       (bench/results/decode-h100-2026-11-23-contiguous.csv, -paged256.csv): 0.73-0.99x the best SDPA
//       backend, 0.93-1.26x SDPA flash; at cache >= 8k 79-102% of a copy's 3.02 TB/s at batch 8 and 64,
//       31-83% at batch 1, where 256 CTAs of 32-key blocks a warp stream too little at once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include <string>

#include "cuda_check.hpp"
#include "decode_params.hpp"
#include "flashlab/error.hpp"
#include "mma.cuh"
#include "shapes.hpp"
#include "softmax.cuh"

namespace flashlab::gpu {
namespace {

using namespace mma;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kRows = 16;       // packed query rows a CTA
constexpr int kKeys = 32;       // keys a warp's block
constexpr int kCtaKeys = kWarps * kKeys;

// Device-side view of the cache: the row of logical key j of entry b (DecodeProblem::cache_row).
struct Cache {
  const int* table;
  int page_size, max_pages, cache_len, heads_kv;
  __device__ int64_t row(int b, int j) const {
    if (!table) return int64_t(b) * cache_len + j;
    return int64_t(table[b * max_pages + j / page_size]) * page_size + j % page_size;
  }
};
__device__ Cache cache_of(const DecodeParams& p) {
  return {p.block_table, p.page_size, p.max_pages, p.cache_len, p.heads_kv};
}

// Scratch: rotated queries (as q), then per split the partial O (fp32, head_dim) and LSE of every row.
template <typename T>
struct Scratch {
  T* q_rot;
  float* o_part;
  float* lse_part;
};
template <typename T>
__host__ __device__ Scratch<T> scratch_of(const DecodeParams& p) {
  const int64_t rows = int64_t(p.batch) * p.q_len * p.heads_q;
  char* base = static_cast<char*>(p.scratch);
  const int64_t q_bytes = (p.rotary ? rows * p.head_dim * int64_t(sizeof(T)) + 15 : 0) / 16 * 16;
  float* o_part = reinterpret_cast<float*>(base + q_bytes);
  return {p.rotary ? reinterpret_cast<T*>(base) : nullptr, o_part, o_part + int64_t(p.num_splits) * rows * p.head_dim};
}

// ---- append: rotary and the in-place write of K_new, V_new; rotated queries to scratch.
// One thread a 16-byte chunk (8 dims) of one row; rotary pairs whose partner lies in another chunk
// (half-split) read it from global memory.
template <typename T>
__device__ void rotate_chunk(const T* x, T* out, int pos, int c0, const DecodeParams& p) {
  const int rd = p.rotary_dim, half = rd / 2;
  const T* cs = static_cast<const T*>(p.cos) + int64_t(pos) * half;
  const T* sn = static_cast<const T*>(p.sin) + int64_t(pos) * half;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int c = c0 + e;
    float y = float(x[c]);
    if (c < rd) {
      // pair k, and whether c is its first (a) or second (b) element
      const bool inter = p.rotary == 1;
      const int k = inter ? c / 2 : (c < half ? c : c - half);
      const bool first = inter ? (c % 2 == 0) : c < half;
      const int partner = inter ? (first ? c + 1 : c - 1) : (first ? c + half : c - half);
      const float xo = float(x[partner]), co = float(cs[k]), si = float(sn[k]);
      y = first ? y * co - xo * si : xo * si + y * co;
    }
    out[c] = T(y);
  }
}

template <typename T>
__global__ void append_kernel(const DecodeParams p) {
  const int chunks = p.head_dim / 8;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int b = blockIdx.y;
  const Cache cache = cache_of(p);
  const int base = p.cache_seqlens[b];
  // K/V new: (t, g, chunk) of entry b
  const int64_t kv_items = int64_t(p.new_len) * p.heads_kv * chunks;
  if (idx < kv_items) {
    const int c0 = int(idx % chunks) * 8, g = int(idx / chunks % p.heads_kv), t = int(idx / chunks / p.heads_kv);
    const int64_t src = ((int64_t(b) * p.new_len + t) * p.heads_kv + g) * p.head_dim;
    const int64_t dst = (cache.row(b, base + t) * p.heads_kv + g) * p.head_dim;
    const T* kn = static_cast<const T*>(p.k_new) + src;
    T* kc = static_cast<T*>(p.k_cache) + dst;
    if (p.rotary) rotate_chunk(kn, kc, base + t, c0, p);
    else
      for (int e = 0; e < 8; ++e) kc[c0 + e] = kn[c0 + e];
    const T* vn = static_cast<const T*>(p.v_new) + src;
    T* vc = static_cast<T*>(p.v_cache) + dst;
    for (int e = 0; e < 8; ++e) vc[c0 + e] = vn[c0 + e];
    return;
  }
  // rotated queries: (i, h, chunk) of entry b
  if (!p.rotary) return;
  const int64_t q_idx = idx - kv_items;
  if (q_idx >= int64_t(p.q_len) * p.heads_q * chunks) return;
  const int c0 = int(q_idx % chunks) * 8, h = int(q_idx / chunks % p.heads_q), i = int(q_idx / chunks / p.heads_q);
  const int64_t at = ((int64_t(b) * p.q_len + i) * p.heads_q + h) * p.head_dim;
  rotate_chunk(static_cast<const T*>(p.q) + at, scratch_of<T>(p).q_rot + at, base + (p.causal ? i : 0), c0, p);
}

// ---- split: one CTA per (16 packed rows, split, kv head, batch)
template <int D, typename T, bool kSoftcap>
__global__ void __launch_bounds__(kThreads) split_kernel(const DecodeParams p) {
  constexpr int kStages = D <= 128 ? 2 : 1;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // (16, D)
  T* sKV = sQ + kRows * D;                  // (warps, stages, K and V, 32, D)

  const int row_chunks = (p.q_len * (p.heads_q / p.heads_kv) + kRows - 1) / kRows;
  const int chunk = blockIdx.x % row_chunks, split = blockIdx.x / row_chunks;
  const int g = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, qrow = lane / 4, qcol = (lane % 4) * 2;
  const int group = p.heads_q / p.heads_kv, rows = p.q_len * group;
  const int sk = p.cache_seqlens[b] + p.new_len, sq = p.q_len;
  const int n_blocks = (sk + kKeys - 1) / kKeys, per_split = (n_blocks + p.num_splits - 1) / p.num_splits;
  const int j_begin = split * per_split, j_end = min(n_blocks, j_begin + per_split);
  const Cache cache = cache_of(p);
  const Scratch<T> sc = scratch_of<T>(p);
  const T* q = p.rotary ? sc.q_rot : static_cast<const T*>(p.q);

  // This CTA's packed row r: query r / group of head g group + r % group.
  auto q_offset = [&](int r) {
    const int pr = chunk * kRows + r;
    return ((int64_t(b) * p.q_len + pr / group) * p.heads_q + g * group + pr % group) * p.head_dim;
  };
  {  // Q: 16 rows x D, rows past the packed rows and columns past head_dim zero
    constexpr int kChunks = D / 8;
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = idx % kChunks;
      const bool ok = chunk * kRows + r < rows && c * 8 < p.head_dim;
      cp_async_16(sQ + swizzle<D>(r, c), q + (ok ? q_offset(r) + c * 8 : 0), ok);
    }
  }
  // Warp w's blocks: j_begin + w, + 4, ...; each gathered row by row through the block table. Lane r
  // looks up key r's row once (one table read, one division), and the copies take it by shuffle (v2 looked
  // it up for every 16-byte chunk: paged caches streamed at 52-70% of a copy's rate).
  auto load_block = [&](int j, int stage) {
    T* sK = sKV + ((warp * kStages + stage) * 2) * kKeys * D;
    T* sV = sK + kKeys * D;
    constexpr int kChunks = D / 8;
    static_assert(kKeys == 32, "a lane a key of the block");
    const T* kc = static_cast<const T*>(p.k_cache);
    const T* vc = static_cast<const T*>(p.v_cache);
    const int my_key = j * kKeys + lane;
    const long long my_base = my_key < sk ? (cache.row(b, my_key) * p.heads_kv + g) * p.head_dim : -1;
#pragma unroll 4
    for (int idx = lane; idx < kKeys * kChunks; idx += 32) {
      const int r = idx / kChunks, c = idx % kChunks;
      const long long base = __shfl_sync(0xffffffffu, my_base, r);
      const bool ok = base >= 0 && c * 8 < p.head_dim;
      const int64_t at = ok ? base + c * 8 : 0;
      cp_async_16(sK + swizzle<D>(r, c), kc + at, ok);
      cp_async_16(sV + swizzle<D>(r, c), vc + at, ok);
    }
  };

  // This thread's two rows (g, g + 8 of the 16): their query index (for the causal edge) and validity.
  int last_key[2];  // the last key each row sees; -1: none (a padding row)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int pr = chunk * kRows + qrow + 8 * r;
    last_key[r] = pr < rows ? (p.causal ? pr / group + sk - sq : sk - 1) : -1;
  }
  float acc_o[1][D / 8][4];
  zero(acc_o[0]);
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const float c = kSoftcap ? kLog2e : p.scale * kLog2e;
  const Ldsm<D, Frag::A> ldsm_q(lane);
  const Ldsm<D, Frag::B> ldsm_k(lane);
  const Ldsm<D, Frag::BTrans> ldsm_v(lane);
  const uint32_t q_tile = smem_addr(sQ);

  int j = j_begin + warp;
  if (j < j_end) load_block(j, 0);
  cp_async_commit();  // with Q
  cp_async_wait<0>();
  __syncthreads();  // Q is in for every warp
  for (int step = 0; j < j_end; j += kWarps, ++step) {
    const int stage = kStages == 2 ? step & 1 : 0;
    if (kStages == 2 && j + kWarps < j_end) load_block(j + kWarps, stage ^ 1);
    cp_async_commit();
    if constexpr (kStages == 2) cp_async_wait<1>();  // block j is in (the next may be in flight)
    else cp_async_wait<0>();
    __syncwarp();
    const T* sK = sKV + ((warp * kStages + stage) * 2) * kKeys * D;
    const uint32_t k_tile = smem_addr(sK), v_tile = smem_addr(sK + kKeys * D);

    float acc_s[1][kKeys / 8][4];
    zero(acc_s[0]);
    mma_acc<T, D / 16>(acc_s, ldsm_q, q_tile, ldsm_k, k_tile);
    if constexpr (kSoftcap) softmax::softcap(acc_s[0], p.softcap, p.scale / p.softcap);
    if ((j + 1) * kKeys - 1 > min(last_key[0], last_key[1]) || last_key[0] < 0 || last_key[1] < 0) {
      const int lo[2] = {0, 0}, hi[2] = {last_key[0] + 1, last_key[1] + 1};
      softmax::mask(acc_s[0], j * kKeys, qcol, lo, hi);
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) alpha[r] = softmax::online_step(acc_s[0], r, c, row_max[r], row_sum[r]);
    softmax::rescale(acc_o[0], alpha);
    unroll<kKeys / 16>([&](auto kk_) {
      constexpr int kk = decltype(kk_)::value;
      uint32_t a[4];
      c_to_a<T>(a, acc_s[0][2 * kk], acc_s[0][2 * kk + 1]);
      unroll<D / 16>([&](auto n_) {
        constexpr int n = decltype(n_)::value;
        uint32_t bv[4];
        ldsm_v.template block<n, kk>(bv, v_tile);
        mma_16x16<T>(acc_o[0], n, a, bv);
      });
    });
    __syncwarp();  // every lane is done with this stage before it is refilled
    if (kStages == 1 && j + kWarps < j_end) load_block(j + kWarps, 0);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its K/V buffers: they hold the merge now

  // Merge the four warps: each writes m (scaled), l and O for its rows; then each thread of the CTA
  // finishes (row, 8 columns) chunks.
  float* sM = reinterpret_cast<float*>(sKV);   // (warps, 16)
  float* sL = sM + kWarps * kRows;             // (warps, 16)
  float* sO = sL + kWarps * kRows;             // (warps, 16, D)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = qrow + 8 * r;
    const float l = softmax::quad_sum(row_sum[r]);
    if (lane % 4 == 0) {
      sM[warp * kRows + row] = softmax::scaled_max(row_max[r], c);
      sL[warp * kRows + row] = l;
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      sO[(warp * kRows + row) * D + n * 8 + qcol] = acc_o[0][n][2 * r];
      sO[(warp * kRows + row) * D + n * 8 + qcol + 1] = acc_o[0][n][2 * r + 1];
    }
  }
  __syncthreads();
  const int64_t all_rows = int64_t(p.batch) * p.q_len * p.heads_q;
  for (int idx = threadIdx.x; idx < kRows * (D / 8); idx += kThreads) {
    const int row = idx / (D / 8), c0 = (idx % (D / 8)) * 8;
    const int pr = chunk * kRows + row;
    if (pr >= rows || c0 >= p.head_dim) continue;
    float m = -INFINITY;
    for (int w = 0; w < kWarps; ++w)
      if (sL[w * kRows + row] > 0.f) m = fmaxf(m, sM[w * kRows + row]);
    float l = 0.f, o[8] = {};
    for (int w = 0; w < kWarps; ++w) {
      const float lw = sL[w * kRows + row];
      if (lw <= 0.f) continue;
      const float f = exp2_fast(sM[w * kRows + row] - m);
      l += f * lw;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] += f * sO[(w * kRows + row) * D + c0 + e];
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? m * kLn2 + logf(l) : -INFINITY;  // m is in log2 units
    const int i = pr / group, h = g * group + pr % group;
    const int64_t out_row = (int64_t(b) * p.q_len + i) * p.heads_q + h;  // (batch, q_len, heads_q)
    if (p.num_splits == 1) {
      T* o_out = static_cast<T*>(p.o) + out_row * p.head_dim + c0;
#pragma unroll
      for (int e = 0; e < 8; ++e) o_out[e] = T(o[e] * inv);
      if (c0 == 0) p.lse[(int64_t(b) * p.heads_q + h) * p.q_len + i] = lse;
    } else {
      float* o_out = sc.o_part + (int64_t(split) * all_rows + out_row) * p.head_dim + c0;
#pragma unroll
      for (int e = 0; e < 8; ++e) o_out[e] = o[e] * inv;
      if (c0 == 0) sc.lse_part[int64_t(split) * all_rows + out_row] = lse;
    }
  }
}

// ---- combine: one CTA a (batch, query, head) row, a thread a column (two at d = 256). The first warp reads
// the splits' LSEs side by side and reduces them (max, then the sum of exp) into the row's LSE and each
// split's weight exp(LSE_s - LSE) in shared memory; then every thread sums its column over the splits,
// eight loads in flight at a time. (v1: a warp a row, a chain of dependent reads, 48 us at 32 splits
// under ncu; v2: a warp a row, four splits at a time, 17 us.)
constexpr int kMaxSplits = 128;
constexpr int kCombineThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const DecodeParams p) {
  __shared__ float weights[kMaxSplits];
  __shared__ float row_lse;
  const int64_t all_rows = int64_t(p.batch) * p.q_len * p.heads_q;
  const int64_t row = blockIdx.x;
  const Scratch<T> sc = scratch_of<T>(p);
  const int splits = p.num_splits;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float m = -INFINITY;
    for (int s = lane; s < splits; s += 32) m = fmaxf(m, sc.lse_part[s * all_rows + row]);
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float total = 0.f;
    for (int s = lane; s < splits; s += 32) {
      const float ls = sc.lse_part[s * all_rows + row];
      total += ls > -INFINITY ? expf(ls - m) : 0.f;
    }
    for (int off = 16; off > 0; off /= 2) total += __shfl_xor_sync(0xffffffffu, total, off);
    const float lse = total > 0.f ? m + logf(total) : -INFINITY;
    for (int s = lane; s < splits; s += 32) {
      const float ls = sc.lse_part[s * all_rows + row];
      weights[s] = ls > -INFINITY ? expf(ls - lse) : 0.f;
    }
    if (lane == 0) row_lse = lse;
  }
  __syncthreads();
  T* o = static_cast<T*>(p.o) + row * p.head_dim;
  const float* part = sc.o_part + row * p.head_dim;
  const int64_t split_stride = all_rows * p.head_dim;
  for (int col = threadIdx.x; col < p.head_dim; col += kCombineThreads) {
    float acc = 0.f;
#pragma unroll 8
    for (int s = 0; s < splits; ++s) acc += weights[s] * part[s * split_stride + col];
    o[col] = T(acc);
  }
  if (threadIdx.x == 0) {  // row = (b q_len + i) heads_q + h -> LSE (b, h, i)
    const int64_t h = row % p.heads_q, bi = row / p.heads_q, i = bi % p.q_len, b = bi / p.q_len;
    p.lse[(b * p.heads_q + h) * p.q_len + i] = row_lse;
  }
}

template <int D, typename T>
void launch_split(const DecodeParams& p, cudaStream_t stream) {
  constexpr int kStages = D <= 128 ? 2 : 1;
  constexpr size_t kv = size_t(kWarps) * kStages * 2 * kKeys * D * sizeof(T);
  constexpr size_t merge = size_t(kWarps) * kRows * (2 + D) * sizeof(float);
  constexpr size_t smem = size_t(kRows) * D * sizeof(T) + (kv > merge ? kv : merge);
  auto kernel = p.softcap > 0.f ? split_kernel<D, T, true> : split_kernel<D, T, false>;
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int row_chunks = (p.q_len * (p.heads_q / p.heads_kv) + kRows - 1) / kRows;
  kernel<<<dim3(row_chunks * p.num_splits, p.heads_kv, p.batch), kThreads, smem, stream>>>(p);
  FLASHLAB_CUDA_LAUNCHED();
}

template <typename T>
void run(const DecodeParams& p, cudaStream_t stream) {
  const int chunks = p.head_dim / 8;
  const int64_t items = int64_t(p.new_len) * p.heads_kv * chunks + (p.rotary ? int64_t(p.q_len) * p.heads_q * chunks : 0);
  if (items > 0) {
    append_kernel<T><<<dim3(unsigned((items + 127) / 128), p.batch), 128, 0, stream>>>(p);
    FLASHLAB_CUDA_LAUNCHED();
  }
  switch (fa2_padded_head_dim(p.head_dim)) {
    case 64: launch_split<64, T>(p, stream); break;
    case 128: launch_split<128, T>(p, stream); break;
    case 256: launch_split<256, T>(p, stream); break;
  }
  if (p.num_splits > 1) {
    const int64_t rows = int64_t(p.batch) * p.q_len * p.heads_q;
    combine_kernel<T><<<unsigned(rows), kCombineThreads, 0, stream>>>(p);
    FLASHLAB_CUDA_LAUNCHED();
  }
}

}  // namespace

size_t decode_scratch_bytes(const DecodeParams& p) {
  const int64_t rows = int64_t(p.batch) * p.q_len * p.heads_q;
  const int64_t q_bytes = (p.rotary ? rows * p.head_dim * 2 + 15 : 0) / 16 * 16;
  const int64_t parts = p.num_splits > 1 ? int64_t(p.num_splits) * rows * (p.head_dim + 1) * 4 : 0;
  return size_t(q_bytes + parts);
}

const char* decode_unsupported(const DecodeParams& p) {
  if (p.dtype == Dtype::fp32) return "fp32 (the decode kernel runs bf16 and fp16)";
  if (fa2_padded_head_dim(p.head_dim) == 0 || p.head_dim % 8 != 0)
    return "head_dim (the decode kernel takes multiples of 8 up to 256)";
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return "heads_q must be a multiple of heads_kv";
  if (p.num_splits < 1 || p.num_splits > kMaxSplits) return "num_splits must be 1 .. 128";
  if (p.rotary && (p.rotary_dim <= 0 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim || !p.cos || !p.sin))
    return "rotary needs cos, sin and an even rotary_dim <= head_dim";
  return "";
}

int decode_num_splits(const DecodeParams& p, int sms, int max_seqlen_k) {
  const int64_t row_chunks = (int64_t(p.q_len) * (p.heads_q / p.heads_kv) + kRows - 1) / kRows;
  const int64_t ctas = int64_t(p.batch) * p.heads_kv * row_chunks;
  const int64_t blocks = (int64_t(max_seqlen_k) + kCtaKeys - 1) / kCtaKeys;
  return int(split_kv_heuristic(ctas, int64_t(sms) * 2, blocks));
}

void decode_forward(const DecodeParams& p, cudaStream_t stream) {
  if (const char* why = decode_unsupported(p); *why) throw Error(std::string("decode: unsupported: ") + why);
  if (p.dtype == Dtype::bf16) run<__nv_bfloat16>(p, stream);
  else run<__half>(p, stream);
}

}  // namespace flashlab::gpu
