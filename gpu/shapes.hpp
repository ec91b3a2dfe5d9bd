// The tile shapes of flashlab's GPU kernels, one pure function per kernel family: the kernels'
// launchers instantiate exactly these (fa2_fwd.cu builds its template shape from them), the simulator
// models them (`flashlab estimate --impl flashlab`), and scripts read them through `flashlab shapes`.
// Plain constexpr C++ (no CUDA): included by nvcc and the host compiler alike, and built everywhere.
#pragma once

namespace flashlab::gpu {

struct Fa2ForwardShape {
  int head_dim;     // the padded head dim the kernel is compiled for: 64, 128 or 256
  int warps;        // warps per CTA
  int row_tiles;    // 16-row MMA tiles per warp
  int block_n;      // Bc: keys per K/V block
  int stages;       // K/V blocks in flight (cp.async buffers)
  bool warp_pairs;  // fa2_fwd_pairs.cu: two warps split each query block's head dim
  const char* why;
  constexpr int block_m() const { return warp_pairs ? 16 * row_tiles * warps / 2 : 16 * row_tiles * warps; }
  constexpr int threads() const { return 32 * warps; }
};

// The head dim fa2 pads to: 64, 128 or 256 (0: not supported, i.e. not a multiple of 8 in 8..256).
constexpr int fa2_padded_head_dim(int head_dim) {
  if (head_dim <= 0 || head_dim > 256 || head_dim % 8 != 0) return 0;
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}

// fa2's forward (gpu/fa2_fwd.cu, fa2_fwd_pairs.cu; timings in its version index and gpu/HISTORY.md).
constexpr Fa2ForwardShape fa2_forward_shape(int padded_head_dim) {
  if (padded_head_dim == 64)
    return {64, 4, 2, 128, 2, false,
            "two 16-row MMA tiles a warp (Br = 128): each K/V fragment read from shared memory feeds two MMAs; "
            "K/V blocks of 128 keys halve the blocks, barriers and row-max reductions (80 KiB, 255 registers)"};
  if (padded_head_dim == 128)
    return {128, 4, 2, 64, 2, false,
            "two 16-row MMA tiles a warp (Br = 128), 228-255 registers, so two CTAs of four warps an SM; two K/V "
            "stages hide the loads"};
  return {256, 4, 2, 64, 1, true,
          "warp pairs split the head dim (the O accumulator of 32 rows x 256 would not fit one warp's "
          "registers): 64 query rows, 4 warps, two CTAs an SM"};
}

}  // namespace flashlab::gpu
