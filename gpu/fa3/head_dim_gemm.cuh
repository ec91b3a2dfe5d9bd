// fa3: the one GEMM shape the forward and the backward share: acc (+)= A B^T over the head dim, both
// operands K-major in shared memory (the forward's S = Q K^T, the backward's S^T = K Q^T and dP^T = V dO^T).
#pragma once
#include <cstdint>

#include "ptx.cuh"
#include "wgmma_ops.cuh"

namespace flashlab::gpu::fa3 {

// Elements a wgmma k-step reads: 32 bytes of a row (16 of a 16-bit type, 32 of FP8).
template <typename T>
constexpr int kKStep = 32 / int(sizeof(T));

// acc (+)= A B^T over a head dim of D: A's 64 rows at shared address a and B's N rows at b, both K-major in
// 128-byte swizzled blocks of 64 columns (128 bytes), a_block and b_block bytes apart; D / kKStep k-steps of
// 32 bytes, a new block every four. kFresh: the k-steps' descriptors from one base an operand, made here,
// where they are issued (ptx.cuh fresh; the forward at d = 256 and the backward everywhere: without it the
// compiler held them through the main loop and the consumers spilled). Issue between wgmma_fence() and
// wgmma_commit().
template <int N, int D, typename T, bool kFresh = true>
__device__ __forceinline__ void mma_over_head_dim(float (&acc)[N / 8][4], uint32_t a, uint32_t a_block, uint32_t b,
                                                  uint32_t b_block) {
  const uint64_t a0 = fresh<kFresh>(sw128_desc(a, 16, 1024));
  const uint64_t b0 = fresh<kFresh>(sw128_desc(b, 16, 1024));
#pragma unroll
  for (int kk = 0; kk < D / kKStep<T>; ++kk) {
    const uint32_t off = (kk % 4) * 32;  // bytes into the 128-byte swizzled row
    mma_ss<N, T>(acc, desc_plus(a0, (kk / 4) * a_block + off), desc_plus(b0, (kk / 4) * b_block + off), kk > 0);
  }
}

}  // namespace flashlab::gpu::fa3
