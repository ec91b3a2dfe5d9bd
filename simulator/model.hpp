// The model of attention on a GPU: FLOPs, bytes at each memory level, the
// kernel's shape and its time, for one problem, one GPU, one algorithm.
//
//   standard  the FlashAttention paper's unfused baseline: cuBLAS GEMMs and
//             elementwise kernels over the N x N matrices, in sequence;
//   math      PyTorch SDPA's math backend as PyTorch 2.11 runs it (standard.cpp);
//   fa1, fa2, fa3  the fused kernels (kernels.hpp): their CTAs replayed on the
//             SMs in launch order, their block loads through the L2 in time
//             order (replay.hpp, grids.hpp); time = max(replayed compute, DRAM
//             bytes / bandwidth, L2 bytes / bandwidth) + launches.
// simulator/README.md explains every mechanism and gives its source.
#pragma once
#include <string>
#include <vector>

#include "cost.hpp"
#include "flashlab/pass.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "kernels.hpp"
#include "replay.hpp"

namespace flashlab::sim {

std::string to_string(Algo algo);
// standard | math | fa1 | fa2 | fa3 | all. `all` leaves fa3 out on a GPU without wgmma (the note says why).
std::vector<Algo> parse_algos(const std::string& name, const GpuSpec* gpu = nullptr, std::string* note = nullptr);
// `all` with --impl flashlab and a backward: where flashlab's fa3 backward is not compiled for the head dim
// (gpu/shapes.hpp fa3_backward_shape: multiples of 8 up to 256), fa3 is left out of `algos`, and *note says
// why. An explicit --algo fa3 is refused by the estimate itself.
void leave_out_unbuilt(std::vector<Algo>& algos, const std::string& name, Impl impl, bool backward, int64_t head_dim,
                       std::string* note);

struct Estimate : Cost {
  std::string algo, gpu, pass;
  int64_t seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  double peak_hbm_bytes = 0;         // inputs, outputs and intermediates alive at once
  std::string bound;                 // tensor | smem | exp | fp32 | hbm | l2 | launch | out of memory
  double speedup_vs_standard = 0;
};

// One fused kernel's replayed CTAs, for `flashlab estimate --timeline`.
struct KernelTimeline {
  std::string name;                  // e.g. "fa2 forward"
  int64_t slots = 0, sms = 0;
  double seconds = 0;                // the replayed makespan
  std::vector<CtaSpan> ctas;
};

struct Options {
  int64_t block_m = 0, block_n = 0;  // 0: the algorithm's own choice for the head dim
  // standard: "paper" counts a separate scale pass over S, as the FlashAttention
  // paper's PyTorch baseline does; "fused-scale" folds the scale into the GEMM.
  bool standard_scale_pass = true;
  // Which kernel (kernels.hpp, Impl): flashlab applies to fa2 and fa3, cudnn to fa3; the rest run upstream's.
  Impl impl = Impl::upstream;
  std::vector<KernelTimeline>* timeline = nullptr;  // filled with each fused kernel's replay when set
  Residency* residency = nullptr;  // forward: what L2 held of (batch 0, head 0)'s K/V as its CTAs ran
  // How the L2 picks a victim. NVIDIA does not publish its policy; on the H100 a cyclic read of data every
  // SM touches loses L2 hits gradually past the capacity (microbench-h100-2026-11-23-run3.json), as random
  // replacement does and LRU (a cliff) does not. `lru` is there to compare (`--l2-replacement lru`).
  Replacement l2_replacement = Replacement::random;
  // flashlab's FP8 forward (gpu/fa3/fa3_fwd.cu fa3_fp8_forward; --algo fa3 --impl flashlab --pass fwd on a GPU
  // with FP8 tensor cores and wgmma): Q, K, V in e4m3 (1 byte), O in bf16, the FP8 tensor rate, P~'s
  // conversion to e4m3, and the V transpose kernel before it. estimate() refuses it anywhere else.
  bool fp8 = false;
  // flashlab's deterministic backward (dQ summed in a fixed order, no atomics): fa2's two kernels (dK/dV
  // without dQ, then the Q-outer dq kernel: tiled::Order::dkdv and dq), fa3's one kernel with each Q block's
  // dQ added in turns from its last K/V block down (grids.hpp DqSum::turns). standard and math are
  // deterministic as they are; estimate() refuses it for the other algorithms and kernels.
  bool deterministic = false;
};
// "" when `o.fp8` can be modelled for this algorithm, pass and GPU, else why not.
std::string fp8_unavailable(const GpuSpec& g, Algo algo, Pass pass, const Options& o);
// "" when `o.deterministic` can be modelled (or changes nothing: standard, math), else why not.
std::string deterministic_unavailable(const GpuSpec& g, Algo algo, Pass pass, const Options& o);

Estimate estimate(const Problem& p, const GpuSpec& gpu, Algo algo, Pass pass, const Options& options = {});
// All of `algos` for one problem, with speedup_vs_standard filled in.
std::vector<Estimate> estimate_all(const Problem& p, const GpuSpec& gpu, const std::vector<Algo>& algos, Pass pass,
                                   const Options& options = {});

// The unfused paths (standard.cpp).
Cost standard_pass(const Problem& p, const GpuSpec& g, bool backward, bool scale_pass);
Cost math_pass(const Problem& p, const GpuSpec& g, bool backward);

}  // namespace flashlab::sim
