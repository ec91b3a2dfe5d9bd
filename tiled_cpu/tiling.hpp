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
  // Q blocks counted from the sequence's end: where Br does not divide seqlen_q, the ragged block is the
  // first, not the last. flashlab's fa3 forward tiles so where Br > Bc, without a mask function
  // (gpu/shapes.hpp fa3_forward_q_blocks_from_end): under a causal mask the first block's walk is the
  // shortest, and a ragged block's padded rows cost whole-tile GEMMs at every step of its walk. K/V blocks
  // always start at 0.
  bool q_from_end = false;

  static Tiling from_sram(int64_t M_elements, int64_t head_dim);
  std::string describe() const {
    return "Br=" + std::to_string(Br) + " Bc=" + std::to_string(Bc) + (q_from_end ? " (Q blocks from the end)" : "");
  }

  // ---- where Q block i of a sequence of sq rows lies (the one place that says it) ----
  int64_t q_blocks(int64_t sq) const { return (sq + Br - 1) / Br; }
  // Rows before the first block's first (q_from_end; 0 otherwise): the padding moved to the start.
  int64_t q_offset(int64_t sq) const { return q_from_end ? q_blocks(sq) * Br - sq : 0; }
  // Q block i's rows [row0, row0 + rows) within the sequence.
  struct Rows {
    int64_t row0, rows;
  };
  Rows q_block(int64_t i, int64_t sq) const {
    const int64_t start = i * Br - q_offset(sq), row0 = start < 0 ? 0 : start;
    return {row0, (start + Br < sq ? start + Br : sq) - row0};
  }
  // The Q block holding row r.
  int64_t q_block_of(int64_t r, int64_t sq) const { return (r + q_offset(sq)) / Br; }
};

// The executor's default on a CPU, measured (bench/): Eigen's GEMM kernels
// amortize their packing best from about 128 rows on; 256 x 128 tiles beat
// 64 x 128 by 1.2-1.4x at d = 64 and 128 on a 2-core AVX-512 Xeon, and the
// S tile (128 KiB in fp32) still sits in a 2 MiB L2.
inline constexpr Tiling kCpuDefault{256, 128};

}  // namespace flashlab::tiled
