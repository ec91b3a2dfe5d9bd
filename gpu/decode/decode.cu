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
//   split      scheduler: one CTA per (8 or 16 packed query rows, split, kv head, batch). A kv head's rows
//                are its group's query heads times q_len (row r: query r / group of head g group +
//                r % group), so one K/V block read from the cache feeds every query head that shares it.
//                Split s takes the key blocks [s n, (s + 1) n) of the entry, n = ceil(blocks / splits).
//              producer: each of the CTA's warps (three at d <= 128, four at 256: decode_split_shape)
//                gathers its own 32-key blocks of K and V (blocks w, w + warps, ... of the split) through
//                the block table with cp.async, zero-filling keys past the entry's length, two stages at
//                d <= 128 (one at 256).
//              consumer: per warp, S^T = K Q^T and O^T += V^T P~^T with mma.sync m16n8k16 (mma.cuh): the
//                keys are the MMA's 16 rows and the packed queries its 8 columns, so GQA 4:1 fills half a
//                tile where queries as rows filled a quarter; the online softmax down S^T's columns
//                (columns.cuh), the causal edge and the entry's end masked; P~^T's B fragments transposed
//                out of the accumulators by movmatrix.
//              epilogue: the warps' (m, l, O) merge through shared memory; O / l and LSE go to the
//                outputs (one split) or to the split's partial (fp32) in scratch.
//   combine    (num_splits > 1) one CTA a (entry, query, head): LSE = log sum_s exp(LSE_s),
//              O = sum_s exp(LSE_s - LSE) O_s, merged online by (column group, split group) threads, the
//              groups then in shared memory; on sm_90 launched as a programmatic dependent of the split
//              kernel, so its launch hides under the split kernel's stream.
//
// Version index (checks: the decode harness; bench/decode_compare.py against PyTorch SDPA on the same
// decode shapes and the HBM roofline, bench/decode_ab.py for one build against another; q_len 1, 32 heads
// over 8 kv heads, d = 128, bf16, batch x cache 1..64 x 1k..128k, one process). Full entries, and every
// try not kept: gpu/HISTORY.md, "decode/decode.cu".
//   v1  the kernels above; the combine a chain of dependent reads (48 us at 32 splits under ncu). H100.
//   v2  the combine four splits at a time (17 us): 0.64-1.00x the best SDPA backend (cuDNN). H100.
//   v3  the combine a thread a column; a block's rows looked up once a key: paged as fast as contiguous.
//   v4  the combine by (column group, split group) threads, one round trip of loads: batch 1 0.86-0.94x.
//   v5  the combine a programmatic dependent launch (sm_90); splits from the SM slots: 0.86-1.00x. H100.
//   v6  the split count by bandwidth (shapes.hpp decode_split_count): 0.88-1.12x; under the layers clock
//       (H100, 2026-11-27) 0.97-1.09x, at batch 1 x 8k keys 59.7% of the copy rate (a pure read: 79%).
//       H200, 2026-11-29 (decode-h200-2026-11-29-contiguous.csv): 0.98-0.995x from 8k, batch 64 x 1k 0.86x.
//   v7  three warps a CTA at d <= 128 (shapes.hpp decode_split_shape): 100 KB, two CTAs an SM, so one's
//       start and merge run under the other's stream (H200, 2026-11-29, against v6 in one process,
//       bench/results/decode-ab-h200-2026-11-29*.csv): batch 64 x 1k x1.055-1.074, 2k x1.02-1.03, d = 64
//       x1.0-1.15; the sweep (decode-h200-2026-11-29-v7-contiguous.csv, -paged256.csv): 0.98-1.02x the
//       best SDPA backend from 8k keys contiguous, 0.94-1.02x paged; batch 64 x 1k 0.92x (0.91x paged).
//   v8  transposed: S^T = K Q^T, O^T += V^T P^T (the queries as the MMA's N: half the MMAs at GQA 4:1, Q^T
//       held in registers), and a block whose page holds it copied by load_tile (one lookup, a constant
//       stride): 7.8 M instructions at batch 1 x 64k where v7 ran 13.8 M, a CTA's stream 56-60 GB/s (v7
//       35-41). H200, 2026-11-29, against v7 in one process (decode-ab-h200-2026-11-29-v8*.csv): d = 128
//       x1.01-1.06, d = 64 x1.01-1.06, d = 256 x1.04-1.23; the sweep (decode-h200-2026-11-29-v8-*.csv)
//       0.98-1.03x the best SDPA backend from 8k keys contiguous, 0.98-1.01x paged; batch 64 x 1k 1.00x
//       (decode_ab.py; 0.90x inside decode_compare.py's full sweep, a process-history effect:
//       decode-h200-2026-11-29-v8-b64x1k-probe.txt).
//   v9  the merge's reads at once and 16-byte stores; the combine loads four splits a step (bench/decode_timeline.py
//       found each split step a round trip): the combine's work at 14 splits 1.21 -> 0.80 us. Against v8 in one
//       process (decode-ab-h200-2026-11-29-v9*.csv): x1.000-1.057 (batch 1 x 1k x1.057, 8k x1.020, d = 64 x1.048,
//       d = 256 x1.01-1.04); the sweep (decode-h200-2026-11-29-v9-*.csv) 1.00-1.05x the best SDPA backend from 8k
//       keys contiguous, 0.99-1.01x paged.
//   v10 the merge's shared O rows padded to D + 4 floats (its stores free of bank conflicts). Against v9 in one
//       process, both orders (decode-ab-h200-2026-11-29-v10-*.csv): d = 128 x1.003-1.020 (batch 1 x 1k x1.02,
//       8k x1.01), paged 256 x1.004-1.020, d = 256 x1.002-1.013, d = 64 x0.995-1.002.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>

#include <string>
#include <type_traits>

#include "columns.cuh"
#include "cuda_check.hpp"
#include "decode_params.hpp"
#include "flashlab/error.hpp"
#include "mma.cuh"
#include "shapes.hpp"
#include "softmax.cuh"

namespace flashlab::gpu {
namespace {

using namespace mma;

// The split kernel's shape at head dim D: gpu/shapes.hpp's decode_split_shape (`flashlab shapes --algo
// decode`), which says why. Warps a CTA (a 32-key block each per step) and K/V stages a warp.
constexpr int kRows = 16;  // packed query rows a CTA
constexpr int kKeys = 32;  // keys a warp's block
template <int D>
constexpr int split_warps() { return decode_split_shape(D).warps; }
template <int D>
constexpr int split_stages() { return decode_split_shape(D).stages; }
template <int D>
constexpr bool split_shape_agrees() {
  constexpr TileShape s = decode_split_shape(D);
  return s.head_dim == D && s.block_m == kRows && s.block_n == kKeys * s.warps && s.threads == 32 * s.warps;
}
static_assert(split_shape_agrees<64>() && split_shape_agrees<128>() && split_shape_agrees<256>(),
              "decode.cu's rows and keys are decode_split_shape's");
// One K/V stage at d = 128 (68 KB, three CTAs an SM) was tried with four warps: no faster at batch 64 x 1k
// (108 us either way), slower at batch 1 below 16 splits (H100, 2026-11-26,
// bench/results/decode-splits-h100-2026-11-26-one-stage.csv against -run2.csv).

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

// Eight values to `to` (bf16 / fp16 or fp32): one 16-byte store each 16 bytes where `to` is aligned to 16
// (the outputs and partials torch and the ABI allocate are), else one a value.
template <typename T>
__device__ __forceinline__ void store8(T* to, const float (&x)[8]) {
  if (reinterpret_cast<uintptr_t>(to) % 16 != 0) {
#pragma unroll
    for (int e = 0; e < 8; ++e) to[e] = T(x[e]);
  } else if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(to)[0] = make_float4(x[0], x[1], x[2], x[3]);
    reinterpret_cast<float4*>(to)[1] = make_float4(x[4], x[5], x[6], x[7]);
  } else {
    *reinterpret_cast<uint4*>(to) = make_uint4(pack2<T>(x[0], x[1]), pack2<T>(x[2], x[3]), pack2<T>(x[4], x[5]),
                                               pack2<T>(x[6], x[7]));
  }
}

// ---- split: one CTA per (8 or 16 packed query rows, split, kv head, batch)
// The packed rows of a kv head (its group's query heads times q_len) are the MMAs' N: 8 a tile, one tile
// where they fit (GQA up to 8:1 at q_len 1), else two (kQT). The keys are the M: S^T = K Q^T, then
// O^T += V^T P^T, P^T's B fragments transposed out of S^T's accumulators (mma.cuh c_to_b_trans).
// The rows' chunks a kv head has: shapes.hpp decode_row_chunks (8 rows where they fit, else 16).
__host__ __device__ inline int packed_rows_of(const DecodeParams& p) { return p.q_len * (p.heads_q / p.heads_kv); }
inline int row_chunks_of(const DecodeParams& p) { return decode_row_chunks(packed_rows_of(p)); }

template <int D, typename T, bool kSoftcap, int kQT>
__global__ void __launch_bounds__(32 * split_warps<D>()) split_kernel(const DecodeParams p) {
  constexpr int kWarps = split_warps<D>(), kThreads = 32 * kWarps;
  constexpr int kStages = split_stages<D>();
  constexpr int kCtaRows = 8 * kQT;  // packed query rows this CTA
  constexpr int kDT = D / 16;        // head-dim tiles of O^T (its M)
  static_assert(kCtaRows <= kRows, "the shape's rows hold the CTA's");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // (16, D)
  T* sKV = sQ + kRows * D;                  // (warps, stages, K and V, 32, D)

#if __CUDA_ARCH__ >= 900
  // The combine may be scheduled now (programmatic dependent launch): its CTAs take their SM slots while
  // this grid streams, and wait in griddepcontrol.wait until it has finished and its partials are visible.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const int group = p.heads_q / p.heads_kv, rows = packed_rows_of(p);
  const int row_chunks = decode_row_chunks(rows);  // the launch picked kQT by decode_cta_rows(rows)
  const int chunk = blockIdx.x % row_chunks, split = blockIdx.x / row_chunks;
  const int g = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, key_row = lane / 4, qcol = (lane % 4) * 2;
  const int sk = p.cache_seqlens[b] + p.new_len, sq = p.q_len;
  const int n_blocks = (sk + kKeys - 1) / kKeys, per_split = (n_blocks + p.num_splits - 1) / p.num_splits;
  const int j_begin = split * per_split, j_end = min(n_blocks, j_begin + per_split);
  const Cache cache = cache_of(p);
  const Scratch<T> sc = scratch_of<T>(p);
  const T* q = p.rotary ? sc.q_rot : static_cast<const T*>(p.q);

  // This CTA's packed row r: query r / group of head g group + r % group.
  auto q_offset = [&](int r) {
    const int pr = chunk * kCtaRows + r;
    return ((int64_t(b) * p.q_len + pr / group) * p.heads_q + g * group + pr % group) * p.head_dim;
  };
  {  // Q: 16 rows x D, rows past the CTA's packed rows and columns past head_dim zero
    constexpr int kChunks = D / 8;
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = idx % kChunks;
      const bool ok = r < kCtaRows && chunk * kCtaRows + r < rows && c * 8 < p.head_dim;
      cp_async_16(sQ + swizzle<D>(r, c), q + (ok ? q_offset(r) + c * 8 : 0), ok);
    }
  }
  // Warp w's blocks: j_begin + w, + warps, ...; keys past the entry's length zero-filled. Where a page
  // holds whole blocks (a contiguous cache, or pages a multiple of 32 keys), a block is 32 consecutive
  // rows: one lookup, then a constant stride (v8). Else (pages of 16) each lane looks up one key's row and
  // the copies take it by shuffle (v3; v2 looked it up for every 16-byte chunk: paged caches streamed at
  // 52-70% of a copy's rate).
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  const bool whole_blocks = !cache.table || cache.page_size % kKeys == 0;
  const int64_t key_stride = int64_t(p.heads_kv) * p.head_dim;
  auto load_block = [&](int j, int stage) {
    T* sK = sKV + ((warp * kStages + stage) * 2) * kKeys * D;
    T* sV = sK + kKeys * D;
    if (whole_blocks) {
      const int64_t at = (cache.row(b, j * kKeys) * p.heads_kv + g) * p.head_dim;
      load_tile<D, 32, kKeys>(sK, kc + at, key_stride, 0, sk - j * kKeys, p.head_dim, lane);
      load_tile<D, 32, kKeys>(sV, vc + at, key_stride, 0, sk - j * kKeys, p.head_dim, lane);
      return;
    }
    constexpr int kChunks = D / 8;
    static_assert(kKeys == 32, "a lane a key of the block");
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

  // This lane's query columns (qt, i): packed row 8 qt + qcol + i of the CTA. The last key each sees
  // (the causal edge, else the entry's end); -1 for a padding column.
  int last_key[kQT][2];
  int fewest_keys = INT_MAX;  // the smallest of them: blocks past it need the mask
#pragma unroll
  for (int qt = 0; qt < kQT; ++qt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int pr = chunk * kCtaRows + 8 * qt + qcol + i;
      last_key[qt][i] = pr < rows ? (p.causal ? pr / group + sk - sq : sk - 1) : -1;
      fewest_keys = min(fewest_keys, last_key[qt][i]);
    }
  float acc_o[kDT][kQT][4];  // O^T: head-dim tile x query tile
#pragma unroll
  for (int dt = 0; dt < kDT; ++dt) zero(acc_o[dt]);
  float col_max[kQT][2], col_sum[kQT][2];
#pragma unroll
  for (int qt = 0; qt < kQT; ++qt) col_max[qt][0] = col_max[qt][1] = -INFINITY, col_sum[qt][0] = col_sum[qt][1] = 0.f;
  const float c = kSoftcap ? kLog2e : p.scale * kLog2e;
  const Ldsm<D, Frag::A> ldsm_k(lane);        // K as A (keys x dims)
  const Ldsm<D, Frag::B> ldsm_q(lane);        // Q^T as B (dims x queries): rows 0-7 in [0, 1], 8-15 in [2, 3]
  const Ldsm<D, Frag::ATrans> ldsm_vt(lane);  // V^T as A (dims x keys), from V stored keys x dims
  const uint32_t q_tile = smem_addr(sQ);

  int j = j_begin + warp;
  if (j < j_end) load_block(j, 0);
  cp_async_commit();  // with Q
  cp_async_wait<0>();
  __syncthreads();  // Q is in for every warp
  // Q^T's fragments stay in registers for the whole walk where they fit (not at d = 256 with two tiles).
  constexpr bool kQInRegisters = kDT * kQT * 2 <= 32;
  uint32_t q_frag[kQInRegisters ? kDT : 1][4];
  if constexpr (kQInRegisters)
    unroll<kDT>([&](auto k_) { ldsm_q.template block<0, decltype(k_)::value>(q_frag[k_], q_tile); });

  for (int step = 0; j < j_end; j += kWarps, ++step) {
    const int stage = kStages == 2 ? step & 1 : 0;
    if (kStages == 2 && j + kWarps < j_end) load_block(j + kWarps, stage ^ 1);
    cp_async_commit();
    if constexpr (kStages == 2) cp_async_wait<1>();  // block j is in (the next may be in flight)
    else cp_async_wait<0>();
    __syncwarp();
    const T* sK = sKV + ((warp * kStages + stage) * 2) * kKeys * D;
    const uint32_t k_tile = smem_addr(sK), v_tile = smem_addr(sK + kKeys * D);

    // S^T = K Q^T: two 16-key tiles by kQT 8-query tiles.
    float s[2][kQT][4];
    zero(s[0]);
    zero(s[1]);
    unroll<kDT>([&](auto k_) {
      constexpr int k = decltype(k_)::value;
      uint32_t qb[4];
      if constexpr (kQInRegisters) {
#pragma unroll
        for (int x = 0; x < 4; ++x) qb[x] = q_frag[k][x];
      } else {
        ldsm_q.template block<0, k>(qb, q_tile);
      }
      unroll<2>([&](auto kt_) {
        constexpr int kt = decltype(kt_)::value;
        uint32_t a[4];
        ldsm_k.template block<kt, k>(a, k_tile);
#pragma unroll
        for (int qt = 0; qt < kQT; ++qt) mma_16816<T>(s[kt][qt], a, qb[2 * qt], qb[2 * qt + 1]);
      });
    });
    if constexpr (kSoftcap) {
      softmax::softcap(s[0], p.softcap, p.scale / p.softcap);
      softmax::softcap(s[1], p.softcap, p.scale / p.softcap);
    }
    if ((j + 1) * kKeys - 1 > fewest_keys) {  // a key of the block lies past some column's last
#pragma unroll
      for (int kt = 0; kt < 2; ++kt)
#pragma unroll
        for (int qt = 0; qt < kQT; ++qt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (j * kKeys + 16 * kt + key_row + 8 * (e / 2) > last_key[qt][e & 1]) s[kt][qt][e] = -INFINITY;
    }
    float alpha[kQT][2];
#pragma unroll
    for (int qt = 0; qt < kQT; ++qt)
#pragma unroll
      for (int i = 0; i < 2; ++i) alpha[qt][i] = columns::online_step(s, qt, i, c, col_max[qt][i], col_sum[qt][i]);
    columns::rescale(acc_o, alpha);
    // O^T += V^T P^T, 16 keys at a time.
    unroll<2>([&](auto kk_) {
      constexpr int kk = decltype(kk_)::value;
      uint32_t pb[kQT][2];
#pragma unroll
      for (int qt = 0; qt < kQT; ++qt) c_to_b_trans<T>(pb[qt][0], pb[qt][1], s[kk][qt]);
      unroll<kDT>([&](auto dt_) {
        constexpr int dt = decltype(dt_)::value;
        uint32_t a[4];
        ldsm_vt.template block<dt, kk>(a, v_tile);
#pragma unroll
        for (int qt = 0; qt < kQT; ++qt) mma_16816<T>(acc_o[dt][qt], a, pb[qt][0], pb[qt][1]);
      });
    });
    __syncwarp();  // every lane is done with this stage before it is refilled
    if (kStages == 1 && j + kWarps < j_end) load_block(j + kWarps, 0);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its K/V buffers: they hold the merge now

  // Merge the warps: each writes m (scaled), l and O for its columns; then each thread of the CTA
  // finishes (row, 8 columns) chunks, the chunk's real rows only. O's rows are kORow floats apart (D + 4,
  // shapes.hpp decode_merge_o_row): a warp's store puts its eight key rows' lanes and its four column pairs
  // in 32 different banks (rows D apart put the four pairs in one bank: 4-way conflicts, v9). The padding
  // columns are stored too: skipping them (a branch on the lane's column) cost d = 64 up to 1.7% (v10's try).
  constexpr int kORow = decode_merge_o_row(D);
  float* sM = reinterpret_cast<float*>(sKV);   // (warps, 16)
  float* sL = sM + kWarps * kRows;             // (warps, 16)
  float* sO = sL + kWarps * kRows;             // (warps, 16, kORow)
#pragma unroll
  for (int qt = 0; qt < kQT; ++qt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = 8 * qt + qcol + i;
      const float l = columns::column_sum(col_sum[qt][i]);
      if (key_row == 0) {
        sM[warp * kRows + row] = softmax::scaled_max(col_max[qt][i], c);
        sL[warp * kRows + row] = l;
      }
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        sO[(warp * kRows + row) * kORow + 16 * dt + key_row] = acc_o[dt][qt][i];
        sO[(warp * kRows + row) * kORow + 16 * dt + key_row + 8] = acc_o[dt][qt][i + 2];
      }
    }
  __syncthreads();
  const int64_t all_rows = int64_t(p.batch) * p.q_len * p.heads_q;
  const int chunk_rows = min(kCtaRows, rows - chunk * kCtaRows);
  for (int idx = threadIdx.x; idx < chunk_rows * (D / 8); idx += kThreads) {
    const int row = idx / (D / 8), c0 = (idx % (D / 8)) * 8;
    const int pr = chunk * kCtaRows + row;
    if (c0 >= p.head_dim) continue;
    // Every warp's m, l and 8 columns of O read at once (v9: the reads no longer wait on each other's
    // branches); a warp that saw no key of the row has l = 0 and weighs nothing.
    float mw[kWarps], lw[kWarps];
    float4 ow[kWarps][2];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      mw[w] = sM[w * kRows + row];
      lw[w] = sL[w * kRows + row];
      const float4* from = reinterpret_cast<const float4*>(sO + (w * kRows + row) * kORow + c0);
      ow[w][0] = from[0];
      ow[w][1] = from[1];
    }
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = lw[w] > 0.f ? fmaxf(m, mw[w]) : m;
    float l = 0.f, o[8] = {};
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = lw[w] > 0.f ? exp2_fast(mw[w] - m) : 0.f;
      const float x[8] = {ow[w][0].x, ow[w][0].y, ow[w][0].z, ow[w][0].w,
                          ow[w][1].x, ow[w][1].y, ow[w][1].z, ow[w][1].w};
      l += f * lw[w];
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] += f * x[e];
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? m * kLn2 + logf(l) : -INFINITY;  // m is in log2 units
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] *= inv;
    const int i = pr / group, h = g * group + pr % group;
    const int64_t out_row = (int64_t(b) * p.q_len + i) * p.heads_q + h;  // (batch, q_len, heads_q)
    if (p.num_splits == 1) {
      store8(static_cast<T*>(p.o) + out_row * p.head_dim + c0, o);
      if (c0 == 0) p.lse[(int64_t(b) * p.heads_q + h) * p.q_len + i] = lse;
    } else {
      store8(sc.o_part + (int64_t(split) * all_rows + out_row) * p.head_dim + c0, o);
      if (c0 == 0) sc.lse_part[int64_t(split) * all_rows + out_row] = lse;
    }
  }
}

// ---- combine: one CTA a (batch, query, head) row. Its 256 threads split the row as (column group of 4,
// split group): thread t takes columns 4 (t % C4) .. + 3 (C4 = head_dim / 4 groups) of the splits
// t / C4, t / C4 + G, ... (G = 256 / C4 split groups), and merges them with the online-softmax rule as it
// goes: a running max m of the splits' LSEs, l = sum exp(LSE_s - m), acc = sum exp(LSE_s - m) O_s. A
// thread loads four of its splits' LSEs and O_s at once, then merges them: a round trip to L2 (where the
// split kernel has just written them) for every four (v4-v8 loaded one split after the merge of the one
// before: a round trip each, 0.4 us, which bench/decode_timeline.py found). The G partial merges then meet
// in shared memory: O = acc / l and LSE = m + ln l over the groups.
// (v1: a warp a row, a chain of dependent reads, 48 us at 32 splits under ncu; v2: a warp a row, four
// splits at a time, 17 us; v3: a thread a column, the weights first from three passes over the LSEs,
// then the columns eight splits at a time, 15.9 us at batch 1 x 8k, 32 splits, against cuDNN's 5.2 us.)
constexpr int kCombineThreads = kDecodeCombineThreads;  // shapes.hpp: the simulator counts its steps by them
constexpr int kCombineAtOnce = kDecodeCombineSplitsAtOnce;

struct Merge {  // running max m, weight l = sum exp(x_s - m) w_s, acc = sum exp(x_s - m) a_s (4 columns)
  float m = -INFINITY, l = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  // Adds (x, w, a): a split's (LSE_s, 1, O_s), or another Merge's (m, l, acc).
  __device__ void add(float x, float w, float4 a) {
    if (!(x > -INFINITY)) return;  // a split that saw no key, or an empty merge
    const float m_new = fmaxf(m, x), old = __expf(m - m_new), e = __expf(x - m_new);
    m = m_new;
    l = l * old + e * w;
    acc = make_float4(acc.x * old + e * a.x, acc.y * old + e * a.y, acc.z * old + e * a.z, acc.w * old + e * a.w);
  }
};

template <typename T>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const DecodeParams p) {
  __shared__ float s_m[kCombineThreads], s_l[kCombineThreads];
  __shared__ float4 s_acc[kCombineThreads];
  const int64_t all_rows = int64_t(p.batch) * p.q_len * p.heads_q;
  const int64_t row = blockIdx.x;
  const Scratch<T> sc = scratch_of<T>(p);
  const int c4 = p.head_dim / 4, groups = decode_combine_groups(p.head_dim);
  const int col = threadIdx.x % c4, group = threadIdx.x / c4;
  const int64_t split_stride = all_rows * p.head_dim;
  const float4* part = reinterpret_cast<const float4*>(sc.o_part + row * p.head_dim) + col;
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the split kernel has finished (see run())
#endif
  Merge mine;
  if (group < groups) {
    // Four of the thread's splits at a time, their loads in flight together (v9; until v8 each split waited
    // for the merge of the one before: a round trip, 0.4 us, a split of the thread, bench/decode_timeline.py).
    for (int s0 = group; s0 < p.num_splits; s0 += kCombineAtOnce * groups) {
      float x[kCombineAtOnce];
      float4 a[kCombineAtOnce];
#pragma unroll
      for (int k = 0; k < kCombineAtOnce; ++k) {
        const int s = s0 + k * groups;
        const bool ok = s < p.num_splits;
        x[k] = ok ? sc.lse_part[s * all_rows + row] : -INFINITY;
        a[k] = ok ? part[s * split_stride / 4] : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int k = 0; k < kCombineAtOnce; ++k) mine.add(x[k], 1.f, a[k]);
    }
  }
  s_m[threadIdx.x] = mine.m;
  s_l[threadIdx.x] = mine.l;
  s_acc[threadIdx.x] = mine.acc;
  __syncthreads();
  if (threadIdx.x >= c4) return;
  Merge all;  // column group `col` over the split groups
  for (int g = 0; g < groups; ++g) all.add(s_m[g * c4 + col], s_l[g * c4 + col], s_acc[g * c4 + col]);
  const float inv = all.l > 0.f ? 1.f / all.l : 0.f;
  T* o = static_cast<T*>(p.o) + row * p.head_dim + 4 * col;
  o[0] = T(all.acc.x * inv);
  o[1] = T(all.acc.y * inv);
  o[2] = T(all.acc.z * inv);
  o[3] = T(all.acc.w * inv);
  if (col == 0) {  // row = (b q_len + i) heads_q + h -> LSE (b, h, i)
    const int64_t h = row % p.heads_q, bi = row / p.heads_q, i = bi % p.q_len, b = bi / p.q_len;
    p.lse[(b * p.heads_q + h) * p.q_len + i] = all.l > 0.f ? all.m + logf(all.l) : -INFINITY;
  }
}

// ask() for the current device, asked once a device (the runtime's answers about a device do not change;
// some queries are slow: the memory clock's took about 0.6 ms, and a first v6 build asking it every call
// made every decode call 600-800 us).
template <typename V, typename Ask>
V once_a_device(std::atomic<V> (&known)[64], Ask ask) {
  int dev = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  if (dev >= 64) return ask(dev);
  if (known[dev] <= 0) known[dev] = ask(dev);
  return known[dev];
}

// A device attribute of the current device, asked once a device (the compute capability, the shared memory
// a block may opt in to: sm_90 227 KiB, sm_89 99 KiB; the memory clock and bus width).
template <cudaDeviceAttr kAttribute>
int device_attribute() {
  static std::atomic<int> known[64] = {};
  return once_a_device(known, [](int dev) {
    int value = 0;
    FLASHLAB_CUDA(cudaDeviceGetAttribute(&value, kAttribute, dev));
    return value;
  });
}

// The split kernel for (D, T, softcap) with its shared memory allowed, and how much it takes: Q, and the
// warps' K and V stages (the merge reuses them).
template <int D>
constexpr size_t split_kv_bytes() {
  return size_t(split_warps<D>()) * split_stages<D>() * 2 * kKeys * D * 2;  // bf16 / fp16
}
template <int D, typename T>
constexpr size_t split_smem() {
  constexpr size_t kv = split_kv_bytes<D>();
  static_assert(double(kv) == decode_stage_bytes(decode_split_shape(D)), "the stages are the shape's");
  constexpr size_t merge = size_t(split_warps<D>()) * kRows * (2 + decode_merge_o_row(D)) * sizeof(float);
  constexpr size_t bytes = size_t(kRows) * D * sizeof(T) + (kv > merge ? kv : merge);
  static_assert(bytes == size_t(decode_split_shape(D).smem_bytes), "the kernel's shared memory is its shape's");
  return bytes;
}
template <int D, typename T>
auto split_kernel_for(bool softcap, int rows) {
  auto kernel = decode_cta_rows(rows) == 8
                    ? (softcap ? split_kernel<D, T, true, 1> : split_kernel<D, T, false, 1>)
                    : (softcap ? split_kernel<D, T, true, 2> : split_kernel<D, T, false, 2>);
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(split_smem<D, T>())));
  return kernel;
}

// How many split CTAs one SM holds at once (its shared memory binds: decode_split_shape, two an SM at d <= 128).
template <int D>
int split_ctas_per_sm() {
  static std::atomic<int> known[64] = {};
  return once_a_device(known, [](int) {
    int n = 0;
    FLASHLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, split_kernel_for<D, __nv_bfloat16>(false, 8),
                                                                32 * split_warps<D>(), split_smem<D, __nv_bfloat16>()));
    return n > 0 ? n : 1;
  });
}

// The current device's HBM peak: memory clock x bus width, double data rate.
double hbm_peak_bytes_per_s() {
  const double clock_khz = device_attribute<cudaDevAttrMemoryClockRate>();
  return 2.0 * clock_khz * 1e3 * device_attribute<cudaDevAttrGlobalMemoryBusWidth>() / 8;
}

template <int D, typename T>
void launch_split(const DecodeParams& p, cudaStream_t stream) {
  constexpr size_t smem = split_smem<D, T>();
  auto kernel = split_kernel_for<D, T>(p.softcap > 0.f, packed_rows_of(p));
  kernel<<<dim3(row_chunks_of(p) * p.num_splits, p.heads_kv, p.batch), 32 * split_warps<D>(), smem, stream>>>(p);
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
    // On sm_90 the combine is a programmatic dependent launch: its launch latency hides under the split
    // kernel instead of following it (the split kernel triggers it; the combine waits for its results).
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(unsigned(int64_t(p.batch) * p.q_len * p.heads_q));
    config.blockDim = dim3(kCombineThreads);
    config.stream = stream;
    cudaLaunchAttribute pdl[1] = {};
    pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl[0].val.programmaticStreamSerializationAllowed = 1;
    if (device_attribute<cudaDevAttrComputeCapabilityMajor>() >= 9) {
      config.attrs = pdl;
      config.numAttrs = 1;
    }
    FLASHLAB_CUDA(cudaLaunchKernelEx(&config, combine_kernel<T>, p));
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
  static_assert(kDecodeMaxSplits == 128, "the message below says 128");
  if (p.num_splits < 1 || p.num_splits > kDecodeMaxSplits) return "num_splits must be 1 .. 128";
  if (p.rotary && (p.rotary_dim <= 0 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim || !p.cos || !p.sin))
    return "rotary needs cos, sin and an even rotary_dim <= head_dim";
  const int smem_per_block = device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>();
  if (decode_split_shape(p.head_dim).smem_bytes > smem_per_block)
    return "head_dim on this GPU: the split kernel's shared memory (gpu/shapes.hpp decode_split_shape: 100 KiB a "
           "block at head dims 72-128, 136 KiB at 136-256) is more than the GPU allows a block";
  return "";
}

int decode_num_splits(const DecodeParams& p, int sms, int max_seqlen_k) {
  const int64_t ctas = int64_t(p.batch) * p.heads_kv * row_chunks_of(p);
  // flash-attn's rule (gpu/shapes.hpp split_kv_heuristic: fill the SMs' slots in whole waves) split where
  // the HBM was already full: batch 8 (64 CTAs) in 2, 4-12% slower than no split at 1k-64k keys, and batch
  // 1 in 14-16 where 8 ran as fast (H100, 2026-11-26, bench/results/decode-splits-h100-2026-11-26*.csv).
  // This kernel's rule: shapes.hpp decode_splits_for, with the slots this device really holds.
  int per_sm = 1;
  switch (fa2_padded_head_dim(p.head_dim)) {
    case 64: per_sm = split_ctas_per_sm<64>(); break;
    case 128: per_sm = split_ctas_per_sm<128>(); break;
    case 256: per_sm = split_ctas_per_sm<256>(); break;
  }
  return decode_splits_for(decode_split_shape(p.head_dim), ctas, int64_t(sms) * per_sm, max_seqlen_k,
                           hbm_peak_bytes_per_s());
}

void decode_forward(const DecodeParams& p, cudaStream_t stream) {
  if (const char* why = decode_unsupported(p); *why) throw Error(std::string("decode: unsupported: ") + why);
  if (p.dtype == Dtype::bf16) run<__nv_bfloat16>(p, stream);
  else run<__half>(p, stream);
}

}  // namespace flashlab::gpu
