// The decode estimate: split-KV decoding (flash_attn_with_kvcache) on a GPU, from the SplitSchedule's counts.
//
// A decode step streams the KV cache once: its time is the cache's bytes over HBM bandwidth when enough
// CTAs are in flight, and a few CTAs' latency-bound streams when there are not, which is what split-KV
// fixes. The model (simulator/README.md, "Decoding"):
//   kernel   flash-attn 2's split-KV kernel: block_m = 64, block_n = 256 / 128 / 64 for d <= 64 / <= 128 /
//            larger; with q_len 1 and GQA the query heads of a kv head are packed into the rows of one
//            tile (seqlenq_ngroups_swapped), so the cache is read once per kv head;
//   CTAs     batch x heads x m blocks x splits, on sm_count x 2 slots (flash-attn passes SMs x 2 to its
//            heuristic for its 128-thread CTAs);
//   a CTA    streams its split's K and V blocks with one block in flight (the loop issues the next
//            block's cp.async, then computes on the current one): by Little's law at most
//            block_bytes / dram_latency_s, and at most its share of hbm_bandwidth x hbm_achievable_fraction;
//   combine  reads every split's fp32 partial O and LSE, writes O and LSE: bytes / achievable bandwidth;
//   launch   kernel_launch_s per kernel (one without splits, two with).
// With Impl::flashlab, flashlab's own kernel (gpu/decode/decode.cu; `--impl flashlab`): its tiles and split
// rule from gpu/shapes.hpp (decode_split_shape, decode_splits_for), its slots from its shared memory, each
// CTA's stream at the kernel's measured rate in a fluid replay over the HBM, the preset's
// hbm_stream_start_s once a call, the combine after its dependency (dependent_launch_s) and a round trip, calls
// back to back (simulator/README.md).
#pragma once
#include <string>
#include <vector>

#include "flashlab/decode_problem.hpp"
#include "gpu_spec.hpp"
#include "kernels.hpp"
#include "shapes.hpp"

namespace flashlab::sim {

// flash-decoding's split heuristic: gpu/shapes.hpp's split_kv_heuristic, flash-attn 2's, whose kernel
// this model describes (flashlab's decode kernel, gpu/decode/, splits by bandwidth: decode_split_count).
using gpu::split_kv_heuristic;

struct DecodeEstimate {
  std::string gpu, problem;
  std::string impl;                // upstream (flash-attn 2's kernel) | flashlab (gpu/decode/)
  int64_t num_splits = 1, heuristic_splits = 1;
  bool splits_from_heuristic = false;
  int64_t block_m = 0, block_n = 0, ctas = 0, slots = 0;
  bool gqa_packed = false;
  double cache_bytes = 0;          // K and V blocks read (the schedule's loads of K and V)
  double q_bytes = 0, append_bytes = 0;
  double partial_write_bytes = 0;  // Oaccum and LSEaccum stores
  double combine_read_bytes = 0;   // Oaccum and LSEaccum loads
  double out_write_bytes = 0;      // O and LSE
  double t_split_s = 0, t_combine_s = 0, t_launch_s = 0, time_s = 0;
  double cta_bytes_per_s = 0;      // one CTA's stream: upstream its latency bound (0: no dram_latency_s in the
                                   // preset), flashlab the kernel's measured rate (gpu/shapes.hpp)
  std::string bound;               // hbm | latency (too few CTAs in flight) | launch (flashlab: the launch interval)
  double time_no_split_s = 0, speedup_vs_no_split = 0;
  double cache_bandwidth = 0;      // cache_bytes / time_s
};

// num_splits <= 0 in `d`: the kernel's rule chooses (upstream: flash-attn's heuristic; flashlab: its own).
// Impl::cudnn is refused (not modelled).
DecodeEstimate estimate_decode(DecodeProblem d, const GpuSpec& gpu, Impl impl = Impl::upstream);

std::string to_table(const DecodeEstimate& e);
std::string to_json(const DecodeEstimate& e);
std::string to_csv(const DecodeEstimate& e);

}  // namespace flashlab::sim
