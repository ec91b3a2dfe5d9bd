// Cost: everything one kernel, one pass or one whole estimate costs, in one record.
//
// Counts add up (FLOPs, bytes, times); the kernel's shape fields (shared memory
// per CTA, CTAs per SM, occupancy) keep the largest; the tile sizes are the
// first kernel's (the forward's when there is one). `+=` is the one place that
// rule is written.
#pragma once
#include <algorithm>
#include <cstdint>

namespace flashlab::sim {

struct Cost {
  double flops = 0;                   // matmul FLOPs executed
  double exp_ops = 0, other_flops = 0;
  double hbm_read_bytes = 0, hbm_write_bytes = 0;
  double l2_bytes = 0;                // SRAM <-> L2 (every load and store of every CTA)
  double l2_hit_bytes = 0;            // of the loads the replay sent through L2, those that hit
  double sram_bytes = 0;              // shared memory per CTA (largest kernel)
  double ctas = 0, ctas_per_sm = 0, waves = 0, occupancy = 0;
  double launches = 0;
  double t_tensor = 0, t_smem = 0, t_exp = 0, t_fp32 = 0, t_hbm = 0, t_l2 = 0, t_launch = 0;
  double time_s = 0;
  int64_t block_m = 0, block_n = 0;   // Br, Bc of the first kernel (0 for standard)

  Cost& operator+=(const Cost& c) {
    flops += c.flops;
    exp_ops += c.exp_ops;
    other_flops += c.other_flops;
    hbm_read_bytes += c.hbm_read_bytes;
    hbm_write_bytes += c.hbm_write_bytes;
    l2_bytes += c.l2_bytes;
    l2_hit_bytes += c.l2_hit_bytes;
    sram_bytes = std::max(sram_bytes, c.sram_bytes);
    ctas += c.ctas;
    ctas_per_sm = std::max(ctas_per_sm, c.ctas_per_sm);
    waves += c.waves;
    occupancy = std::max(occupancy, c.occupancy);
    launches += c.launches;
    t_tensor += c.t_tensor;
    t_smem += c.t_smem;
    t_exp += c.t_exp;
    t_fp32 += c.t_fp32;
    t_hbm += c.t_hbm;
    t_l2 += c.t_l2;
    t_launch += c.t_launch;
    time_s += c.time_s;
    if (block_m == 0) {
      block_m = c.block_m;
      block_n = c.block_n;
    }
    return *this;
  }
};

}  // namespace flashlab::sim
