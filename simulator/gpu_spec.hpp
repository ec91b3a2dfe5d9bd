// GpuSpec: a GPU's hardware described as data (presets/NAME.json), never in code.
//
// Every number in a preset is {"value": ..., "source": ...}; load_gpu() reads
// one, applies "field=value" overrides (dotted paths such as
// tensor_flops_per_s.bf16), and refuses a malformed or incomplete file with an
// error naming the field.
#pragma once
#include <string>
#include <vector>

#include "flashlab/dtype.hpp"

namespace flashlab::sim {

struct GpuSpec {
  std::string name, display_name, architecture;
  double sm_count = 0, clock_ghz = 0;
  double smem_per_sm_bytes = 0, smem_per_block_bytes = 0;
  double sram_per_sm_bytes = 0;                            // L1 + shared: the FlashAttention paper's M
  double registers_per_sm = 0, max_threads_per_sm = 0, max_blocks_per_sm = 0;
  double max_registers_per_thread = 0;                     // what a kernel compiled for one CTA per SM may use
  double l2_bytes = 0, l2_bandwidth = 0;                   // bytes, bytes/s
  double l2_partitions = 1;                                // a line every SM reads is held once per partition
  double smem_bandwidth = 0;                               // shared-memory reads, all SMs, bytes/s
  double hbm_bytes = 0, hbm_bandwidth = 0, hbm_achievable_fraction = 0;
  double tensor_fp16 = 0, tensor_bf16 = 0, tensor_fp32 = 0, tensor_fp8 = 0;  // dense FLOP/s
  double mma_sync_fraction = 0, wgmma_fraction = 0;       // of the tensor peak, per instruction path
  double fp32_flops = 0, exp_per_s = 0, kernel_launch_s = 0;
  double dram_latency_s = 0;                              // optional: 0 when the preset has none
  double l2_latency_s = 0;                                // optional: one dependent L2 hit; 0 when unmeasured
  // Optional: fp32 reductions landing in L2, all SMs, a CTA an SM adding a 64 KiB tile a step and waiting for
  // it to land before the next (l2_reduce.cu's "tile landed"); 0 when unmeasured.
  double l2_reduce_bytes_per_s = 0;
  // Optional: the same adds not waited for, every CTA on tiles of its own (l2_reduce.cu's "tile distinct").
  double l2_reduce_stream_bytes_per_s = 0;
  double barrier_round_trip_s = 0;                        // optional: one shared-memory exchange between warps
  // Optional: what a kernel that only reads takes beyond its bytes at hbm_effective() (cold_read.cu: its
  // launch's ramp, the first loads' round trips before the stream is full, the last CTAs' drain); 0 when
  // unmeasured.
  double hbm_stream_start_s = 0;
  // Optional (dependent_launch.cu): what a kernel waiting on the one before pays between the two, launched
  // as a programmatic dependent (sm_90) with a few dozen CTAs; 0 where not measured.
  double dependent_launch_s = 0;
  // Optional: the rate one SM reads at while the other SMs do not compete (sm_read.cu); 0 when unmeasured.
  double sm_l2_read_bytes_per_s = 0, sm_dram_read_bytes_per_s = 0;
  // Optional: fp32 pairs converted to e4m3 a second, all SMs (cvt_e4m3.cu); 0: the conversion is not charged.
  double fp8_convert_pairs_per_s = 0;
  // Optional: seconds from issue to result of one dependent instruction (a warp alone on its scheduler waits
  // these out at every phase boundary); all 0 when the preset has none.
  struct Latencies {
    double mma_sync = 0, ldmatrix = 0, ex2 = 0, fp32 = 0, shfl = 0;
  } latency;

  double tensor_peak(DType dtype) const;                  // FLOP/s for this storage dtype
  double hbm_copy_fraction = 0;                           // read + write streams (elementwise kernels)
  double hbm_effective() const { return hbm_bandwidth * hbm_achievable_fraction; }
  double hbm_copy_effective() const { return hbm_bandwidth * hbm_copy_fraction; }
  // The L2 capacity data read by every SM can fill: each partition keeps its own copy of such a line.
  double l2_shared_bytes() const { return l2_bytes / l2_partitions; }
  // FP32 lane instructions per second: the FLOP/s figure counts an FMA as two.
  double fp32_ops_per_s() const { return fp32_flops / 2; }
};

std::string preset_dir();                                 // $FLASHLAB_PRESETS or the source tree's presets/
std::vector<std::string> list_presets();                  // names, sorted
// name: a preset name (h100-sxm) or, with from_file, a path to a JSON file.
GpuSpec load_gpu(const std::string& name_or_path, bool from_file = false,
                 const std::vector<std::string>& overrides = {});

}  // namespace flashlab::sim
