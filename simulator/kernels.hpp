// The fused kernels as they run: shape (tiles, warps, shared memory, CTAs per
// SM) and the seconds one element of S costs on one SM, built unit by unit.
//
//   fa1  FlashAttention-1 (flash-attn 1.0.x, the kernel the FA2 paper measured):
//        Algorithm 1/4 tiles from the SRAM size M, 4 warps (backward 8) that
//        split each K/V block between them ("sliced K") and add their partial
//        O through shared memory; O rescaled and divided at every K/V block.
//   fa2  FlashAttention-2 (forward 4 warps per 128 query rows, each owning its
//        rows; backward 8 warps, five GEMMs per tile).
//   fa3  FlashAttention-3 (Hopper): wgmma reads its operands from shared memory,
//        TMA loads, two consumer warpgroups ping-pong; only where wgmma exists.
// simulator/README.md gives the sentence and the source for each mechanism.
#pragma once
#include <string>

#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "tiling.hpp"

namespace flashlab::sim {

enum class Algo { standard, math, fa1, fa2, fa3 };

// Whose kernel runs the algorithm. The forward's K/V order and the launch differ, and the replay
// shows what that does to L2 reuse under a causal mask:
//   upstream  the public kernel: flash-attn 2 (PyTorch SDPA's flash backend) walks each Q block's K/V
//             blocks from the last to the first (flash_fwd_kernel.h starts at the diagonal, where the
//             mask is), and its backward each K/V block's Q blocks from the last; flash-attn 3 the
//             same, with persistent CTAs and its tile scheduler.
//   flashlab  gpu/fa2_fwd.cu, gpu/fa2_bwd.cu and gpu/fa3/ (forward and backward): K/V blocks from the
//             first (its j loop), the backward's Q blocks from the first, their own tiles (gpu/shapes.hpp).
//   cudnn     cuDNN's Hopper kernel (fa3 only): one CTA per tile in grid order (ncu: 4096 CTAs for
//             4096 tiles); K/V from the first, inferred from its DRAM bytes (1.00x the compulsory
//             bytes at every causal length in simulator/validation/sdpa-*.csv).
enum class Impl { upstream, flashlab, cudnn };
std::string to_string(Impl impl);
Impl parse_impl(const std::string& name);  // upstream | flashlab | cudnn

// Which kernel of a backward: FA2's and FA3's one kernel of five GEMMs a tile (dQ by atomics, or by
// flashlab's fa3 in turns), or the two of flashlab's fa2 deterministic backward (gpu/fa2_bwd.cu): dkdv
// without dQ (four GEMMs: S, dP, dV, dK) and dq, Q outer (three: S, dP, dQ; tiled::Order::dkdv and dq).
enum class BackwardKernel { all, dkdv, dq };
// Matmul FLOPs an element of S costs in a pass: forward 2 (d + dv); the backward's kernels by their GEMMs.
double flops_per_element(double d, double dv, bool backward, BackwardKernel part = BackwardKernel::all);

struct KernelShape {
  tiled::Tiling tiling;
  double threads = 128;
  double smem = 0;           // bytes of shared memory per CTA
  double ctas_per_sm = 1;    // what shared memory, threads and registers allow
  bool persistent = false;   // FA3: one CTA per slot, tiles from its scheduler
  double exchanges_per_tile = 0;  // FA2 backward: shared-memory hand-offs between warps per tile, each behind a barrier
  bool consumers_meet_each_tile = false;  // flashlab's fa3 backward: its two consumer warpgroups meet at a
                                          // named barrier every step (dS^T for the dQ GEMM), so one's softmax
                                          // cannot run under the other's GEMMs (v15's turns at d <= 128 let
                                          // them alternate; not modelled, kernels.cpp says why)
};

// Seconds per element of S on one SM, by unit, and the whole step.
struct ElementCost {
  double tensor = 0, smem = 0, exp = 0, fp32 = 0;  // the units' busy time
  double wait = 0;                                 // a lone CTA's waits: exchanges, exposed latencies
  double full = 0, partial = 0;                    // a step of a full tile, of a tile on the mask's edge
  double fp32_ops = 0;                             // FP32 lane instructions per element (without the mask's)
  double mask_ops = 0;                             // the extra ones per element of a tile on the mask's edge
};

// Throws flashlab::Error when the tiles do not fit the GPU's shared memory, or the algorithm's
// instructions do not exist on it (fa3 without wgmma).
// impl flashlab: fa2's forward takes gpu/shapes.hpp's fa2_forward_shape, the shape its launcher instantiates.
// fp8: flashlab's FP8 forward (gpu/shapes.hpp fa3_fp8_forward_shape; e4m3 operands at the FP8 tensor rate).
// part: dkdv and dq are flashlab's fa2 deterministic kernels (impl flashlab, algo fa2 only).
KernelShape kernel_shape(const Problem& p, const GpuSpec& g, Algo algo, Impl impl, bool backward, int64_t block_m,
                         int64_t block_n, bool fp8 = false, BackwardKernel part = BackwardKernel::all);
ElementCost element_cost(const Problem& p, const GpuSpec& g, Algo algo, bool backward, const KernelShape& shape,
                         bool fp8 = false, BackwardKernel part = BackwardKernel::all);

// FA3 needs wgmma and TMA (Hopper): presets without a wgmma path cannot run it. Empty when it can,
// else the reason.
std::string fa3_unavailable(const GpuSpec& g);

// FA1's Q-block splits (flash-attn 1.0.x `num_splits_heuristic_fwd`): the fewest splits of each
// (batch, head) whose wave efficiency is within 95% of the best over 1..30.
int64_t fa1_splits(double batch_heads, double sms, double ctas_per_sm);

}  // namespace flashlab::sim
