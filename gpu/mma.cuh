// The tensor-core building blocks fa2's forward and backward share: swizzled
// shared-memory tiles, cp.async copies, ldmatrix loads, the m16n8k16 MMA and
// the fragment packing between them.
//
// Fragment layout of mma.sync m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16 x 16, row-major)  a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..)
//   B (16 x 8, "col")       b0: (k 2t..2t+1, n g)               b1: (k 2t+8.., n g)
//   C (16 x 8, fp32)        c0, c1: (g, 2t), (g, 2t+1)          c2, c3: (g+8, 2t), (g+8, 2t+1)
// so the C fragments of two adjacent 8-column tiles are, packed to 16 bits, the A
// fragment of a 16-column operand: P~ and dS never leave registers when they
// feed the next MMA as A.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace flashlab::gpu::mma {

constexpr float kLog2e = 1.4426950408889634f;  // exp(x) = exp2(x * log2(e))
constexpr float kLn2 = 0.6931471805599453f;

// ---- shared memory: a tile of rows x W 16-bit elements in 16-byte chunks, XOR-swizzled so
// that the 8 rows one ldmatrix 8x8 matrix reads fall in 8 different bank groups.
template <int W>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  constexpr int kChunks = W / 8;
  static_assert(kChunks == 4 || kChunks % 8 == 0, "rows of 32 or a multiple of 64 elements");
  if constexpr (kChunks >= 8) {
    return row * W + ((chunk ^ (row & 7)) << 3);
  } else {  // 4 chunks a row: two rows share a 128-byte line, so XOR with the line index
    return row * W + ((chunk ^ ((row >> 1) & 3)) << 3);
  }
}
// The element at (row, col) of a swizzled tile.
template <int W>
__device__ __forceinline__ int swizzled(int row, int col) {
  return swizzle<W>(row, col / 8) + col % 8;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async: global -> shared without passing through registers
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: fill the 16 bytes with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  const int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {  // at most N groups still in flight
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Copies rows [row0, row0 + kRows) of a (seqlen, row_stride) tensor into a swizzled kRows x D tile with
// kThreads threads; rows at or past `valid_rows`, and columns at or past `cols` (a head_dim padded up
// to D, a multiple of 8), are zero-filled. Each thread always copies the same 16-byte chunk of every
// (kThreads / chunks)-th row, so its addresses advance by constant steps, and whether a copy is in
// range is one compare of the pass index against a per-thread limit: three instructions a copy (a
// 64-bit add and the compare) instead of a division and a 64-bit multiply (v4) or the selects that
// swapped a zero-filled copy's address for a safe one (v5). A zero-filled copy reads no global memory
// (its source size is 0), so its address may lie past the tensor. `thread`: this thread's index among
// the kThreads (a lane, where one warp copies a tile alone).
template <int D, int kThreads, int kRows, typename T>
__device__ __forceinline__ void load_tile(T* tile, const T* src, int64_t row_stride, int row0, int valid_rows,
                                          int cols, int thread = threadIdx.x) {
  constexpr int kChunks = D / 8, kRowsPerPass = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kRows % kRowsPerPass == 0, "tile rows split evenly over the threads");
  const int c = thread % kChunks, r0 = thread / kChunks;
  // Pass i copies row row0 + r0 + i kRowsPerPass, in range iff i kRowsPerPass < limit.
  const int limit = c * 8 < cols ? valid_rows - row0 - r0 : 0;
  const T* from = src + int64_t(row0 + r0) * row_stride + c * 8;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    cp_async_16(tile + swizzle<D>(r0 + i * kRowsPerPass, c), from, i * kRowsPerPass < limit);
    from += kRowsPerPass * row_stride;
  }
}

// ---- ldmatrix: the four ways fa2 feeds an MMA from a swizzled tile of width W (W / 8 chunks a row):
//   A       16 x 16 at (m0, k0) of a row-major (m x k) tile, as Q in Q K^T
//   ATrans  the same from a tile stored transposed, (k x m) row-major, as dS^T in dQ = dS K
//   B       two 8-column tiles (n0, n0 + 8; 16 deep at k0) of an (n x k) row-major tile, as K in Q K^T:
//           {b[0], b[1]} feed the first tile, {b[2], b[3]} the second (mma_16x16)
//   BTrans  the same from a (k x n) row-major tile, as V in P V
// each an ldmatrix.x4: four 8x8 16-bit matrices, one row address a lane.
//
// A lane's address for the 16 x 16 block at (row0, chunk_base + chunk0) of the tile, row0 % 8 == 0,
// chunk0 % 2 == 0 and chunk_base a run-time chunk offset of the warp's (even), splits into
//   lane part  swizzle(r, chunk_base + 2 i + c) with i = (chunk0 & 6) / 2: one of four values a lane
//              holds, and
//   constant   row0 W + (chunk0 & ~7) 8, which ldmatrix takes as an immediate,
// because the XOR only touches a chunk index's low three bits (two for W = 32, whose chunk0 is 0 or 2):
// swizzle(r, x + 8 m) = swizzle(r, x) + 64 m. So one operand's reads need four address registers
// for the whole loop. With run-time offsets (v6) the compiler hoisted every one of a loop's offsets
// into a register of its own (144 a step for the forward's d = 256) and then recomputed them each
// K/V block for want of registers.
enum class Frag { A, ATrans, B, BTrans };

template <int W, Frag F>
struct Ldsm {
  uint32_t lane_part[4];  // byte offsets

  __device__ __forceinline__ explicit Ldsm(int lane, int chunk_base = 0) {
    // The lane's row r in the 16-row block and its chunk c in the 2-chunk column.
    const int r = F == Frag::A ? lane % 16 : F == Frag::B ? (lane / 16) * 8 + lane % 8
                : F == Frag::ATrans ? lane % 8 + (lane / 16) * 8 : lane % 8 + ((lane / 8) % 2) * 8;
    const int c = F == Frag::A || F == Frag::BTrans ? lane / 16 : (lane / 8) % 2;
#pragma unroll
    for (int i = 0; i < 4; ++i) lane_part[i] = 2u * uint32_t(swizzle<W>(r, chunk_base + 2 * i + c));
  }

  // The fragment of 16 x 16 block (kMN, kK) of the operand at shared address `tile`, counted in blocks
  // along M (or N) and K, whichever way round the tile is stored.
  template <int kMN, int kK>
  __device__ __forceinline__ void block(uint32_t (&x)[4], uint32_t tile) const {
    constexpr bool kTrans = F == Frag::ATrans || F == Frag::BTrans;
    constexpr int kRow0 = 16 * (kTrans ? kK : kMN), kChunk0 = 2 * (kTrans ? kMN : kK);
    constexpr int kImm = 2 * (kRow0 * W + (kChunk0 & ~7) * 8);
    const uint32_t addr = tile + lane_part[(kChunk0 & 6) / 2];
    if constexpr (kTrans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4+%5];\n"
                   : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                   : "r"(addr), "n"(kImm));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4+%5];\n"
                   : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                   : "r"(addr), "n"(kImm));
    }
  }

  // The reverse of block for an A operand: writes the A fragment x (as c_to_a packs it) into block
  // (kMN, kK) of the tile, stmatrix.x4 on sm_90 (the same lane addresses as ldmatrix), else four 32-bit
  // stores a lane.
  template <int kMN, int kK>
  __device__ __forceinline__ void store(const uint32_t (&x)[4], uint32_t tile, int lane) const {
    static_assert(F == Frag::A, "stores A fragments");
    constexpr int kRow0 = 16 * kMN, kChunk0 = 2 * kK;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int kImm = 2 * (kRow0 * W + (kChunk0 & ~7) * 8);
    (void)lane;
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0+%1], {%2,%3,%4,%5};\n"
                 ::"r"(tile + lane_part[(kChunk0 & 6) / 2]), "n"(kImm), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3])
                 : "memory");
#else
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // a[i]: rows g + 8 (i % 2), columns 2t + 8 (i / 2) of the block
      const int row = kRow0 + lane / 4 + 8 * (i % 2), col = 8 * kChunk0 + 2 * (lane % 4) + 8 * (i / 2);
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(tile + 2u * uint32_t(swizzled<W>(row, col))), "r"(x[i])
                   : "memory");
    }
#endif
  }
};

// Calls f(std::integral_constant<int, i>{}) for i = 0 .. N - 1: a loop whose index is a compile-time
// constant in the body (for Ldsm::load's offsets).
template <typename F, int... I>
__device__ __forceinline__ void unroll_each(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
__device__ __forceinline__ void unroll(F&& f) {
  unroll_each(f, std::make_integer_sequence<int, N>{});
}

// D (16x8 fp32) += A (16x16) * B (16x8), A and B in bf16 or fp16.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// The two 8-column tiles 2n and 2n + 1 of a row of accumulator tiles += A (16 x 16) times a B fragment as
// Ldsm<W, Frag::B or BTrans>::block returns it ({b[0], b[1]} feed the first tile, {b[2], b[3]} the second).
template <typename T, int N>
__device__ __forceinline__ void mma_16x16(float (&c)[N][4], int n, const uint32_t (&a)[4], const uint32_t (&b)[4]) {
  mma_16816<T>(c[2 * n], a, b[0], b[1]);
  mma_16816<T>(c[2 * n + 1], a, b[2], b[3]);
}

// acc += A B over kSteps 16-deep steps: kTiles 16-row tiles of A (its blocks 0 .. kTiles - 1 along M)
// and 8 kN8 columns of B, both read through Ldsm from shared addresses a and b. Each B fragment feeds
// kTiles MMAs. The forward's S = Q K^T and the backward's dQ = dS K are this shape.
template <typename T, int kSteps, int kTiles, int kN8, class LA, class LB>
__device__ __forceinline__ void mma_acc(float (&acc)[kTiles][kN8][4], const LA& la, uint32_t a, const LB& lb,
                                        uint32_t b) {
  unroll<kSteps>([&](auto k_) {
    constexpr int k = decltype(k_)::value;
    uint32_t x[kTiles][4];
    unroll<kTiles>([&](auto m_) {
      constexpr int m = decltype(m_)::value;
      la.template block<m, k>(x[m], a);
    });
    unroll<kN8 / 2>([&](auto n_) {
      constexpr int n = decltype(n_)::value;
      uint32_t y[4];
      lb.template block<n, k>(y, b);
#pragma unroll
      for (int m = 0; m < kTiles; ++m) mma_16x16<T>(acc[m], n, x[m], y);
    });
  });
}

// Two products side by side, acc1 += A1 B1 and acc2 += A2 B2, over kSteps 16-deep steps: kTiles 16-row
// tiles of A (its blocks 0 .. kTiles - 1 along M) and 8 kN8 columns of B, all four operands read through
// Ldsm from shared addresses a1, a2, b1, b2. Each B fragment feeds kTiles MMAs. The backward's S^T and
// dP^T (K Q^T, V dO^T) and its dV and dK (P^T dO, dS^T Q) are both this shape.
template <typename T, int kSteps, int kTiles, int kN8, class LA, class LB>
__device__ __forceinline__ void mma_pair(float (&acc1)[kTiles][kN8][4], float (&acc2)[kTiles][kN8][4],
                                         const LA& la, uint32_t a1, uint32_t a2, const LB& lb, uint32_t b1,
                                         uint32_t b2) {
  unroll<kSteps>([&](auto k_) {
    constexpr int k = decltype(k_)::value;
    uint32_t x1[kTiles][4], x2[kTiles][4];
    unroll<kTiles>([&](auto m_) {
      constexpr int m = decltype(m_)::value;
      la.template block<m, k>(x1[m], a1);
      la.template block<m, k>(x2[m], a2);
    });
    unroll<kN8 / 2>([&](auto n_) {
      constexpr int n = decltype(n_)::value;
      uint32_t y1[4], y2[4];
      lb.template block<n, k>(y1, b1);
      lb.template block<n, k>(y2, b2);
#pragma unroll
      for (int m = 0; m < kTiles; ++m) {
        mma_16x16<T>(acc1[m], n, x1[m], y1);
        mma_16x16<T>(acc2[m], n, x2[m], y2);
      }
    });
  });
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&x));
  } else {
    return __half22float2(*reinterpret_cast<__half2*>(&x));
  }
}

// The A fragment of a 16 x 16 operand from the fp32 C fragments of two adjacent 16 x 8 tiles.
template <typename T>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack2<T>(c0[0], c0[1]);
  a[1] = pack2<T>(c0[2], c0[3]);
  a[2] = pack2<T>(c1[0], c1[1]);
  a[3] = pack2<T>(c1[2], c1[3]);
}

// The B fragment (16 deep x 8) of the transpose of a 16 x 8 C tile, packed to 16 bits: C's rows become B's
// depth. Each 8 x 8 half of the tile (rows g, and g + 8) is transposed across the warp by movmatrix (sm_75+),
// so a lane holding C's (row g, columns 2t, 2t + 1) ends up holding B's (depth 2t, 2t + 1; column g). The
// decode kernel's P^T, computed as S^T = K Q^T (keys as M), feeds O^T += V^T P^T this way.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}
template <typename T>
__device__ __forceinline__ void c_to_b_trans(uint32_t& b0, uint32_t& b1, const float (&c)[4]) {
  b0 = movmatrix_trans(pack2<T>(c[0], c[1]));
  b1 = movmatrix_trans(pack2<T>(c[2], c[3]));
}

// 2^x on the MUFU unit, flushing denormals (exp2f without --use_fast_math adds range fix-ups).
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Zeroes a row of N accumulator tiles.
template <int N>
__device__ __forceinline__ void zero(float (&acc)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
}

}  // namespace flashlab::gpu::mma
