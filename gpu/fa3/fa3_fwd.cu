// fa3: a FlashAttention-3-style forward for Hopper (sm_90a), bf16 / fp16 in, fp32 accumulate; causal and
// sliding-window masks (bottom-right), softcap, GQA/MQA (a kv head's query heads packed into one tile where
// that fills it better: PackGQA, scheduler.cuh), seqlen_q != seqlen_k, varlen, LSE out. Head dims
// 64, 128 and 256 (every multiple of 8 up to 256, zero-padded by the copy engine). Every mask function fa2
// takes, on fixed-length batches (a kMask instantiation, so the kernels without one keep their code):
// prefix-LM, document and chunked as each row's interval of keys (params.hpp mask_lo / mask_hi), a dense
// mask as its bits and FlexAttention's block lists at this kernel's tiles (DenseBits, fa3_blocks).
// ALiBi and dropout are fa2's only.
//
// FP8 (fa3_fp8_forward, at the end of this file; since v20 with v19's staged epilogue at d = 128, v21's at 256): the same
// kernel on float8 e4m3 Q, K and V with a descale a
// tensor, O in bf16. Rows of 128 bytes hold 128 elements, so the tiles are 128 x 128 at d = 128 and 256;
// wgmma's k-step is 32 elements (QGMMA); P~ goes to e4m3 in registers; FP8's wgmma reads its B operand only
// K-major, so a transpose kernel writes V^T first, each 32-key group in the order of a thread's P~ registers
// (fp8_key_order), and P~ needs no shuffle. Causal and sliding windows, softcap, GQA; fixed-length batches.
//
// The kernel, by role (one CTA per SM, persistent; a producer and Shape::kConsumers consumer warpgroups):
//   scheduler  scheduler.cuh: tiles (Q block of Br rows, head, batch) handed to the persistent CTAs as
//              they ask (an atomic counter); under a causal mask longest first, in L2-sized sections
//              (under a mask function too: its tiles are as unequal).
//   producer   producer.cuh: warpgroup 0 (one thread issues, the rest of the warpgroup exits after giving back its
//              registers): Q_i by the bulk tensor copy engine (TMA), then K_j and V_j into `stages`
//              128-byte-swizzled buffers, each completing on its own mbarrier; a buffer is refilled
//              when the consumers' arrivals on its "empty" mbarrier say they are done with it. The
//              blocks: sequence.cuh's key_blocks of the window or of a mask function's row intervals,
//              or under a dense mask the Q block's list (BlockWalk), walked alike by the consumers.
//   consumer   consumer.cuh: warpgroups 1 and 2, 64 query rows each: S = Q_i K_j^T by wgmma (both operands
//              from shared memory), softmax on the accumulators in registers, O += P V_j by wgmma with P
//              from registers and V read transposed from shared memory; S_{j+1} and P_j V_j in flight
//              together (intra-warpgroup overlap) and the two warpgroups' GEMMs in turns (ping-pong).
//   softmax    gpu/softmax.cuh on the wgmma accumulators (their layout is mma.sync's C fragment a warp):
//              softcap, the edge mask (blocks that cross it; a dense mask's bits on its partial blocks),
//              row max, exp2 with the scale folded in, row sums, O's rescale; a row's four lanes reduce by
//              shuffles. A row that sees no key ends with O = 0 and LSE = -inf.
//   epilogue   epilogue.cuh: O_i / l_i and LSE_i; a whole tile's O through shared memory (its own buffer at
//              D <= 128, V's stages at 256) and out by a bulk tensor store that runs on under the next tile; a
//              ragged or packed tile, or an O no tensor map takes, straight from registers.
//
// Tile shape: shapes.hpp's fa3_forward_shape (`flashlab shapes --algo fa3`).
//
// Where it stands (bf16, batch x seqlen = 16k, heads x d = 2048, s = 1k-16k, against SDPA's cuDNN backend timed in
// the same process): NVIDIA H100 80GB HBM3, 2026-12-07, v23, two runs (bench/results/gpu-h100-2026-12-07-fa3-v23-
// fwdbwd.csv, -v23-run2-fwd.csv): d = 64 0.92-1.20x (causal 0.92-1.14x), d = 128 0.96-1.05x (causal 0.95-1.06x),
// d = 256 1.01-1.12x (causal 0.94-1.06x); 1.65-1.85x our fa2 at d = 128, s >= 4k. NVIDIA H200, 2026-11-29, v23, two
// processes (gpu-h200-2026-11-29-fa3-v23.csv, -v23-fwdbwd.csv): d = 64 0.94-1.16x (causal 0.93-1.15x), d = 128
// 0.96-1.04x (causal 0.98-1.07x), d = 256 1.04-1.13x (causal 0.96-1.12x). H200 and H100 times are not comparable.
// What binds the H100's short cells but d = 64 s = 1k (power-clocks-h100-2026-12-07-fa3-v23.csv, ncu-h100-2026-12-07-*):
// the 700 W cap; ours runs 5-11% lower SM clocks than cuDNN's (d = 256 s = 16k causal 1530 against 1710 MHz) in
// fewer cycles (there 2.56 M against 2.87 M under ncu), 1.00-1.08x in a loop without an L2 flush, 0.94-0.97x in
// do_bench's sweep.
// What binds d = 64 at s = 1k (per-tile timeline and power probe, H200, 2026-11-29; gpu/HISTORY.md): a round of
// the three warpgroups' blocks needs 1536 cycles of tensor cores and 1536 of exponentials and takes about their
// sum (2921 cycles); a tile spends 1.6 blocks' worth beyond its loop, and the ragged first tile two thirds of a
// full one for a third of its rows; both kernels run at the board's 700 W limit, ours at an equal or higher clock.
//
// Version index: each step and what it measured (bench/gpu_compare.py sweeps; from v14 A/B in one process, both
// orders, bench/ab_libs.py --kernel fa3). TFLOP/s at d = 128 s = 16k non-causal / causal, cuDNN's from the same
// run. Every entry in full, with its runs and the steps tried and not kept: gpu/HISTORY.md.
//   v1  TMA + wgmma; a producer and two consumer warpgroups (setmaxnreg 24 / 240), two K/V stages, persistent
//       CTAs dealt tiles round-robin. H100, 2026-11-23: 589 / 384 (cuDNN 600 / 588).
//   v2  intra-warpgroup overlap (S_{j+1} beside P_j V_j), ping-pong turns: 617 / 516 (v1 562 / 398 in one process).
//   v3  causal tiles longest first within L2-sized sections of heads: 604 / 500 (cuDNN 587 / 574).
//   v4  causal tiles handed out by an atomic counter: causal +10-35%, causal 16k DRAM bytes 2.03 -> 0.37 GB.
//   v5  (not kept) setmaxnreg 32 / 240 hung: the counts must add up to the launch's registers (static_assert).
//   v6  v4 with the non-causal tiles dealt statically: 604 / 504 (cuDNN 618 / 545).
//   v7  any number of consumer warpgroups (three at d = 64 then measured 0.83-1.06x of two).
//   v8  mask functions (kMask): documents 10.1-11.0x cuDNN's dense mask at s = 16k (masks-h100-2026-11-23-fa3.csv).
//   v9  FP8 (e4m3, V^T by a transpose kernel), H100, 2026-11-24: 1.28-1.39x our bf16 at d = 128, s >= 4k, 980
//       TFLOP/s at d = 256 s = 16k (fp8-h100-2026-11-24.csv).
//   v10 d = 256 with 80-key blocks (FA3's): 0.99-1.07x of 64 (ab-h100-2026-11-24-fa3-d256-bc80.csv).
//   v11 PackGQA: 8 query heads a kv head, seqlen_q 1-64, 1.83-2.21x unpacked (gqa-pack-h100-2026-11-24.csv).
//   v12 masked tiles longest walk first: documents at d = 64, 8k-16k, +5%.
//   v13 the sections from gpu/tile_order.hpp, shared with fa2: masked time within 1.2x of density on 11-12 of 12.
//   v14 k-step descriptors made where issued (ptx.cuh fresh): d = 256's loop without spills, +1.8% to +5.3%.
//   v15 the warpgroup index broadcast from lane 0: d = 256 +1.2% to +4.4%, d <= 128 0.98-1.05x.
//   v16 the step count, tile and walk bounds from lane 0: R2UR 77 -> 3 in d = 128's loop, ncu 90.5 M -> 77.3 M
//       instructions at s = 1k (cuDNN 81.4 M); +0.4% to +9.8% a cell (H100, 2026-11-27).
//   v17 three consumer warpgroups at d = 64 (192-row tiles): +3% to +16%, s = 1k causal -7.5% (H100, 2026-11-27).
//   v18 Q blocks counted from the sequence's end where Br > Bc (the ragged block first, its causal walk the
//       shortest): d = 64 s = 1k causal +11.3% (NVIDIA H200, 2026-11-28, as every step below).
//   v19 two Q buffers and O out through shared memory by a bulk tensor store at 16-bit d <= 128: d = 128 +5.8%
//       to +10.5% (s = 4k causal +1.0%); 626 / 601 (cuDNN 613 / 556).
//   v20 the same for FP8 at d = 128: +3.0% to +6.2%; 1.30-1.40x our bf16 at s >= 4k (fp8-h200-2026-11-28-v20.csv).
//   v21 d = 256's O staged in V's two stages once the last P V has read them: +13.1% at s = 1k, +1% to +4% from
//       4k; d = 256 s = 16k 696 / 610 (cuDNN 662 / 602).
//   v22 v21's stage freed a tile later: d = 256 +1.8% to +7.7%; d = 256 s = 16k 739 / 623 (cuDNN 670 / 602).
//   v23 each consumer warpgroup walks only its own rows' key blocks where Br > Bc, the producer releasing the
//       skipped stages: d = 64 causal +4.2% (s = 1k), +5.3% (2k), the rest within the runs' spread.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "../cuda_check.hpp"
#include "../kernels.hpp"
#include "../shapes.hpp"
#include "consumer.cuh"
#include "producer.cuh"
#include "tensor_maps.hpp"

namespace flashlab::gpu {
namespace {

using namespace fa3;

// ---- the kernel: set up the mbarriers, split the warpgroups into their roles.

// kMask: a mask function (params.hpp mask_lo / mask_hi, and under a dense mask its bits and fa3_blocks);
// without it the kernels keep the window rule's code as it was. kPack: PackGQA's tiles (scheduler.cuh;
// never with kMask), compiled apart so that the unpacked kernels keep kBr rows a constant.
template <class S, typename T, bool kSoftcap, bool kMask, bool kPack>
__global__ void __launch_bounds__(S::kThreads, 1)
    fa3_forward_kernel(const __grid_constant__ AttentionParams p, const __grid_constant__ CUtensorMap map_q,
                       const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                       const __grid_constant__ CUtensorMap map_o, const TileScheduler sched, const bool o_tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a only: other targets compile an empty kernel, never launched
  extern __shared__ unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<Smem<S, T>*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wg = warp_uniform_index(128);
  if (threadIdx.x == 0) {
    tma_prefetch_map(&map_q);
    tma_prefetch_map(&map_k);
    tma_prefetch_map(&map_v);
    if (o_tma) tma_prefetch_map(&map_o);
    for (int b = 0; b < Smem<S, T>::kQBuffers; ++b) {
      mbar_init(&sm.q_full[b], 1);
      mbar_init(&sm.q_empty[b], S::kConsumerWarps);
    }
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(&sm.k_full[s], 1);
      mbar_init(&sm.v_full[s], 1);
      mbar_init(&sm.k_empty[s], S::kConsumerWarps);
      mbar_init(&sm.v_empty[s], S::kConsumerWarps);
    }
    for (int slot = 0; slot < 2; ++slot) {
      mbar_init(&sm.tile_full[slot], 1);
      mbar_init(&sm.tile_empty[slot], S::kConsumerWarps);
    }
    if constexpr (kOInV<S, T>) mbar_init(&sm.o_free, S::kConsumers);
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    regs_dealloc<S::kProducerRegs>();
    if (threadIdx.x == 0) produce<S, T, kMask, kPack>(sm, p, sched, &map_q, &map_k, &map_v);
  } else {
    regs_alloc<S::kConsumerRegs>();
    consume<S, T, kSoftcap, kMask, kPack>(sm, p, sched, wg - 1, &map_o, o_tma);
  }
#endif
}

// The shape of each compiled head dim and element type: shapes.hpp's fa3_forward_shape, or for FP8 (one
// byte an element) fa3_fp8_forward_shape.
template <int D, typename T>
struct KernelOf {
  static constexpr TileShape s = sizeof(T) == 1 ? fa3_fp8_forward_shape(D) : fa3_forward_shape(D);
  using type = Shape<D, s.block_n, s.stages, s.block_m / 64>;
  static_assert(s.head_dim == D && type::kBr == s.block_m && type::kThreads == s.threads,
                "shapes.hpp's fa3 forward shape must be a shape of this file's kernel");
  static_assert(sizeof(Smem<type, T>) + 1024 <= size_t(s.smem_bytes),
                "shapes.hpp's shared memory must cover the kernel's (with its 1024-byte alignment)");
  static constexpr size_t smem = s.smem_bytes;
};

// The scheduler's two counters, one pair a stream (launches on one stream run in order; the kernel leaves
// them at zero), allocated and zeroed at a stream's first launch on this device.
int* tile_counter(cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, int*> counters;
  int dev = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mutex);
  int*& c = counters[{dev, stream}];
  if (!c) {
    FLASHLAB_CUDA(cudaMalloc(&c, 2 * sizeof(int)));
    FLASHLAB_CUDA(cudaMemset(c, 0, 2 * sizeof(int)));
  }
  return c;
}

// PackGQA (scheduler.cuh) can run where a tile of br rows holds every query head of a kv head (the group
// divides br) and no mask function is read per row and head (a dense mask's bits, its block lists).
bool packable(const AttentionParams& p, int br) {
  const int group = p.heads_q / p.heads_kv;
  return group <= br && br % group == 0 && !p.mask_lo && !p.bits.words;
}

// A launch's pack (query heads a tile): the group where PackGQA is asked for, or, automatically, where it
// fills more of the tiles' rows: FA3's rule, packing when the unpacked tiles' fill, sq / (br ceil(sq /
// br)), is under 0.9 of the packed tiles' (short query sequences: decoding, speculative steps, prefill
// chunks). Long sequences fill both alike and stay unpacked (the same tiles; no cost to measure there).
int pack_of(const AttentionParams& p, int br) {
  const int group = p.heads_q / p.heads_kv;
  if (p.pack_gqa == PackGqa::off || group == 1 || !packable(p, br)) return 1;
  if (p.pack_gqa == PackGqa::on) return group;
  const auto fill = [br](int64_t rows) { return double(rows) / (double(br) * double((rows + br - 1) / br)); };
  return fill(p.seqlen_q) < 0.9 * fill(int64_t(p.seqlen_q) * group) ? group : 1;
}

// The tile scheduler of a launch: Q blocks of br rows (br / pack positions of pack heads), handed out
// longest first (under a causal mask or a mask function) within sections of (batch, head unit) pairs
// whose K and V (elem_bytes an element, a kv head shared by its group's head units) fit half the L2.
TileScheduler scheduler_of(const AttentionParams& p, int br, int d, int elem_bytes, bool longest_first, int pack,
                           cudaStream_t stream) {
  const double kv_bytes = forward_block_bytes(p.seqlen_k, d, p.heads_q / p.heads_kv / pack, elem_bytes);
  const int sections = l2_sections(device_attribute(cudaDevAttrL2CacheSize), kv_bytes, p.heads_q / pack * p.batch);
  const int rows = br / pack;
  return TileScheduler{(p.seqlen_q + rows - 1) / rows, p.heads_q / pack, p.batch, pack,
                       longest_first, sections, tile_counter(stream)};
}

// Whether a launch's O can go out through a tensor map (epilogue.cuh's staged stores): the map's 16-byte aligned
// base and strides, batch and sequence folded into rows as Q's map folds them.
bool o_fits_tensor_map(const AttentionParams& p) {
  const bool folded = p.cu_seqlens_q || p.o_batch_stride == int64_t(p.seqlen_q) * p.o_row_stride;
  return folded && reinterpret_cast<uintptr_t>(p.o) % 16 == 0 && (p.o_row_stride * 2) % 16 == 0 &&
         (p.o_head_stride * 2) % 16 == 0;
}

// O's map for the staged stores (16-bit O, q_rows rows, 64-row boxes: one consumer warpgroup's), where the launch
// does not pack and O's strides allow; else no map (o_tma false) and `unused` in its place (a kernel parameter
// the kernel then never reads).
std::pair<CUtensorMap, bool> o_map(const AttentionParams& p, int64_t q_rows, int pack, const CUtensorMap& unused) {
  if (pack != 1 || !o_fits_tensor_map(p)) return {unused, false};
  return {rows_heads_map(p.o, q_rows, p.heads_q, p.head_dim, p.o_row_stride, p.o_head_stride, 64), true};
}

template <int D, typename T>
void launch(const AttentionParams& p, cudaStream_t stream) {
  using S = typename KernelOf<D, T>::type;
  constexpr size_t smem = KernelOf<D, T>::smem;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t q_rows = varlen ? p.total_q : int64_t(p.batch) * p.seqlen_q;
  const int64_t k_rows = varlen ? p.total_k : int64_t(p.batch) * p.seqlen_k;
  const int pack = pack_of(p, S::kBr);
  const CUtensorMap map_q = rows_heads_map(p.q, q_rows, p.heads_q, p.head_dim, p.q_row_stride, p.q_head_stride,
                                           S::kBr / pack, 2, pack);
  const CUtensorMap map_k = rows_heads_map(p.k, k_rows, p.heads_kv, p.head_dim, p.k_row_stride, p.k_head_stride, S::kBc);
  const CUtensorMap map_v = rows_heads_map(p.v, k_rows, p.heads_kv, p.head_dim, p.v_row_stride, p.v_head_stride, S::kBc);
  const bool causal = p.window_right == 0 && p.window_left < 0, mask = p.mask_lo != nullptr;
  check_block_lists(p.fa3_blocks, S::kBr, S::kBc, "fa3 forward");
  // Under a mask function the Q blocks' walks differ in length too, so they take the causal path: the
  // atomic counter, which balances whatever the lengths (a CTA that drew short tiles takes more), within
  // L2-sized sections, in the mask's longest-walk-first order (DeviceMask made the deal once, with the
  // mask: tiled::longest_first, the sections sized by the longest walk's K/V). The causal order, last Q
  // block first, was that for prefix-LM but not for documents (fa3's document rows missed 1.2x their
  // density's time: bench/README.md).
  TileScheduler sched = scheduler_of(p, S::kBr, D, 2, causal || mask, pack, stream);
  if (mask && p.fa3_forward_deal.lines) {
    if (p.fa3_forward_deal.len != sched.num_m)
      throw Error("fa3 forward: the mask's Q block order has " + std::to_string(p.fa3_forward_deal.len) +
                  " blocks, the launch " + std::to_string(sched.num_m) + " (made for other tiles)");
    sched.m_order = p.fa3_forward_deal.lines;
    sched.sections = p.fa3_forward_deal.sections;
  }
  // kMask for every level above none (fa3_forward_unsupported refuses the extras, ALiBi and dropout);
  // kPack where the launch packs (never under a mask function: packable).
  const auto kernel = pick_instantiation(p, [pack](auto cap, auto f) {
    constexpr bool kCap = decltype(cap)::value;
    if constexpr (decltype(f)::value != Features::none) return &fa3_forward_kernel<S, T, kCap, true, false>;
    else return pack > 1 ? &fa3_forward_kernel<S, T, kCap, false, true> : &fa3_forward_kernel<S, T, kCap, false, false>;
  });
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // O through the copy engine where the kernel stages it (epilogue.cuh).
  const auto [map_o, o_tma] = o_map(p, q_rows, pack, map_q);
  const int grid = std::min(sched.count(), device_attribute(cudaDevAttrMultiProcessorCount));
  kernel<<<grid, S::kThreads, smem, stream>>>(p, map_q, map_k, map_v, map_o, sched, o_tma);
  FLASHLAB_CUDA_LAUNCHED();
}

// ---- FP8: e4m3 Q, K and V with per-tensor descales, bf16 O. The same kernel on 1-byte elements; V^T
// written first by fp8_transpose_v, since FP8's wgmma reads its B operand K-major only.

// V^T's key order within each group of 32 keys (consumer.cuh p_to_a): position k holds key fp8_key_order(k).
__host__ __device__ constexpr int fp8_key_order(int k) {
  const int half = k / 16, t = (k % 16) / 4, i = k % 4;
  return 16 * half + (i < 2 ? 2 * t + i : 8 + 2 * t + i - 2);
}
static_assert(fp8_key_order(0) == 0 && fp8_key_order(2) == 8 && fp8_key_order(4) == 2 && fp8_key_order(31) == 31,
              "the k32 A fragment's columns 4t..4t+3 are a thread's keys 2t, 2t+1, 8+2t, 9+2t");

// V (batch, seqlen_k, heads_kv, head_dim) -> V^T (batch x heads_kv planes, head_dim rows, `keys` = seqlen_k
// rounded up to 32), each 32-key group in fp8_key_order, keys past seqlen_k zero. A CTA of 256 threads moves
// a 64-key x 64-column tile through shared memory: in, 16 bytes of a key's row a thread; out, a 4 x 4 block
// of bytes a thread (four keys' words, transposed by byte permutes into four columns' words), sixteen
// threads writing 64 bytes of a row of V^T.
__global__ void __launch_bounds__(256) fp8_transpose_v(const AttentionParams p, uint8_t* vt, int keys) {
  __shared__ __align__(16) uint8_t tile[64][64 + 16];
  const int key0 = blockIdx.x * 64, col0 = blockIdx.y * 64, plane = blockIdx.z;
  const int b = plane / p.heads_kv, h = plane % p.heads_kv;
  const uint8_t* v = static_cast<const uint8_t*>(p.v) + b * p.v_batch_stride + h * p.v_head_stride;
  {
    const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 16;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (key0 + r < p.seqlen_k && col0 + c < p.head_dim)
      x = *reinterpret_cast<const uint4*>(v + int64_t(key0 + r) * p.v_row_stride + col0 + c);
    *reinterpret_cast<uint4*>(&tile[r][c]) = x;
  }
  __syncthreads();
  const int quad = threadIdx.x % 16, c4 = threadIdx.x / 16 * 4;  // V^T's keys 4 quad .. + 3, columns c4 .. + 3
  if (col0 + c4 >= p.head_dim || key0 + 4 * quad >= keys) return;
  uint32_t w[4];  // the four keys' bytes of columns c4 .. c4 + 3
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int k = 4 * quad + i;
    w[i] = *reinterpret_cast<const uint32_t*>(&tile[k / 32 * 32 + fp8_key_order(k % 32)][c4]);
  }
  const uint32_t lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
  const uint32_t lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
  const uint32_t col[4] = {__byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632),
                           __byte_perm(hi01, hi23, 0x5410), __byte_perm(hi01, hi23, 0x7632)};
  uint8_t* out = vt + (int64_t(plane) * p.head_dim + col0 + c4) * keys + key0 + 4 * quad;
#pragma unroll
  for (int c = 0; c < 4; ++c) *reinterpret_cast<uint32_t*>(out + int64_t(c) * keys) = col[c];
}

// V^T's buffer: one a stream of a device (launches on one stream run in order, so one buffer serves
// them all), kept and grown to the largest problem run so far (cudaFree and cudaMalloc synchronize the
// device, so that happens only when a problem outgrows it).
uint8_t* fp8_vt_buffer(size_t bytes, cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, std::pair<void*, size_t>> buffers;
  int dev = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mutex);
  auto& [ptr, size] = buffers[{dev, stream}];
  if (size < bytes) {
    if (ptr) FLASHLAB_CUDA(cudaFree(ptr));
    ptr = nullptr;
    size = 0;
    FLASHLAB_CUDA(cudaMalloc(&ptr, bytes));
    size = bytes;
  }
  return static_cast<uint8_t*>(ptr);
}

template <int D>
void launch_fp8(const AttentionParams& in, cudaStream_t stream) {
  using T = __nv_fp8_e4m3;
  using S = typename KernelOf<D, T>::type;
  constexpr size_t smem = KernelOf<D, T>::smem;
  AttentionParams p = in;
  p.scale = in.scale * in.descale_q * in.descale_k;  // scores of the e4m3 values -> true scores, in one factor
  const int keys = (p.seqlen_k + 31) / 32 * 32;
  const int64_t planes = int64_t(p.batch) * p.heads_kv;
  uint8_t* vt = fp8_vt_buffer(size_t(planes) * p.head_dim * keys, stream);
  fp8_transpose_v<<<dim3((keys + 63) / 64, (p.head_dim + 63) / 64, unsigned(planes)), 256, 0, stream>>>(p, vt, keys);
  FLASHLAB_CUDA_LAUNCHED();
  const int pack = pack_of(p, S::kBr);
  const CUtensorMap map_q = rows_heads_map(p.q, int64_t(p.batch) * p.seqlen_q, p.heads_q, p.head_dim, p.q_row_stride,
                                           p.q_head_stride, S::kBr / pack, 1, pack);
  const CUtensorMap map_k = rows_heads_map(p.k, int64_t(p.batch) * p.seqlen_k, p.heads_kv, p.head_dim,
                                           p.k_row_stride, p.k_head_stride, S::kBc, 1);
  const CUtensorMap map_v = vt_map(vt, keys, p.head_dim, planes, D);
  const bool causal = p.window_right == 0 && p.window_left < 0;
  const TileScheduler sched = scheduler_of(p, S::kBr, D, 1, causal, pack, stream);
  const auto kernel = p.softcap > 0.f ? (pack > 1 ? &fa3_forward_kernel<S, T, true, false, true>
                                                  : &fa3_forward_kernel<S, T, true, false, false>)
                                      : (pack > 1 ? &fa3_forward_kernel<S, T, false, false, true>
                                                  : &fa3_forward_kernel<S, T, false, false, false>);
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int grid = std::min(sched.count(), device_attribute(cudaDevAttrMultiProcessorCount));
  const auto [map_o, o_tma] = o_map(p, int64_t(p.batch) * p.seqlen_q, pack, map_q);  // O in bf16
  kernel<<<grid, S::kThreads, smem, stream>>>(p, map_q, map_k, map_v, map_o, sched, o_tma);
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

// "" unless PackGQA is asked for where it cannot run.
std::string pack_unsupported(const AttentionParams& p, int br) {
  const int group = p.heads_q / p.heads_kv;
  if (p.pack_gqa != PackGqa::on || group == 1 || packable(p, br)) return "";
  if (p.mask_lo || p.bits.words) return "pack_gqa with a mask function (a packed tile's rows are several heads')";
  return "pack_gqa with " + std::to_string(group) + " query heads a kv head (packing needs a group that divides " +
         "the tile's " + std::to_string(br) + " rows)";
}

}  // namespace

// "" on an sm_90 device, else why fa3 cannot run here.
std::string hopper_unsupported() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return "no CUDA device";
  if (major != 9 || minor != 0)
    return "compute capability " + std::to_string(major) + "." + std::to_string(minor) +
           " (fa3 needs sm_90a: wgmma and the bulk tensor copy engine exist only on Hopper)";
  return "";
}

std::string fa3_forward_unsupported(const AttentionParams& p) {
  if (p.dtype == Dtype::fp32) return "fp32 (fa3 runs bf16 and fp16)";
  if (fa3_padded_head_dim(p.head_dim) == 0) return "head_dim " + std::to_string(p.head_dim) + " (" + kFa3HeadDims + ")";
  if (std::string why = hopper_unsupported(); !why.empty()) return why;
  if (p.cu_seqlens_q && (p.total_q <= 0 || p.total_k <= 0)) return "varlen without total_q / total_k";
  const bool folded = p.cu_seqlens_q != nullptr ||
                      (p.q_batch_stride == int64_t(p.seqlen_q) * p.q_row_stride &&
                       p.k_batch_stride == int64_t(p.seqlen_k) * p.k_row_stride &&
                       p.v_batch_stride == int64_t(p.seqlen_k) * p.v_row_stride);
  if (!folded) return "batch strides other than seqlen x row stride (fa3 folds batch and sequence into rows)";
  if (p.mask_lo && p.cu_seqlens_q) return "a mask function with varlen (fa3 takes masks on fixed-length batches)";
  if (p.bits.words && !p.fa3_blocks.counts)
    return "a dense mask without fa3's block lists (params.hpp fa3_blocks; launch.hpp DeviceMask makes them)";
  return pack_unsupported(p, fa3_forward_shape(p.head_dim).block_m);
}

std::string fa3_fp8_forward_unsupported(const AttentionParams& p) {
  if (fa3_fp8_padded_head_dim(p.head_dim) == 0)
    return "head_dim " + std::to_string(p.head_dim) + " (" + kFa3Fp8HeadDims + ")";
  if (std::string why = hopper_unsupported(); !why.empty()) return why;
  if (p.cu_seqlens_q) return "varlen (the FP8 forward takes fixed-length batches: V^T is laid out a batch entry a plane)";
  if (p.mask_lo || p.bits.words) return "mask functions (the FP8 forward takes causal masks and sliding windows)";
  if (p.alibi_slopes || p.dropout_threshold) return "ALiBi and dropout (fa2 has them)";
  const bool folded = p.q_batch_stride == int64_t(p.seqlen_q) * p.q_row_stride &&
                      p.k_batch_stride == int64_t(p.seqlen_k) * p.k_row_stride;
  if (!folded) return "batch strides other than seqlen x row stride (fa3 folds batch and sequence into rows)";
  for (int64_t stride : {p.q_row_stride, p.q_head_stride, p.k_row_stride, p.k_head_stride, p.v_batch_stride,
                         p.v_row_stride, p.v_head_stride})
    if (stride % 16 != 0) return "strides that are not multiples of 16 bytes (the copy engine's rule)";
  if (!(p.descale_q > 0.f && p.descale_k > 0.f && p.descale_v > 0.f) || !std::isfinite(p.descale_q) ||
      !std::isfinite(p.descale_k) || !std::isfinite(p.descale_v))
    return "descale factors must be positive and finite";
  return pack_unsupported(p, fa3_fp8_forward_shape(p.head_dim).block_m);
}

void fa3_fp8_forward(const AttentionParams& p, cudaStream_t stream) {
  const std::string why = fa3_fp8_forward_unsupported(p);
  if (!why.empty()) throw Error("fa3 FP8 forward: unsupported: " + why);
  if (fa3_fp8_padded_head_dim(p.head_dim) == 128) launch_fp8<128>(p, stream);
  else launch_fp8<256>(p, stream);
}

void fa3_forward(const AttentionParams& p, cudaStream_t stream) {
  const std::string why = fa3_forward_unsupported(p);
  if (!why.empty()) throw Error("fa3 forward: unsupported: " + why);
  if (p.dtype == Dtype::bf16) dispatch_dim<__nv_bfloat16>(p, stream);
  else dispatch_dim<__half>(p, stream);
}

}  // namespace flashlab::gpu
