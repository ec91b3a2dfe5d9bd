// Tile sizes: explicit, or derived from an on-chip memory budget M (in
// elements) as FlashAttention's Algorithm 1 does:
//   Bc = ceil(M / 4d),  Br = min(ceil(M / 4d), d)
// so that Q_i, K_j, V_j and O_i (and S_ij) fit in M at once.
#pragma once
#include <cstdint>
#include <string>

namespace flashlab::tiled {

struct Tiling {
  int64_t Br = 64;   // rows of Q per tile (query block)
  int64_t Bc = 64;   // rows of K/V per tile (key block)

  static Tiling from_sram(int64_t M_elements, int64_t head_dim);
  std::string describe() const { return "Br=" + std::to_string(Br) + " Bc=" + std::to_string(Bc); }
};

// The executor's default on a CPU, measured (bench/): Eigen's GEMM kernels
// amortize their packing best from about 128 rows on; 256 x 128 tiles beat
// 64 x 128 by 1.2-1.4x at d = 64 and 128 on a 2-core AVX-512 Xeon, and the
// S tile (128 KiB in fp32) still sits in a 2 MiB L2.
inline constexpr Tiling kCpuDefault{256, 128};

}  // namespace flashlab::tiled
