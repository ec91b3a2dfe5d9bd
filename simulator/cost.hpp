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
  double t_wait = 0;                  // SMs idle on their own warps: exchanges and exposed latencies
  double time_s = 0;
  int64_t block_m = 0, block_n = 0;   // Br, Bc of the first kernel (0 for standard)

  Cost& operator+=(const Cost& c) {
    for (double Cost::*sum : kSums) this->*sum += c.*sum;
    for (double Cost::*most : kLargest) this->*most = std::max(this->*most, c.*most);
    if (block_m == 0) {
      block_m = c.block_m;
      block_n = c.block_n;
    }
    return *this;
  }

 private:
  static constexpr double Cost::*kSums[] = {
      &Cost::flops,    &Cost::exp_ops, &Cost::other_flops, &Cost::hbm_read_bytes, &Cost::hbm_write_bytes,
      &Cost::l2_bytes, &Cost::l2_hit_bytes, &Cost::ctas,  &Cost::waves,          &Cost::launches,
      &Cost::t_tensor, &Cost::t_smem,  &Cost::t_exp,       &Cost::t_fp32,         &Cost::t_hbm,
      &Cost::t_l2,     &Cost::t_launch, &Cost::t_wait,  &Cost::time_s};
  static constexpr double Cost::*kLargest[] = {&Cost::sram_bytes, &Cost::ctas_per_sm, &Cost::occupancy};
};

}  // namespace flashlab::sim
