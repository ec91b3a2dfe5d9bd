// The tile shapes of flashlab's GPU kernels: one pure function per kernel family, with the reason for
// each branch. The one place a shape is chosen:
//   - the launchers (fa2_fwd.cu, fa2_fwd_pairs.cu, fa2_bwd.cu, fa1_minimal.cu, standard.cu) build their
//     template instantiations from these values and static_assert that the kernel agrees;
//   - the simulator models flashlab's kernels with them;
//   - `flashlab shapes` prints them (table or JSON), and scripts (bench/dram_vs_simulator.py) read them
//     there instead of keeping a copy.
// Plain C++17 and constexpr (nvcc compiles the .cu files as C++17), no CUDA: built everywhere as
// flashlab_kernel_shapes, with or without nvcc. The name lookup for the CLI is in shapes.cpp.
//
// Terms (the FA2 paper's): Br query rows and Bc keys a tile; a CTA of `warps` warps; mma.sync m16n8k16
// tiles are 16 rows high. Shared-memory sizes are for 2-byte elements (bf16 / fp16) except fa1_minimal,
// which runs in fp32.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace flashlab::gpu {

struct TileShape {
  const char* kernel = "";   // the __global__ function that runs it, and its file
  int head_dim = 0;          // the head dim the kernel is compiled for (fa2: padded to 64, 128 or 256);
                             // 0: not supported, and `why` says what is
  int block_m = 0;           // Br: query rows a CTA (forward), a step (backward dkdv); standard: rows of S
  int block_n = 0;           // Bc: keys a K/V block (the backward's dkdv CTA owns one); 0: a whole row
  int warps = 0;             // warps per CTA
  int threads = 0;           // threads per CTA (32 warps)
  int stages = 0;            // shared-memory buffers of the streamed operand: K/V (forward), Q/dO (dkdv)
  int mma_tiles = 0;         // 16-row MMA tiles a warp: query tiles (forward), key tiles (dkdv); each
                             // fragment read from shared memory feeds that many MMAs; 0: no mma.sync
  bool warp_pairs = false;   // two warps share 32 query rows and split S's keys and O's columns
  int min_ctas_per_sm = 0;   // __launch_bounds__'s minimum CTAs an SM (0: not given)
  int smem_bytes = 0;        // dynamic shared memory a CTA
  const char* why = "";      // why this shape (or, when head_dim is 0, what is supported)

  constexpr bool supported() const { return head_dim > 0; }
};

// ---- fa2 (fa2_fwd.cu, fa2_fwd_pairs.cu, fa2_bwd.cu): bf16 / fp16, head dims that are multiples of 8 up
// to 256, compiled for 64, 128 and 256 (the others run zero-padded to the next).
constexpr int fa2_padded_head_dim(int head_dim) {  // 64, 128 or 256; 0: not supported
  if (head_dim <= 0 || head_dim > 256 || head_dim % 8 != 0) return 0;
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}
constexpr const char* kFa2HeadDims = "fa2 takes head dims that are multiples of 8 from 8 to 256";

// The forward kernel's shared memory: Q (Br x D), then `stages` K and V buffers (Bc x D each).
constexpr int fa2_forward_smem_bytes(int d, int block_m, int block_n, int stages) {
  return (block_m + 2 * stages * block_n) * d * 2;
}
// The pairs kernel's: Q, K, V (one buffer each), then a 32 x 32 half of P~ and 32 floats of row
// statistics for each warp.
constexpr int fa2_forward_pairs_smem_bytes(int d, int block_m, int block_n, int warps) {
  return (block_m + 2 * block_n) * d * 2 + warps * (32 * (block_n / 2) * 2 + 32 * 4);
}

namespace shapes_detail {
constexpr TileShape fa2_forward(int d, int warps, int mma_tiles, int block_n, int stages, const char* why) {
  TileShape s;
  s.kernel = "fa2_forward_kernel (gpu/fa2_fwd.cu)";
  s.head_dim = d;
  s.warps = warps;
  s.threads = 32 * warps;
  s.mma_tiles = mma_tiles;
  s.block_m = 16 * mma_tiles * warps;
  s.block_n = block_n;
  s.stages = stages;
  s.smem_bytes = fa2_forward_smem_bytes(d, s.block_m, block_n, stages);
  s.why = why;
  return s;
}
constexpr TileShape unsupported(const char* kernel, const char* why) {
  TileShape s;
  s.kernel = kernel;
  s.why = why;
  return s;
}
}  // namespace shapes_detail

// The most splits of the keys a split-KV call takes: flash-attn 2's limit (flash_api.cpp refuses more than 128),
// which flashlab's decode kernel keeps (gpu/decode/decode.cu decode_unsupported) and the simulator's decode
// estimates check.
constexpr int kDecodeMaxSplits = 128;

// flash-decoding's split count as flash-attn 2 chooses num_splits (flash_api.cpp, num_splits_heuristic):
// no split when the CTAs without one already fill 80% of the slots; otherwise, over the eligible split
// counts 1 .. min(max_splits, slots, n_blocks) (a count is eligible when it changes the blocks per
// split: ceil(n/s) != ceil(n/(s-1))), the wave efficiency e(s) = w / ceil(w) with w = ctas x s / slots,
// and the smallest s with e(s) >= 0.85 x the best. The simulator (simulator/decode.cpp), which models
// flash-attn's kernel, calls it; flashlab's decode kernel splits by bandwidth instead
// (gpu/shapes.hpp decode_split_count, gpu/decode/decode.cu decode_num_splits say why).
inline int64_t split_kv_heuristic(int64_t ctas_without_split, int64_t slots, int64_t n_blocks,
                                  int64_t max_splits = kDecodeMaxSplits) {
  constexpr double kNoSplitFill = 0.8, kEfficiencyWithin = 0.85;
  if (ctas_without_split >= kNoSplitFill * double(slots)) return 1;
  if (slots < max_splits) max_splits = slots;
  if (n_blocks < max_splits) max_splits = n_blocks;
  auto blocks_per = [&](int64_t s) { return (n_blocks + s - 1) / s; };
  auto eligible = [&](int64_t s) { return s == 1 || blocks_per(s) != blocks_per(s - 1); };
  auto efficiency = [&](int64_t s) {
    const double waves = double(ctas_without_split) * double(s) / double(slots);
    const double whole = double(int64_t(waves)) == waves ? waves : double(int64_t(waves) + 1);
    return waves / whole;
  };
  double best = 0;
  for (int64_t s = 1; s <= max_splits; ++s)
    if (eligible(s) && efficiency(s) > best) best = efficiency(s);
  for (int64_t s = 1; s <= max_splits; ++s)
    if (eligible(s) && efficiency(s) >= kEfficiencyWithin * best) return s;
  return 1;
}

// The split count that keeps the HBM streaming, and no more. A split kernel CTA streams the cache at
// `cta_bytes_per_s` (its warps' blocks in flight over the memory's latency with the HBM full), so the HBM's
// achievable rate takes ceil(hbm_bytes_per_s / cta_bytes_per_s) CTAs: splits multiply the grid's `ctas` until
// it has them, within one wave (`slots`, the CTAs the GPU holds at once), one CTA step of keys a split
// (`blocks`: the keys over decode_split_shape's block_n) and 128 splits. A split past that adds partials to
// write and merge for no bandwidth.
inline int decode_split_count(int64_t ctas, int64_t slots, int64_t blocks, double hbm_bytes_per_s,
                              double cta_bytes_per_s) {
  if (ctas < 1) return 1;
  const int64_t needed = int64_t(std::ceil(hbm_bytes_per_s / cta_bytes_per_s));
  int64_t s = (needed + ctas - 1) / ctas;
  const int64_t one_wave = slots / ctas;
  if (s > one_wave) s = one_wave;
  if (s > blocks) s = blocks;
  if (s > kDecodeMaxSplits) s = kDecodeMaxSplits;
  return s < 1 ? 1 : int(s);
}
// A split CTA's stream (gpu/decode/decode.cu v8, d = 128: three warps, each with one 32-key block of K and
// V, 16 KiB, in flight while it computes the one before), measured on an H200, 2026-11-29, batch 1 x 64k keys
// at a forced split count (bench/results/decode-splits-h200-2026-11-29-v8*.csv, the layers clock):
//  - the HBM nearly idle (1, 2, 4 splits: 8, 16, 32 CTAs): 60.2, 58.5, 56.5 GB/s a CTA, a warp's block every
//    0.82-0.87 us. That period is the block's compute or the idle latency, whichever is longer, so it bounds
//    the compute from above;
//  - the HBM full: 12 splits (96 CTAs, 4.7 MB in flight) was the smallest grid that reached the HBM's rate
//    (3.87 TB/s; 10 splits 3.74, 15 the same 3.87), so by Little's law a load then took
//    4.7 MB / 3.87 TB/s = 1.22 us.
constexpr double kDecodeBlockIdlePeriodS = 0.82e-6;
constexpr double kDecodeFullLatencyS = 1.22e-6;
// What a split CTA does after its last block, and what the combine does once released, measured by the
// timeline probe (bench/patches/decode-timeline.patch, bench/decode_timeline.py; an H200, 2026-11-29, d = 128,
// q_len 1, GQA 32:8):
//  - the merge: the warps' column sums, their (m, l, O) through shared memory, the merged rows' write (the
//    outputs, or the split's partials): 0.77 us a CTA in v9 (the median at every shape, 0.77-0.80; 0.86
//    where two CTAs share an SM; v8's branchy reads 0.86-0.96: bench/results/decode-timeline-h200-2026-11-29-v9.txt,
//    -v8.txt);
//  - the combine, from its CTAs' release to the last one's end: in v8 (a split a step) 0.80 us where a thread
//    merged one step (2 splits) and 1.19-1.22 us where two (11-14 splits): each step's loads waited their
//    round trip (0.4 us) before the next step's were issued, and the groups' merge in shared memory and the
//    writes took 0.4 us. v9 loads four splits a step, so 14 splits are one step: 0.80 us measured, as the two
//    figures predict.
constexpr double kDecodeMergeS = 0.77e-6;
constexpr double kDecodeCombineBaseS = 0.40e-6;
constexpr double kDecodeCombineStepS = 0.40e-6;
// The combine's CTA (gpu/decode/decode.cu combine_kernel): 256 threads as (head_dim / 4 column groups) x
// (split groups); a thread loads up to four splits of its group at once (a step: one round trip), merges
// them, then takes the next four (v8 loaded one split a step).
constexpr int kDecodeCombineThreads = 256;
constexpr int kDecodeCombineSplitsAtOnce = 4;
// Its split groups: the threads a column group of 4 (of head_dim / 4) has, each merging its own splits.
constexpr int decode_combine_groups(int head_dim) { return kDecodeCombineThreads / (head_dim / 4); }
constexpr int decode_combine_steps(int splits, int head_dim) {
  const int at_once = decode_combine_groups(head_dim) * kDecodeCombineSplitsAtOnce;
  return (splits + at_once - 1) / at_once;
}

// The HBM's achievable share of its peak (memory clock x bus width): a device copy moved 3.04 of the
// H100's 3.35 TB/s (bench/decode_compare.py, 2026-11-26).
constexpr double kDecodeHbmAchievable = 0.9;

// ---- decode (gpu/decode/decode.cu): flash-decoding's split kernel, bf16 / fp16, head dims as fa2 (run at
// 64, 128 or 256, zero-padded). A CTA holds up to 16 packed query rows (a kv head's query heads times q_len:
// one or two 8-column tiles of the transposed MMAs, 8 where they fit) and walks its split's keys in 32-key
// blocks, a block a warp (block_n = 32 x warps keys a step), each warp with its own K/V stages; at the end the
// warps' (m, l, O) merge through shared memory.
// A kv head's packed query rows (q_len x its group's query heads) are cut into chunks of 8 where they fit one
// 8-column MMA tile, else of 16 (two tiles): one CTA a (chunk, split, kv head, entry). Called by the kernel, its
// launch and the simulator alike.
constexpr int decode_cta_rows(int packed_rows) { return packed_rows <= 8 ? 8 : 16; }
constexpr int decode_row_chunks(int packed_rows) {
  return (packed_rows + decode_cta_rows(packed_rows) - 1) / decode_cta_rows(packed_rows);
}
// The merge's O rows in shared memory: d floats padded by 4, so that a warp's stores of its accumulators meet
// 32 banks (decode.cu's merge, v10).
constexpr int decode_merge_o_row(int d) { return d + 4; }
constexpr int decode_split_smem_bytes(int d, int warps, int stages) {
  const int kv = warps * stages * 2 * 32 * d * 2;                  // the warps' K and V stages
  const int merge = warps * 16 * (2 + decode_merge_o_row(d)) * 4;  // then the merge's m, l and O (fp32), over them
  return 16 * d * 2 + (kv > merge ? kv : merge);   // after Q
}
constexpr TileShape decode_split_shape(int head_dim) {
  const int d = fa2_padded_head_dim(head_dim);
  if (d == 0)
    return shapes_detail::unsupported("split_kernel (gpu/decode/decode.cu)",
                                      "the decode kernel takes head dims that are multiples of 8 from 8 to 256");
  TileShape s;
  s.kernel = "split_kernel (gpu/decode/decode.cu)";
  s.head_dim = d;
  s.block_m = 16;
  s.warps = d <= 128 ? 3 : 4;
  s.threads = 32 * s.warps;
  s.block_n = 32 * s.warps;
  s.stages = d <= 128 ? 2 : 1;
  s.mma_tiles = 1;
  s.smem_bytes = decode_split_smem_bytes(d, s.warps, s.stages);
  s.why = d <= 128
              ? "three warps, each with two 32-key K/V stages (one loads while the other computes): 100 KB at "
                "d = 128, so an SM holds two CTAs and one's start (Q, its first blocks) and end (the warps' merge) "
                "run under the other's stream. Four warps (132 KB, one CTA an SM) streamed batch 64 x 1k keys at 86-88% "
                "of an H200's copy rate, three at 92-93%, six in one CTA (the same bytes in flight, no overlap) at 84-86%; "
                "two warps, three CTAs an SM, slower everywhere (bench/results/decode-ab-h200-2026-11-29-*)"
              : "four warps of one 32-key K/V stage (two would take 256 KB): 136 KB, one CTA an SM; three warps, two "
                "CTAs an SM, streamed 11-15% slower at batch 8 (decode-ab-h200-2026-11-29-d256.csv)";
  return s;
}
// The K and V bytes a split CTA of shape `s` holds in its stages (a 32-key block of each, a warp a stage).
constexpr double decode_stage_bytes(const TileShape& s) { return double(s.warps) * s.stages * 2 * 32 * s.head_dim * 2; }
// The time a warp computes one 32-key block (S^T = K Q^T, the online softmax, O^T += V^T P^T, and issuing the
// next block's copies): the measured idle period at d = 128, scaled by d at others (their MMAs and copies
// are; not measured).
constexpr double decode_block_compute_s(const TileShape& s) { return kDecodeBlockIdlePeriodS * s.head_dim / 128; }
// A split CTA's merge at the shape's head dim: measured at d = 128, scaled by d elsewhere (its shared-memory
// traffic and writes are; not measured).
constexpr double decode_merge_s(const TileShape& s) { return kDecodeMergeS * s.head_dim / 128; }
// The combine's work once released: a base and a round trip a step of splits.
constexpr double decode_combine_work_s(int splits, int head_dim) {
  return kDecodeCombineBaseS + decode_combine_steps(splits, head_dim) * kDecodeCombineStepS;
}
// One split CTA's stream when its loads take `latency` (Little's law): each warp has one block in flight, and
// with two stages it computes the one before meanwhile (a block every max(latency, compute)); with one stage
// it loads, then computes (latency + compute).
constexpr double decode_cta_bytes_per_s(const TileShape& s, double latency) {
  const double compute = decode_block_compute_s(s);
  const double period = s.stages >= 2 ? (latency > compute ? latency : compute) : latency + compute;
  return s.warps * (2.0 * 32 * s.head_dim * 2) / period;
}
// The decode kernel's split count (gpu/decode/decode.cu decode_num_splits, and the simulator's model of the
// kernel, `estimate --decode --impl flashlab`): `ctas` the split CTAs without splitting (batch x kv heads x
// 16-row chunks), `slots` the CTAs the GPU holds at once, the longest entry's keys, the HBM's peak (memory
// clock x bus width).
inline int decode_splits_for(const TileShape& s, int64_t ctas, int64_t slots, int64_t max_seqlen_k,
                             double hbm_peak_bytes_per_s) {
  const int64_t steps = (max_seqlen_k + s.block_n - 1) / s.block_n;
  return decode_split_count(ctas, slots, steps, kDecodeHbmAchievable * hbm_peak_bytes_per_s,
                            decode_cta_bytes_per_s(s, kDecodeFullLatencyS));
}

// fa2's forward for a head dim (any; padded here). Timings: gpu/fa2_fwd.cu's version index and
// gpu/HISTORY.md.
constexpr TileShape fa2_forward_shape(int head_dim) {
  switch (fa2_padded_head_dim(head_dim)) {
    case 64:
      return shapes_detail::fa2_forward(
          64, 4, 2, 128, 2,
          "two 16-row MMA tiles a warp (Br = 128), so each K/V fragment read from shared memory feeds two "
          "MMAs; K/V blocks of 128 keys halve the blocks, barriers and row-max reductions for the same MMAs "
          "(v8: +2-8%; 80 KiB, 255 registers, no spills); two K/V stages hide the loads");
    case 128:
      return shapes_detail::fa2_forward(
          128, 4, 2, 64, 2,
          "two 16-row MMA tiles a warp (Br = 128), so each K/V fragment feeds two MMAs; 228-255 registers, "
          "so an SM holds two CTAs of four warps; two K/V stages of 64 keys hide the loads (128 keys would "
          "need 160 KiB, one CTA an SM)");
    case 256: {
      // fa2_fwd_pairs.cu: a warp pair owns 32 query rows (two MMA tiles a warp); each warp computes S for
      // half the keys and accumulates O for half the head dim.
      TileShape s;
      s.kernel = "fa2_forward_pairs_kernel (gpu/fa2_fwd_pairs.cu)";
      s.head_dim = 256;
      s.warps = 4;
      s.threads = 128;
      s.mma_tiles = 2;
      s.warp_pairs = true;
      s.block_m = 64;
      s.block_n = 64;
      s.stages = 1;
      s.min_ctas_per_sm = 2;
      s.smem_bytes = fa2_forward_pairs_smem_bytes(256, 64, 64, 4);
      s.why =
          "a warp's O accumulator for 16 rows is already 128 registers at d = 256, and with 16 rows a warp "
          "each K/V fragment feeds one row tile: shared memory, not the tensor cores, set the pace (v7); "
          "warp pairs share 32 rows and split S's keys and O's columns, so each fragment feeds two MMAs "
          "(104 ldmatrix.x4 a warp and block instead of 144); one K and one V buffer loaded in turn (FA2's "
          "split waits), 104.5 KiB, two CTAs an SM";
      return s;
    }
  }
  return shapes_detail::unsupported("fa2_forward_kernel (gpu/fa2_fwd.cu)", kFa2HeadDims);
}

// The dkdv kernel's shared memory (fa2_bwd.cu's KVSmem): K_j and V_j (Bc x D), two stages of Q_i and
// dO_i (Br x D), P^T and dS^T (Bc x Br), and two stages of LSE2 and D (Br floats each).
constexpr int fa2_backward_smem_bytes(int d, int block_m, int block_n) {
  return (2 * block_n * d + 2 * 2 * block_m * d + 2 * block_n * block_m) * 2 + 2 * 2 * block_m * 4;
}

namespace shapes_detail {
constexpr TileShape fa2_dkdv(int d, int block_n, int block_m, int key_tiles, const char* why) {
  TileShape s;
  s.kernel = "dkdv_kernel (gpu/fa2_bwd.cu)";
  s.head_dim = d;
  s.warps = 8;
  s.threads = 256;
  s.block_m = block_m;
  s.block_n = block_n;
  s.stages = 2;
  s.mma_tiles = key_tiles;
  s.smem_bytes = fa2_backward_smem_bytes(d, block_m, block_n);
  s.why = why;
  return s;
}
}  // namespace shapes_detail

// fa2's backward dK/dV kernel (dkdv_kernel, one CTA a K/V block; also dQ's atomic sum) for a head dim
// (any; padded here) on a device whose opt-in shared memory per block is `smem_per_block` bytes
// (cudaDevAttrMaxSharedMemoryPerBlockOptin: 232448 on H100 and H200, 166912 on A100). Eight warps: along
// the keys (16 mma_tiles each) and along the queries (S^T) or the head dim (dK, dV).
constexpr TileShape fa2_backward_shape(int head_dim, int smem_per_block) {
  switch (fa2_padded_head_dim(head_dim)) {
    case 64:
      if (smem_per_block >= fa2_backward_smem_bytes(64, 128, 128))
        return shapes_detail::fa2_dkdv(
            64, 128, 128, 2,
            "Br = 128 query rows a step, as FA2 takes at d = 64: more MMAs a fragment read (v6: +3-4%); two "
            "16-key MMA tiles a warp, so each Q / dO fragment feeds two MMAs (v4); 162 KiB");
      return shapes_detail::fa2_dkdv(
          64, 128, 64, 2,
          "Br = 64 (v4-v5's shape) where shared memory per block is under the 162 KiB that Br = 128 needs");
    case 128:
      return shapes_detail::fa2_dkdv(
          128, 128, 64, 2,
          "Bc = 128 keys a CTA (v3: dkdv 9.95 -> 5.70 ms at s = 4k), two 16-key MMA tiles a warp so each "
          "Q / dO fragment feeds two MMAs (v4); Br = 64 with two Q / dO stages is 161 KiB");
    case 256:
      if (smem_per_block >= fa2_backward_smem_bytes(256, 64, 64))
        return shapes_detail::fa2_dkdv(
            256, 64, 64, 2,
            "Br = 64 query rows a step (v3) with two 16-key MMA tiles a warp (v4): 209 KiB, which sm_90's "
            "227 KiB per block holds");
      return shapes_detail::fa2_dkdv(
          256, 64, 32, 1,
          "Br = 32 with one 16-key tile a warp where shared memory per block is under the 209 KiB of "
          "Br = 64 (A100: 163 KiB); 136.5 KiB");
  }
  return shapes_detail::unsupported("dkdv_kernel (gpu/fa2_bwd.cu)", kFa2HeadDims);
}

// The deterministic backward's dQ kernel (dq_kernel: Q outer as the forward, recomputing S, P, dP and
// dS over its K/V blocks so that dQ is summed in a fixed order). Shared memory: Q and dO (Br x D), two
// stages of K and V (Bc x D).
constexpr TileShape fa2_backward_dq_shape(int head_dim) {
  const int d = fa2_padded_head_dim(head_dim);
  if (d == 0) return shapes_detail::unsupported("dq_kernel (gpu/fa2_bwd.cu)", kFa2HeadDims);
  TileShape s;
  s.kernel = "dq_kernel (gpu/fa2_bwd.cu, deterministic only)";
  s.head_dim = d;
  s.warps = 4;
  s.threads = 128;
  s.mma_tiles = 1;
  s.block_m = 16 * s.mma_tiles * s.warps;
  s.block_n = d <= 128 ? 64 : 32;
  s.stages = 2;
  s.smem_bytes = (2 * s.block_m + 2 * s.stages * s.block_n) * d * 2;
  s.why = d <= 128 ? "four warps of 16 query rows, two K/V stages of 64 keys"
                   : "four warps of 16 query rows; Bc = 32 keeps Q, dO and two K/V stages in 128 KiB, which "
                     "an A100's 163 KiB per block holds (64 keys would need 192 KiB)";
  return s;
}

// ---- fa1_minimal (fa1_minimal.cu): FA1's Algorithm 1 in fp32 (any input dtype is converted), any head
// dim up to 256.
constexpr TileShape fa1_minimal_shape(int head_dim) {
  if (head_dim <= 0 || head_dim > 256)
    return shapes_detail::unsupported("fa1_minimal_kernel (gpu/fa1_minimal.cu)",
                                      "fa1_minimal takes head dims from 1 to 256");
  TileShape s;
  s.kernel = "fa1_minimal_kernel (gpu/fa1_minimal.cu)";
  s.head_dim = head_dim;
  s.block_m = 32;
  s.block_n = 32;
  s.threads = s.block_m;  // one thread a query row of Q_i
  s.warps = s.threads / 32;
  s.stages = 1;
  s.smem_bytes = (s.block_m + 2 * s.block_n) * head_dim * 4;  // Q_i, K_j, V_j in fp32
  s.why =
      "Algorithm 1 as plainly as CUDA allows: one thread a query row, so Br = 32 rows is one warp; Bc = Br; "
      "one CTA a (batch, head) walks every K/V block (outer) and Q block (inner); written to be read, not "
      "to be fast";
  return s;
}

// ---- standard (standard.cu): no tiles of its own. cuBLAS picks its GEMM tiles for S = Q K^T and
// O = P V; the one kernel of flashlab's, the softmax, is a CTA of 256 threads a row of S.
constexpr TileShape standard_softmax_shape(int head_dim) {
  if (head_dim <= 0) return shapes_detail::unsupported("softmax_rows (gpu/standard.cu)", "head_dim must be positive");
  TileShape s;
  s.kernel = "softmax_rows (gpu/standard.cu)";
  s.head_dim = head_dim;  // any
  s.block_m = 1;
  s.block_n = 0;
  s.threads = 256;
  s.warps = 8;
  s.why =
      "no tiles: cuBLAS chooses its own GEMM tiles for S = Q K^T and O = P V; the softmax kernel strides a "
      "CTA of 256 threads over one row of S (two block reductions: max, then sum)";
  return s;
}

// ---- fa3 (gpu/fa3/fa3_fwd.cu): the Hopper forward, bf16 / fp16, head dims that are multiples of 8 up to
// 256, compiled for 64, 128 and 256 (the copy engine zero-fills the padded columns).
constexpr int fa3_padded_head_dim(int head_dim) { return fa2_padded_head_dim(head_dim); }
// Whether fa3's backward splits the head dim between its two consumers at this head dim: 64 keys a CTA, each
// consumer half of dK and dV, dQ added by atomics from registers (and, deterministic, each consumer's turns
// kept by a warp of the producer warpgroup): d = 256 (gpu/fa3/bwd_smem.cuh kSplitD, fa3_backward_shape, the
// simulator's turn keepers).
constexpr bool fa3_backward_splits_head_dim(int head_dim) { return fa3_padded_head_dim(head_dim) == 256; }
constexpr const char* kFa3HeadDims = "fa3 takes head dims that are multiples of 8 from 8 to 256";

// Whether it holds two Q buffers and a staging buffer of O's own (gpu/fa3/epilogue.cuh): where they fit beside
// the K/V stages, D <= 128 (at d = 256 a 16-bit Q is 64 KiB, and the K/V stages take the rest; FP8's O is
// bf16, as large as a 16-bit Q).
// Above that (d = 256, 16-bit or FP8) O is staged in V's two stages once the tile's last P V has read them
// (a consumer warpgroup's 64 rows of 16-bit O, 32 KiB, in one stage: 40 KiB of 16-bit V, 32 KiB of FP8 V^T),
// FlashAttention-3's place for it: no shared memory of its own, the producer holding the next tile's V until
// the stores have read them (gpu/fa3/smem.cuh kOInV).
constexpr bool fa3_forward_stages_o(int d) { return d <= 128; }

// Its shared memory: Q (Br x D of elem_bytes; two buffers where fa3_forward_stages_o, and O's staging buffer,
// Br x D of 16 bits), `stages` K and V buffers (Bc x D each), and 1 KiB for the 1024-byte alignment the
// 128-byte swizzle needs plus 1 KiB for the mbarriers.
constexpr int fa3_forward_smem_bytes(int d, int block_m, int block_n, int stages, int elem_bytes = 2) {
  const bool staged = fa3_forward_stages_o(d);
  return ((staged ? 2 : 1) * block_m + 2 * stages * block_n) * d * elem_bytes + (staged ? block_m * d * 2 : 0) +
         2048;
}

// Whether its Q blocks are counted from the sequence's end (gpu/fa3/scheduler.cuh first_row; tiled::Tiling
// q_from_end for the simulator): the ragged block, where Br does not divide seqlen_q, the first, whose walk
// under a causal mask or window is the shortest. That saves key blocks only where a Q block spans more rows
// than a key block (Br > Bc: d = 64's 192 x 128, d = 256's 128 x 80); at Br = Bc a causal walk has one
// block a Q block either way, and counting from the end measured 1-2% slower at d = 128 (H200,
// 2026-11-28, gpu/HISTORY.md v18). Not under a mask function: its block lists, longest-first order and
// row tables are made on the host for blocks counted from the start.
constexpr bool fa3_forward_q_blocks_from_end(bool mask_function, int block_m, int block_n) {
  return !mask_function && block_m > block_n;
}

// A producer warpgroup (TMA) and two consumer warpgroups of 64 query rows each (Br = 128); K/V
// double-buffered; three at d = 64 (FA3's 192-row tiles: v7 measured them 0.83-1.06x of two, v17 +3-16%
// but for s = 1k causal, and after v18-v23 two measured 0.86-0.95x of three at every length, s = 1k-16k,
// causal or not: H200, 2026-11-29, gpu/HISTORY.md). Timings: gpu/fa3/fa3_fwd.cu's version index.
constexpr TileShape fa3_forward_shape(int head_dim) {
  const int d = fa3_padded_head_dim(head_dim);
  if (d == 0) return shapes_detail::unsupported("fa3_forward_kernel (gpu/fa3/fa3_fwd.cu)", kFa3HeadDims);
  TileShape s;
  s.kernel = "fa3_forward_kernel (gpu/fa3/fa3_fwd.cu)";
  s.head_dim = d;
  const int consumers = d == 64 ? 3 : 2;
  s.block_m = 64 * consumers;
  s.block_n = d <= 128 ? 128 : 80;
  s.warps = 4 * (consumers + 1);
  s.threads = 32 * s.warps;
  s.stages = 2;
  s.smem_bytes = fa3_forward_smem_bytes(d, s.block_m, s.block_n, s.stages);
  s.why = d == 64 ? "one producer warpgroup (TMA) and three consumer warpgroups of 64 query rows (wgmma), 192 x 128 "
                    "tiles, K and V double-buffered: at d = 64 a step's GEMMs take half as long as at 128 and its softmax "
                    "does not, so one warpgroup's softmax outlasts the other's GEMMs; a third keeps the tensor cores fed "
                    "(v17: +3-16% against two, but -7.5% at s = 1k causal, gpu/HISTORY.md); Q double-buffered and O staged for a "
                    "bulk tensor store (v19)"
          : d <= 128 ? "one producer warpgroup (TMA) and two consumer warpgroups of 64 query rows (wgmma), 128 x 128 "
                       "tiles, K and V double-buffered, Q double-buffered and O staged for a bulk tensor store (v19)"
                   : "128 x 80 at d = 256 (FA3's): 128 keys of K and V in two stages would not fit in shared "
                     "memory; 80 (224 KiB) against 64 measured 0.99-1.07x (gpu/HISTORY.md v10); O staged in V's "
                     "stages for a bulk tensor store (v21)";
  return s;
}

// fa3's FP8 forward (fa3_fp8_forward in gpu/fa3/fa3_fwd.cu): e4m3 Q, K and V, bf16 O. The forward's
// roles and tiles, with 1-byte elements: a 128-byte swizzled row holds 128 of them, so the head dim pads to
// 128 or 256 (multiples of 16: the copy engine's rows are 16-byte multiples) and a K/V block is 128 keys at
// both, one such row of V^T (FP8's wgmma reads its B operand K-major only: V transposed beforehand).
constexpr int fa3_fp8_padded_head_dim(int head_dim) {  // 128 or 256; 0: not supported
  if (head_dim <= 0 || head_dim > 256 || head_dim % 16 != 0) return 0;
  return head_dim <= 128 ? 128 : 256;
}
constexpr const char* kFa3Fp8HeadDims = "fa3's FP8 forward takes head dims that are multiples of 16 from 16 to 256";

constexpr TileShape fa3_fp8_forward_shape(int head_dim) {
  const int d = fa3_fp8_padded_head_dim(head_dim);
  if (d == 0) return shapes_detail::unsupported("fa3_forward_kernel (gpu/fa3/fa3_fwd.cu, FP8)", kFa3Fp8HeadDims);
  TileShape s;
  s.kernel = "fa3_forward_kernel (gpu/fa3/fa3_fwd.cu, FP8)";
  s.head_dim = d;
  s.block_m = 128;
  s.block_n = 128;
  s.warps = 12;
  s.threads = 384;
  s.stages = 2;  // three at d = 128 measured 0.98-1.00x of two (H100, 2026-11-24)
  s.smem_bytes = fa3_forward_smem_bytes(d, s.block_m, s.block_n, s.stages, 1);
  s.why = "the bf16 forward's roles with e4m3 operands: 128 x 128 tiles at d = 128 and 256 (1-byte elements "
          "fit 128 keys of K and V^T in two stages), V^T by a transpose kernel; at d = 128 Q double-buffered and O "
          "staged for a bulk tensor store (v20), at 256 O staged in V's stages (v21)";
  return s;
}

// The backward (gpu/fa3/fa3_bwd.cu): a CTA a K/V block of Bc keys, two consumer warpgroups and a producer
// warpgroup; the Q blocks of Br rows stream past in `stages` buffers of Q, dO and their rows' LSE and D.
// Shared memory up to d = 128: K and V (Bc x D), the Q and dO stages (Br x D each), dS^T twice (Bc x Br:
// the dQ GEMM of one step reads it while the next step writes the other), a step's fp32 dQ (Br x D, what
// the bulk reduction adds into the scratch), LSE and D (Br floats each a stage), and 2 KiB for the
// alignment and the mbarriers. At d = 256 (the split kernel, below) no fp32 dQ, and P^T twice beside dS^T:
// the consumers hand each other their halves of both.
constexpr int fa3_backward_smem_bytes(int d, int block_m, int block_n, int stages) {
  const bool split = fa3_backward_splits_head_dim(d);
  const int exchanged = split ? 4 : 2;  // dS^T twice, and in the split kernel P^T twice
  return 2 * block_n * d * 2 + 2 * stages * block_m * d * 2 + exchanged * block_n * block_m * 2 +
         (split ? 0 : block_m * d * 4) + 2 * stages * block_m * 4 + 2048;
}

// Up to d = 128 each consumer warpgroup holds its 64 keys' dK and dV (64 x D fp32 each) through the whole
// walk and its share of a step's dQ (64 x 64: the Q block's rows by half the head dim, or half the rows by
// all of it), so that every wgmma is 64 rows high and 64 or more wide: Br = 64 at d = 128 (S^T and dP^T
// 64 x 64), Br = 128 at d = 64 (64 x 128). At d = 256 that would be 256 registers a thread for dK and dV
// alone, so the two consumers share one block of 64 keys and split the head dim instead (128 columns of
// dK and dV each, 128 registers): each computes S^T and dP^T for half the Q block's 64 rows (64 x 32),
// and they trade their halves of P^T and dS^T through shared memory (FlashAttention-3's hdim-256 backward
// splits the same way, with 80 keys); dQ goes into the scratch by vector atomics from registers, as
// FA3's does there, since a step's fp32 dQ (64 KiB) does not fit beside two stages of Q and dO.
constexpr TileShape fa3_backward_shape(int head_dim) {
  const int d = fa3_padded_head_dim(head_dim);
  if (d == 0)
    return shapes_detail::unsupported("fa3_backward_kernel (gpu/fa3/fa3_bwd.cu)",
                                      "the fa3 backward takes head dims that are multiples of 8 from 8 to 256");
  TileShape s;
  s.kernel = "fa3_backward_kernel (gpu/fa3/fa3_bwd.cu)";
  s.head_dim = d;
  const bool split = fa3_backward_splits_head_dim(d);
  s.block_m = d == 64 ? 128 : 64;
  s.block_n = split ? 64 : 128;
  s.warps = 12;
  s.threads = 32 * s.warps;
  s.stages = 2;
  s.smem_bytes = fa3_backward_smem_bytes(d, s.block_m, s.block_n, s.stages);
  s.why = d == 64    ? "128 keys a CTA (two consumer warpgroups of 64), Q blocks of 128 rows: each consumer's dQ is 64 "
                       "rows x the head dim, Q, dO double-buffered"
          : d == 128 ? "128 keys a CTA (two consumer warpgroups of 64), Q blocks of 64 rows: each consumer's dQ is the 64 "
                       "rows x half the head dim, Q, dO double-buffered"
                     : "64 keys a CTA, the head dim split between two consumer warpgroups (dK and dV 64 x 128 each), "
                       "Q blocks of 64 rows, P^T and dS^T traded through shared memory, dQ by atomics, Q, dO "
                       "double-buffered";
  return s;
}

// ---- lookup by name (shapes.cpp), for `flashlab shapes` and programs that take an algorithm's name.
struct KernelShapeRow {
  std::string algo;  // standard | fa1-minimal | fa2 | fa3 | decode
  std::string pass;  // fwd | bwd
  TileShape shape;
};
// The algorithm names kernel_shapes() knows, in the order `all` lists them.
const std::vector<std::string>& shape_algos();
// The kernels `algo` (a name of shape_algos(), or "all") launches for the forward (`backward` false) or
// the backward, at `head_dim`, for `dtype` (bf16 | fp16 | fp32), on a device with `smem_per_block`
// bytes of opt-in shared memory per block. On bad input: no rows, and *error says what was wrong and
// what is accepted (`all` leaves out, without an error, the algorithms that have no such pass).
std::vector<KernelShapeRow> kernel_shapes(const std::string& algo, bool backward, int head_dim, const std::string& dtype,
                                          int smem_per_block, std::string* error);

}  // namespace flashlab::gpu
