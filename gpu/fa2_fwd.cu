// fa2: FlashAttention-2 forward on tensor cores, head dims 64 and 128 (every multiple of 8 up to 128,
// zero-padded); head dim 256 runs fa2_fwd_pairs.cu. bf16 / fp16 in, fp32 accumulate; causal and
// sliding-window masks (bottom-right), mask functions (row intervals, a dense mask's bits and block lists),
// softcap, ALiBi and dropout (core's dropout.hpp, the CPU's mask bit for bit), GQA/MQA, seqlen_q !=
// seqlen_k, varlen, LSE out. Mask functions, and ALiBi and dropout on top, are instantiations of their
// own (params.hpp Features), so the kernels without them are unchanged.
//
// The kernel body, top to bottom, by role:
//   scheduler  one CTA per (Q block of Br rows, head, batch): grid (ceil(seqlen_q / Br), heads_q, batch).
//              sequence.cuh's key_blocks gives the K/V blocks [begin, end) the Q block sees and
//              which of them cross the mask's edge; blocks wholly outside it are never visited. Under a
//              dense mask the Q block walks its list instead (BlockWalk: FlexAttention's compressed
//              block mask, partial blocks first), skipping the holes inside the run.
//   producer   every thread issues cp.async copies (mma.cuh load_tile, one 16-byte chunk a thread a
//              step): Q_i once, then K_j and V_j into `stages` XOR-swizzled buffers, the walk's next
//              block in flight while block j is computed.
//   consumer   each warp owns 16 x mma_tiles query rows. S = Q_i K_j^T by mma.sync m16n8k16 (mma.cuh
//              mma_acc: Q and K through ldmatrix, each K fragment feeding mma_tiles MMAs);
//              O_i += P~ V_j with P~ repacked in registers as the A operand and V through ldmatrix.trans.
//   softmax    softmax.cuh on the accumulator fragments: softcap, the edge mask (only on blocks that
//              cross it), row max, exp2 with scale * log2(e) folded into one FMA, row sums, O's rescale;
//              a row's four lanes reduce it by shuffles.
//   epilogue   O_i / l_i once, after the last block (deferred normalization), LSE_i = m_i ln 2 + ln l_i;
//              O stored from the fragments (the d = 256 shapes kept for experiments go through shared
//              memory as 16-byte row chunks).
//
// Tile shape: shapes.hpp's fa2_forward_shape, with the reason for each (`flashlab shapes --hdim 64,128`):
// 4 warps of two 16-row MMA tiles (Br = 128), two K/V stages; Bc = 128 keys at d = 64 (80 KiB of
// shared memory), 64 at d = 128 (96 KiB); two CTAs an SM.
//
// Where it stands: NVIDIA H100 80GB HBM3, 2026-11-22, forward v8, bf16, batch x seqlen = 16k, heads x
// d = 2048, against SDPA flash (FlashAttention 2) in the same process, s = 1k-16k, two sweeps
// (bench/results/gpu-h100-2026-11-22-fa2v9.md, -fa2v9-run2.csv): d = 64 1.04-1.09x (339 vs 313
// TFLOP/s at s = 16k), d = 128 1.01-1.08x (373 vs 346). cuDNN (wgmma) runs 642 TFLOP/s at d = 128
// s = 16k in the same run: mma.sync cannot reach it, an FA3-style kernel is the next step.
//
// Version index (bench/gpu_compare.py, bench/ab_libs.py; the full entries, with every experiment tried
// and not kept, are in gpu/HISTORY.md):
//   v1  Br = Bc = 64, 4 warps, 2-stage cp.async, swizzled shared memory: H200 d = 128 s = 4k 0.45x flash.
//   v2  two MMA row tiles a warp (255 registers, slower at d = 64) and the mask only on edge tiles (kept).
//   v3  v1's shapes with v2's edge-only mask: H200 0.43-0.63x.
//   v4  softcap a template parameter, mask test out of the element loops, ex2.approx: 0.64-0.87x.
//   v5  tile loads with one fixed chunk a thread; two row tiles a warp for d <= 128; any head dim that is
//       a multiple of 8, zero-padded: H200 0.88-1.05x.
//   v6  ldmatrix addresses a register plus a constant (the swizzle's XOR split): H100 0.91-1.05x.
//   v7  fewer instructions a block (ncu's SASS counts): load_tile's predicates, Ldsm's immediate offsets,
//       d = 256's shared-memory epilogue: H100 0.97-1.12x.
//   v8  d = 256 moves to fa2_fwd_pairs.cu; K/V blocks of 128 keys at d = 64; the shared softmax steps in
//       softmax.cuh, key_blocks in sequence.cuh: H100 1.00-1.09x, every cell of the sweep at 1.0x or more.
//   v9  under a mask function the tiles dealt longest walk first, in L2 sections of (batch, head) pairs
//       sized by the longest walk and evened out (tile_order.hpp; the grid's order left the longest
//       document's tiles for the last wave): mask_ms / (density x nomask_ms) 1.00-1.23 (was 1.10-1.33 in
//       the grid's order on the same H100, 2026-11-26), within 1.2 on 11 and 10 of 12 cells in two runs
//       (grid order 6; bench/results/masks-h100-2026-11-26-fa2-*.csv); other instantiations unchanged. ptxas:
//       the mask kernels spill 84 B at d = 64 and 68 B at d = 128 (12 and 16 before: the tile's head,
//       entry and Q block are registers now, not blockIdx).
//   v10 the mask kernel at d = 64 keeps its rows' column intervals in shared memory, not registers
//       (rows_in_smem): spills inside its loop 15 -> 5 (SASS), 1.08-1.12x faster masked at d = 64 in one
//       process, outputs bit for bit the same: mask_ms / (density x nomask_ms) forward 1.01-1.11 on all 12
//       cells (H100, 2026-11-27, bench/results/masks-h100-2026-11-27-fa2-rows-in-smem.csv).
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
#include "tile_order.hpp"

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

// Two ints that travel as one value (a thread's two rows of an MMA tile).
struct Pair {
  int v[2];
};

// Whether a kernel parks its rows' column intervals in shared memory (4 kMT ints a thread, after V's
// stages) instead of registers: the mask kernel at d = 64, where held in registers they pushed other
// values out to local memory inside the loop (ptxas -v 84 -> 28 bytes of spill stores; SASS spills in its
// MMA loop 15 -> 5) and the kernel ran 1.04-1.12x faster on every document and prefix-LM cell (H100,
// 2026-11-27; gpu/HISTORY.md). 84 KiB a CTA, still two an SM.
template <int D>
constexpr bool rows_in_smem(Features f) { return f == Features::mask && D == 64; }
// The shared memory a kernel of shape S takes with features f: its tiles', and the parked intervals'.
template <class S, typename T>
constexpr size_t smem_bytes(Features f) {
  return size_t(S::smem_elems()) * sizeof(T) + (rows_in_smem<S::D>(f) ? 4 * S::kMT * S::kThreads * sizeof(int) : 0);
}

// ---- the kernel
template <class S, typename T, bool kSoftcap, Features kF>
__global__ void __launch_bounds__(S::kThreads) fa2_forward_kernel(const AttentionParams p) {
  constexpr int D = S::D, kMT = S::kMT, kBc = S::kBc, kStages = S::kStages, kBr = S::kBr;
  constexpr int kThreads = S::kThreads;
  constexpr bool kMask = kF != Features::none;      // a mask function's rows, bits and block lists
  constexpr bool kExtras = kF == Features::extras;  // ALiBi and dropout
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // (Br, D)
  T* sK = sQ + kBr * D;                     // (stages, Bc, D)
  T* sV = sK + kStages * kBc * D;           // (stages, Bc, D)

  // The tile: the grid's (Q block, head, entry), or under a mask function (no ALiBi or dropout) the
  // longest-first deal of tile_order.hpp, blockIdx.x its index (launch() says why).
  int i_block = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  if constexpr (kF == Features::mask) {
    if (p.fa2_forward_deal.lines) {
      const AttentionParams::Deal& deal = p.fa2_forward_deal;
      const DealtTile t = longest_first_tile(int(blockIdx.x), deal.len, p.heads_q * p.batch, deal.sections, deal.lines);
      i_block = t.line;
      h = t.pair % p.heads_q;
      b = t.pair / p.heads_q;
    }
  }
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
  // With kMask a mask function's row intervals may replace the window rule (sequence.cuh RowMask);
  // without, the window rule as it was (the same registers: ptxas spilled more through the struct).
  const RowMask rm = row_mask<kMask>(p, seq, b);
  const auto blocks = kMask ? key_blocks<kBr, kBc>(row0, rm)
                              : key_blocks<kBr, kBc>(row0, sq, sk, p.window_left, p.window_right);
  const int j_begin = blocks.begin, j_end = blocks.end;
  // With kMask the blocks walked are those of `walk`: the same run, or under a dense mask this Q
  // block's list. Without, the loop below reads exactly as it did before lists (j from j_begin to
  // j_end): ptxas gave the d = 128 kernel 60 more bytes of spills when it walked a BlockWalk.
  const BlockWalk walk = kMask ? block_walk(p.forward_blocks, b, i_block, j_begin, j_end) : BlockWalk{};

  // Accumulators: O (16 kMT rows x D per warp) and the running max / sum of the thread's rows.
  float acc_o[kMT][D / 8][4];
  float row_max[kMT][2], row_sum[kMT][2];
  // The columns [lo, hi) each of this thread's rows sees: held in registers for the loop; with kExtras read
  // per tile (holding them beside ALiBi's and dropout's registers cost spills); in the mask kernel at d = 64
  // parked in shared memory after V's stages and read back on the tiles that cross the mask's edge
  // (rows_in_smem says why).
  constexpr bool kRowsInSmem = rows_in_smem<D>(kF);
  int lo[kMT][2], hi[kMT][2];
  int* const smem_rows = reinterpret_cast<int*>(sV + kStages * kBc * D) + threadIdx.x;  // lo, hi: kThreads apart
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    zero(acc_o[mt]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mt][r] = -INFINITY;
      row_sum[mt][r] = 0.f;
      const int row = row0 + (warp * kMT + mt) * 16 + qrow + 8 * r;
      lo[mt][r] = kExtras ? 0 : kMask ? rm.begin(row) : col_begin(row, sq, sk, p.window_left);
      hi[mt][r] = kExtras ? 0 : kMask ? rm.end(row) : col_end(row, sq, sk, p.window_right);
      if constexpr (kRowsInSmem) {
        smem_rows[(2 * mt + r) * kThreads] = lo[mt][r];
        smem_rows[(2 * (kMT + mt) + r) * kThreads] = hi[mt][r];
      }
    }
  }
  // This thread's two rows in MMA tile mt, plus `shift` (sk - sq: their diagonal's column, for ALiBi);
  // made where they are used (with kExtras), since holding them for the whole loop cost spills.
  auto rows_of = [&](int mt, int shift) {
    const int row = row0 + (warp * kMT + mt) * 16 + qrow + shift;
    return Pair{row, row + 8};
  };
  const float c = kSoftcap ? kLog2e : p.scale * kLog2e;  // scores -> log2 units
  // ALiBi's slope in the units of the scores (unscaled unless softcapped); dropout's key of this head.
  const float slope = kExtras && p.alibi_slopes ? p.alibi_slopes[h] / (kSoftcap ? 1.f : p.scale) : 0.f;
  const uint64_t drop_key = kExtras ? flashlab::dropout::head_key(p.dropout_seed, b, h) : 0;
  // ldmatrix addresses: four lane offsets an operand, and compile-time offsets for the blocks.
  const Ldsm<D, Frag::A> ldsm_q(lane);
  const Ldsm<D, Frag::B> ldsm_k(lane);
  const Ldsm<D, Frag::BTrans> ldsm_v(lane);
  const uint32_t q_warp = smem_addr(sQ) + 2u * uint32_t(warp * kMT * 16 * D);  // this warp's rows of Q

  // n: block j's place in the walk (kMask); `more`: a block comes after j; `next`: which.
  auto more = [&](int j, int n) { return kMask ? n + 1 < walk.count : j + 1 < j_end; };
  auto next = [&](int j, int n) { return kMask ? walk.block(n + 1) : j + 1; };
  const int j_first = kMask ? walk.block(0) : j_begin;
  if (kMask ? walk.count > 0 : j_begin < j_end) {
    load_tile<D, kThreads, kBr>(sQ, q, p.q_row_stride, row0, sq, p.head_dim);
    load_tile<D, kThreads, kBc>(sK, k, p.k_row_stride, j_first * kBc, sk, p.head_dim);
    load_tile<D, kThreads, kBc>(sV, v, p.v_row_stride, j_first * kBc, sk, p.head_dim);
    cp_async_commit();
  }

  for (int j = j_first, n = 0; kMask ? n < walk.count : j < j_end; j = more(j, n) ? next(j, n) : j_end, ++n) {
    const int stage = kStages == 2 ? (kMask ? n : j - j_begin) & 1 : 0;
    cp_async_wait<0>();
    __syncthreads();  // tile j is in shared memory for every warp; every warp is done with the one before
    if (kStages == 2 && more(j, n)) {  // prefetch the next tile into the other stage while computing j
      load_tile<D, kThreads, kBc>(sK + (stage ^ 1) * kBc * D, k, p.k_row_stride, next(j, n) * kBc, sk, p.head_dim);
      load_tile<D, kThreads, kBc>(sV + (stage ^ 1) * kBc * D, v, p.v_row_stride, next(j, n) * kBc, sk, p.head_dim);
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
    if (kExtras && slope != 0.f) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) softmax::alibi(acc_s[mt], j * kBc, qcol, rows_of(mt, sk - sq).v, slope);
    }
    if (kMask && walk.list ? walk.listed_partial(n) : blocks.needs_mask(j)) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (kExtras) {  // a mask function's rows: their intervals read where needed
          const Pair row = rows_of(mt, 0);
          const int row_lo[2] = {rm.begin(row.v[0]), rm.begin(row.v[1])}, row_hi[2] = {rm.end(row.v[0]), rm.end(row.v[1])};
          softmax::mask(acc_s[mt], j * kBc, qcol, row_lo, row_hi);
        } else if constexpr (kRowsInSmem) {
          const int row_lo[2] = {smem_rows[2 * mt * kThreads], smem_rows[(2 * mt + 1) * kThreads]};
          const int row_hi[2] = {smem_rows[2 * (kMT + mt) * kThreads], smem_rows[(2 * (kMT + mt) + 1) * kThreads]};
          softmax::mask(acc_s[mt], j * kBc, qcol, row_lo, row_hi);
        } else {
          softmax::mask(acc_s[mt], j * kBc, qcol, lo[mt], hi[mt]);
        }
      }
      if (kMask && p.bits.words) {  // a dense mask's holes, this thread's rows of bits
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          const Pair row = rows_of(mt, 0);
          const BitRow bits[2] = {bit_row(p.bits, b, h, row.v[0], sq), bit_row(p.bits, b, h, row.v[1], sq)};
          softmax::mask_bits(acc_s[mt], j * kBc, qcol, bits);
        }
      }
    }

    // Online softmax on unscaled scores s (max taken before scaling; the scale folds into one FMA):
    //   m_new = max(m, rowmax s), alpha = exp2((m - m_new) c), P~ = exp2(s c - m_new c), l = alpha l + rowsum P~
    // with c = scale * log2(e) (log2(e) under softcap).
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r)  // row sums quad-reduced once, at the end
        alpha[r] = softmax::online_step(acc_s[mt], r, c, row_max[mt][r], row_sum[mt][r]);
      softmax::rescale(acc_o[mt], alpha);
      if (kExtras && p.dropout_threshold != 0)  // after the row sums: the statistics are dropout's input
        softmax::dropout(acc_s[mt], j * kBc, qcol, rows_of(mt, 0).v, drop_key, p.dropout_threshold);
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
    if (kStages == 1 && more(j, n)) {
      load_tile<D, kThreads, kBc>(sK, k, p.k_row_stride, next(j, n) * kBc, sk, p.head_dim);
      load_tile<D, kThreads, kBc>(sV, v, p.v_row_stride, next(j, n) * kBc, sk, p.head_dim);
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
      const float inv = l > 0.f ? (kExtras ? p.dropout_keep_scale : 1.f) / l : 0.f;
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
  const size_t smem = smem_bytes<S, T>(p.features());
  check_block_lists(p.forward_blocks, S::kBr, S::kBc, "fa2 forward");
  const auto kernel = pick_instantiation(p, [](auto cap, auto f) {
    return &fa2_forward_kernel<S, T, decltype(cap)::value, decltype(f)::value>;
  });
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // Under a mask function the Q blocks' walks differ (documents follow their lengths, prefix-LM grows), and
  // the grid's order, Q block 0 first, left the longest tiles for the last wave: the tiles go longest walk
  // first in L2-sized sections of (batch, head) pairs instead (tile_order.hpp, the deal DeviceMask made),
  // one grid dimension of all of them, since the hardware deals a grid's CTAs in blockIdx order.
  const int num_m = (p.seqlen_q + S::kBr - 1) / S::kBr;
  dim3 grid(num_m, p.heads_q, p.batch);
  if (p.fa2_forward_deal.lines && p.features() == Features::mask) {
    if (p.fa2_forward_deal.len != num_m)
      throw Error("fa2 forward: the mask's Q block order has " + std::to_string(p.fa2_forward_deal.len) +
                  " blocks, the launch " + std::to_string(num_m) + " (made for other tiles)");
    grid = dim3(unsigned(num_m * p.heads_q * p.batch));
  }
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
