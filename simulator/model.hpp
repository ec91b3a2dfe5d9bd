// The IO and roofline model of attention on a GPU.
//
// estimate() counts, for one problem on one GPU and one algorithm:
//   FLOPs: matmul (at tile granularity for fused kernels: masked elements of a
//          partial tile are still computed), exponentials, other FP32 work;
//   bytes: between SRAM and L2 (the schedule's transfers, summed over heads)
//          and between L2 and HBM (the cache model, cache_model.hpp);
//   the kernel's shape: tile sizes, shared memory per CTA, CTAs, CTAs per SM,
//   waves; the peak HBM allocation;
// and turns them into time (see simulator/README.md):
//   standard  cuBLAS GEMMs (compute) and elementwise kernels (bandwidth), in sequence
//   fused     max(compute, HBM, L2) + launch, where compute is the makespan of the CTAs in launch
//             order on the SMs' CTA slots, each CTA its elements of S times a per-element cost:
//             fa1, fa2  tensor (with FA2's ldmatrix operand reads) + softmax: a warp's softmax waits
//                       for its own GEMMs
//             fa3       tensor and softmax overlapped by two ping-ponging warpgroups
#pragma once
#include <string>
#include <vector>

#include "flashlab/pass.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"

namespace flashlab::sim {

enum class Algo { standard, fa1, fa2, fa3 };
std::string to_string(Algo algo);
std::vector<Algo> parse_algos(const std::string& name);  // standard | fa1 | fa2 | fa3 | all

struct Estimate {
  std::string algo, gpu, pass;
  int64_t seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  int64_t block_m = 0, block_n = 0;  // Br, Bc of the forward kernel (0 for standard)
  double flops = 0;                  // matmul FLOPs executed
  double exp_ops = 0, other_flops = 0;
  double hbm_read_bytes = 0, hbm_write_bytes = 0;
  double l2_bytes = 0;               // SRAM <-> L2 (every load and store of every CTA)
  double sram_bytes = 0;             // shared memory per CTA (largest kernel)
  double ctas = 0, ctas_per_sm = 0, waves = 0, occupancy = 0;
  double peak_hbm_bytes = 0;         // inputs, outputs and intermediates alive at once
  double t_tensor = 0, t_smem = 0, t_exp = 0, t_fp32 = 0, t_hbm = 0, t_l2 = 0, t_launch = 0;
  double time_s = 0;
  std::string bound;                 // tensor | smem | exp | fp32 | hbm | l2 | launch
  double speedup_vs_standard = 0;
};

struct Options {
  int64_t block_m = 0, block_n = 0;  // 0: the algorithm's own choice for the head dim
  // standard: "paper" counts a separate scale pass over S, as the FlashAttention
  // paper's PyTorch baseline does; "fused-scale" folds the scale into the GEMM.
  bool standard_scale_pass = true;
};

Estimate estimate(const Problem& p, const GpuSpec& gpu, Algo algo, Pass pass, const Options& options = {});
// All of `algos` for one problem, with speedup_vs_standard filled in.
std::vector<Estimate> estimate_all(const Problem& p, const GpuSpec& gpu, const std::vector<Algo>& algos, Pass pass,
                                   const Options& options = {});

}  // namespace flashlab::sim
