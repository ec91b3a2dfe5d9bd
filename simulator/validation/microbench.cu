// microbench.cu: the H200 (or any sm_80+) numbers the simulator's presets need, measured, as JSON.
//
// Build and run (one line, on the GPU machine):
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/mb simulator/validation/microbench.cu && /tmp/mb > out.json
// (sm_80/sm_89: -gencode=arch=compute_80,code=sm_80; everything here is sm_80 PTX.)
//
// What each test measures, and which preset field it feeds:
//   mma_sync      mma.sync.m16n8k16 bf16 x bf16 -> fp32, 8 independent accumulators per warp, 32 warps
//                 per SM (8 per scheduler), operands in registers, no memory traffic: FLOP/s   -> tensor_paths.mma_sync.fraction
//   ex2           ex2.approx.ftz.f32 (MUFU.EX2), 8 independent chains per thread: results/s -> exp_per_s
//   ffma          fma.rn.f32, 8 independent chains per thread: FLOP/s (an FMA = 2 FLOP) -> fp32_flops_per_s
//   mma_ex2_mix   FA2's inner loop in miniature: each warp issues 4 mma.sync then 1 ex2 per thread, in
//                 turn (the ratio at d = 128, Bc = 64): does the MUFU work hide under the MMAs or add?
//   fa2_occupancy the mma, ex2 and mix tests again at FA2's occupancy (2 CTAs of 4 warps per SM, 2 warps
//                 per scheduler), plus the mix with FA2's dependencies (ex2 reads the MMAs' results, the
//                 next MMAs read the exps): how much of the softmax hides under the MMAs in FA2's shape
//   ldmatrix      ldmatrix.x4 from shared memory, no bank conflicts: bytes/s (the SM's shared-memory
//                 read port, which feeds mma.sync's operands)
//   latencies     one warp on one SM, one dependent chain each, clock64(): clocks from issue to result of
//                 mma.sync m16n8k16 (the accumulator feeds the next), ex2.approx (the result feeds the next)
//                 and ldmatrix.x4 (the next address comes from the data loaded): what a warp alone on its
//                 scheduler waits at every phase boundary of FA2's loop (GEMM -> softmax -> GEMM); add.f32
//                 and max.f32 (the row sum's and row max's chain over a thread's elements) and shfl.bfly (the
//                 reduction across a row's four threads)
//   mma_ldmatrix  FA2's forward GEMM S = Q K^T at d = 128 in miniature, at FA2's occupancy (2 CTAs of 4 warps
//                 per SM): every k-step a warp ldmatrix-loads the next k-step's fragments (6 ldmatrix.x4: 2 of
//                 Q, 4 of K) and issues the 16 mma.sync of this one from the fragments loaded a step before;
//                 timed against the same mma.sync alone and the same ldmatrix alone: whether the shared-memory
//                 reads hide under the MMAs (max) or add to them (sum) -- the o_2 rule of simulator/README.md
//   l2_read       a 20 MiB buffer (fits L2) read 100 times, ld.global.cg (L1 bypassed): bytes/s -> l2_bandwidth
//   hbm_read      a 4 GiB buffer read once: bytes/s                          -> hbm_achievable_fraction
//   hbm_copy      2 GiB copied to 2 GiB: (read + write) bytes/s
//   dram_latency  one thread chasing a random pointer cycle through 256 MiB: s per dependent load
//   launch        an empty kernel launched 2000 times back to back, CUDA events: s per launch -> kernel_launch_s
// Every rate is the best of 5 timed runs after a warm-up. Rates per SM per clock use the SM clock the
// driver reports (cudaDevAttrClockRate, the maximum boost clock); clocks are not locked.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

constexpr const char* kProgram = "microbench";  // CHECK's messages (timing.cuh)
#include "timing.cuh"

constexpr int kChains = 8;  // independent dependency chains per thread: enough to hide each pipe's latency

// ---- tensor cores: mma.sync m16n8k16, bf16 inputs, fp32 accumulate -----------------------------------
// One mma is 16 x 8 x 16 multiply-adds = 4096 FLOP. The A (4 regs), B (2 regs) fragments stay in registers.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__global__ void mma_kernel(int iters, float* sink) {
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));  // small bf16 values, not constants
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
  float c[kChains][4] = {};
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int k = 0; k < kChains; ++k) mma_bf16(c[k], a, b);
  float s = 0;
#pragma unroll
  for (int k = 0; k < kChains; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  if (s == 1.2345f) sink[threadIdx.x] = s;  // never true; keeps the work alive
}

// ---- MUFU: ex2.approx.ftz.f32 --------------------------------------------------------------------------
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__global__ void ex2_kernel(int iters, float* sink) {
  float x[kChains];
#pragma unroll
  for (int k = 0; k < kChains; ++k) x[k] = -0.001f * (threadIdx.x + k);
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int k = 0; k < kChains; ++k) x[k] = ex2(-x[k]);  // stays in (0.5, 1]; the negation folds into MUFU
  float s = 0;
#pragma unroll
  for (int k = 0; k < kChains; ++k) s += x[k];
  if (s == 1.2345f) sink[threadIdx.x] = s;
}

// ---- FP32 pipe: fma.rn.f32 -----------------------------------------------------------------------------
__global__ void ffma_kernel(int iters, float* sink) {
  float x[kChains];
  const float m = 0.999f, a = 0.001f * threadIdx.x;
#pragma unroll
  for (int k = 0; k < kChains; ++k) x[k] = k;
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int k = 0; k < kChains; ++k) x[k] = __fmaf_rn(x[k], m, a);
  float s = 0;
#pragma unroll
  for (int k = 0; k < kChains; ++k) s += x[k];
  if (s == 1.2345f) sink[threadIdx.x] = s;
}

// ---- FA2's issue mix: 4 mma.sync, then one ex2 per thread, from the same warp --------------------------
constexpr int kMmaPerEx2 = 4;  // d = 128, Bc = 64: a warp's 16 x 64 slice of S costs 128 mma and 32 ex2/thread
__global__ void mix_kernel(int iters, float* sink) {
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
  float c[kChains][4] = {};
  float x[kChains];
#pragma unroll
  for (int k = 0; k < kChains; ++k) x[k] = -0.001f * (threadIdx.x + k);
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < kChains; ++k) {
#pragma unroll
      for (int m = 0; m < kMmaPerEx2; ++m) mma_bf16(c[(kMmaPerEx2 * k + m) % kChains], a, b);  // reuse 4 apart
      x[k] = ex2(-x[k]);
    }
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < kChains; ++k) s += c[k][0] + x[k];
  if (s == 1.2345f) sink[threadIdx.x] = s;
}

// ---- the same mix with FA2's data dependencies: ex2 reads the MMAs' results, the next MMAs read ex2's --
// S = Q K^T feeds the softmax, P feeds P V: a warp cannot start the next MMAs before its exps are done.
__global__ void dependent_mix_kernel(int iters, float* sink) {
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
  float c[kChains][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < kChains; ++k)
#pragma unroll
      for (int m = 0; m < kMmaPerEx2; ++m) mma_bf16(c[(kMmaPerEx2 * k + m) % kChains], a, b);
    float p[kChains];
#pragma unroll
    for (int k = 0; k < kChains; ++k) p[k] = ex2(-1e-3f * c[k][0]);  // the softmax of this step's S
#pragma unroll
    for (int i = 0; i < 4; ++i)  // P becomes the next MMAs' operand (kept small, finite bf16 values)
      a[i] = ((__float_as_uint(p[2 * i]) ^ __float_as_uint(p[2 * i + 1])) & 0x007f007fu) | 0x3c003c00u;
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < kChains; ++k) s += c[k][0];
  if (s == 1.2345f) sink[threadIdx.x] = s;
}

// ---- shared memory read port: ldmatrix.x4 (512 bytes per warp instruction) -----------------------------
__global__ void ldmatrix_kernel(int iters, float* sink) {
  __shared__ __align__(128) uint32_t tile[8][1024];  // 32 KiB: each warp its own 4 KiB row block
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < 8 * 1024; i += blockDim.x) (&tile[0][0])[i] = i;
  __syncthreads();
  // Lane l supplies the address of row l (16 bytes); 32 rows 128 bytes apart would conflict, so rows are
  // laid 16 bytes apart: the 8 rows of each 8x8 matrix cover all 32 banks once.
  // Each chain's next address depends on the data it just loaded (bit 8 of the first word, which the
  // compiler cannot know), so no load can be hoisted out of the loop or merged with another: the first
  // run of this test (microbench-h200-2026-11-22.json, 466 B/clk/SM) used addresses that repeat every
  // two iterations, and ptxas kept the loads out of the loop.
  uint32_t u[4] = {}, off[kChains] = {};
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(&tile[warp % 8][0]));
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < kChains; ++k) {
      const uint32_t addr = base + ((lane * 16 + k * 512 + off[k]) & 4095);
      uint32_t r0, r1, r2, r3;
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                   : "r"(addr));
      off[k] = (r0 ^ it) & 0x100;
      u[0] ^= r0;
      u[1] ^= r1;
      u[2] ^= r2;
      u[3] ^= r3;
    }
  }
  if ((u[0] ^ u[1] ^ u[2] ^ u[3]) == 0x12345678u) sink[threadIdx.x] = 1;
}

// ---- latencies: one warp, one dependent chain, clock64() around it ------------------------------------
constexpr int kLatencyHops = 4096;
__global__ void mma_latency_kernel(float* sink, long long* clocks) {
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
  float c[4] = {};
  const long long t0 = clock64();
  for (int it = 0; it < kLatencyHops; ++it) mma_bf16(c, a, b);  // each reads the accumulator the last wrote
  const long long t1 = clock64();
  if (c[0] + c[1] + c[2] + c[3] == 1.2345f) sink[threadIdx.x] = c[0];
  if (threadIdx.x == 0) *clocks = t1 - t0;
}
__global__ void ex2_latency_kernel(float* sink, long long* clocks) {
  float x = -0.001f * threadIdx.x;
  const long long t0 = clock64();
  for (int it = 0; it < kLatencyHops; ++it) x = ex2(-x);
  const long long t1 = clock64();
  if (x == 1.2345f) sink[threadIdx.x] = x;
  if (threadIdx.x == 0) *clocks = t1 - t0;
}
__global__ void ldmatrix_latency_kernel(float* sink, long long* clocks) {
  __shared__ __align__(128) uint32_t tile[1024];
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) tile[i] = 0;  // data 0: the next address is the same
  __syncwarp();
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(&tile[0])) + (threadIdx.x % 32) * 16;
  uint32_t off = 0, u = 0;
  const long long t0 = clock64();
  for (int it = 0; it < kLatencyHops; ++it) {
    uint32_t r0, r1, r2, r3;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(base + off));
    off = r0 & 0x100;  // 0 at run time; the compiler cannot know, so each load waits for the last
    u ^= r1 ^ r2 ^ r3;
  }
  const long long t1 = clock64();
  if (u == 0x12345678u) sink[threadIdx.x] = 1;
  if (threadIdx.x == 0) *clocks = t1 - t0;
}

// The softmax's row reductions: a dependent chain of FP32 adds or maxima (a thread's elements of one row,
// reduced in order, as flash-attn's thread_reduce_ loops), then the butterfly shuffles across the row's quad.
__global__ void fadd_latency_kernel(float* sink, long long* clocks) {
  float x = 0.001f * threadIdx.x, y = 1e-7f * (threadIdx.x + 1);
  const long long t0 = clock64();
  for (int it = 0; it < kLatencyHops; ++it) asm volatile("add.f32 %0, %0, %1;" : "+f"(x) : "f"(y));
  const long long t1 = clock64();
  if (x == 1.2345f) sink[threadIdx.x] = x;
  if (threadIdx.x == 0) *clocks = t1 - t0;
}
__global__ void fmax_latency_kernel(float* sink, long long* clocks) {
  float x = 0.001f * threadIdx.x, y = -1e-7f * (threadIdx.x + 1);
  const long long t0 = clock64();
  for (int it = 0; it < kLatencyHops; ++it) {
    asm volatile("max.f32 %0, %0, %1;" : "+f"(x) : "f"(y));
    y = -y;  // a new operand each step (an FP32 op beside the chain, as the row's next element)
  }
  const long long t1 = clock64();
  if (x == 1.2345f) sink[threadIdx.x] = x;
  if (threadIdx.x == 0) *clocks = t1 - t0;
}
__global__ void shfl_latency_kernel(float* sink, long long* clocks) {
  float x = 0.001f * threadIdx.x;
  const long long t0 = clock64();
  for (int it = 0; it < kLatencyHops; ++it) x = __shfl_xor_sync(0xffffffffu, x, 1 + (it & 1));
  const long long t1 = clock64();
  if (x == 1.2345f) sink[threadIdx.x] = x;
  if (threadIdx.x == 0) *clocks = t1 - t0;
}

// ---- FA2's S = Q K^T at d = 128: ldmatrix of k-step k+1 beside the mma.sync of k-step k -------------------
// Per warp and k-step: 2 ldmatrix.x4 of Q (32 rows x 16) and 4 of K (64 keys x 16), 2 x 8 mma.sync. mode 0:
// both; 1: the MMAs alone (fragments loaded once); 2: the loads alone (each still feeds a register the
// MMAs would read, XORed into a sink).
constexpr int kGemmKSteps = 8, kGemmLdsm = 6, kGemmMma = 16;
__global__ void mma_ldmatrix_kernel(int iters, int mode, float* sink) {
  __shared__ __align__(128) uint16_t sQK[4][2 * kGemmLdsm * 256];  // per warp: two k-steps of fragments, 6 KiB
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < 4 * 2 * kGemmLdsm * 256; i += blockDim.x) (&sQK[0][0])[i] = uint16_t(0x3c00 ^ (i & 7));
  __syncthreads();
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(&sQK[warp][0])) + lane * 16;
  uint32_t frag[2][kGemmLdsm][4];
  for (int l = 0; l < kGemmLdsm; ++l)
    for (int r = 0; r < 4; ++r) frag[0][l][r] = frag[1][l][r] = 0x3c003c00u ^ (lane * (l + r + 1));
  float c[kGemmMma][4] = {};
  uint32_t x = 0;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < kGemmKSteps; ++k) {
      const int cur = k & 1, nxt = cur ^ 1;
      if (mode != 1) {
#pragma unroll
        for (int l = 0; l < kGemmLdsm; ++l) {
          const uint32_t addr = base + uint32_t((nxt * kGemmLdsm + l) * 512);  // 32 rows of 16 B: no conflicts
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                       : "=r"(frag[nxt][l][0]), "=r"(frag[nxt][l][1]), "=r"(frag[nxt][l][2]), "=r"(frag[nxt][l][3])
                       : "r"(addr));
        }
      }
      if (mode != 2) {
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int n = 0; n < 8; ++n) {
            const uint32_t(&a)[4] = frag[cur][m];                                     // Q: 16 rows x 16
            const uint32_t b[2] = {frag[cur][2 + n / 2][2 * (n % 2)], frag[cur][2 + n / 2][2 * (n % 2) + 1]};  // K
            mma_bf16(c[m * 8 + n], a, b);
          }
      } else {
#pragma unroll
        for (int l = 0; l < kGemmLdsm; ++l) x ^= frag[cur][l][0] ^ frag[cur][l][3];
      }
    }
  }
  float s = float(x & 1);
#pragma unroll
  for (int i = 0; i < kGemmMma; ++i) s += c[i][0];
  if (s == 1.2345f) sink[threadIdx.x] = s;
}

// ---- memory: read with L1 bypassed (ld.global.cg), copy -----------------------------------------------
__global__ void read_kernel(const int4* __restrict__ p, size_t n, int reps, float* sink) {
  int acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int r = 0; r < reps; ++r)
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
      const int4 v = __ldcg(p + i);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  if (acc == 0x12345678) sink[threadIdx.x] = 1;
}

// The L2's capacity for data read again and again: `reps` passes over a buffer of n int4, each pass
// split over the CTAs. shift = 0: a line is read by the same CTA (SM) every pass; shift = half the grid:
// by a CTA half the grid away the next pass, so lines are read from SMs on both sides of the chip, as
// FA2's K/V blocks are. Timed over buffers of growing size, the bandwidth falls from L2's to DRAM's
// where the buffer outgrows what the L2 keeps for that pattern.
__global__ void cyclic_read_kernel(const int4* __restrict__ p, size_t n, int reps, int shift, float* sink) {
  int acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int r = 0; r < reps; ++r) {
    const size_t cta = (blockIdx.x + size_t(r) * shift) % gridDim.x;
    for (size_t i = cta * blockDim.x + threadIdx.x; i < n; i += stride) {
      const int4 v = __ldcg(p + i);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  }
  if (acc == 0x12345678) sink[threadIdx.x] = 1;
}

__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = __ldcs(src + i);
}

__global__ void empty_kernel() {}

// ---- DRAM latency: one thread chases a random cycle of pointers, one per 128-byte line -------------------
constexpr int kLineWords = 32;  // 128 bytes of uint32
__global__ void scatter_chain(const uint32_t* __restrict__ perm, uint32_t* __restrict__ buf, uint32_t lines) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += gridDim.x * blockDim.x)
    buf[size_t(perm[i]) * kLineWords] = perm[(i + 1) % lines];  // line perm[i] points to line perm[i + 1]
}
// Each run continues where the last one stopped (pos), so no run re-walks lines an earlier run left in L2.
__global__ void chase_kernel(const uint32_t* __restrict__ buf, int hops, uint32_t* pos) {
  uint32_t p = *pos;
  for (int h = 0; h < hops; ++h) p = __ldcg(buf + size_t(p) * kLineWords);  // each load waits for the last
  *pos = p;
}

// ---- a barrier round trip: what a CTA's warps pay to exchange values through shared memory ---------------
// FA1's warps split each K/V block, so every 16-row step exchanges row maxima, row sums and partial O
// through shared memory: write, __syncthreads, read. One CTA of 4 warps per SM (FA1's forward) repeats
// that exchange, each round depending on the value read in the last.
__global__ void barrier_kernel(int rounds, float* sink) {
  __shared__ float cell[128];
  float v = threadIdx.x;
  for (int r = 0; r < rounds; ++r) {
    cell[threadIdx.x] = v;
    __syncthreads();
    v = cell[(threadIdx.x + 32) % blockDim.x] + 1.0f;  // another warp's value
    __syncthreads();
  }
  if (v == -1.0f) sink[0] = v;
}

// ---- fp32 atomics into L2: FA2's backward adds dS K into dQ's fp32 accumulator with atomicAdd ------------
// Every thread of every SM adds to its own word of a buffer L2 holds (a warp covers 128 contiguous bytes,
// as FA2's dQ tile rows do); the result is never read back, so the adds compile to RED.E.ADD.F32.
__global__ void red_kernel(float* __restrict__ acc, size_t words, int iters) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int it = 0; it < iters; ++it)
    for (size_t w = blockIdx.x * size_t(blockDim.x) + threadIdx.x; w < words; w += stride) atomicAdd(acc + w, 1.0f);
}

int main() {
  int dev = 0, sms = 0, clock_khz = 0, major = 0, minor = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const double clock_hz = clock_khz * 1e3;
  const double per_sm_clk = 1.0 / (sms * clock_hz);  // converts a rate to "per SM per clock"
  float* sink = nullptr;
  CHECK(cudaMalloc(&sink, 1024 * sizeof(float)));
  std::fprintf(stderr, "microbench: %s, %d SMs, %.0f MHz max clock\n", prop.name, sms, clock_hz / 1e6);

  // Compute tests: a grid of 4 CTAs of 512 threads per SM; registers (ptxas -v: 22-56 a thread) let 2
  // (mma, mix) to 4 (ex2, ffma) reside at once: 8-16 warps per scheduler -- many warps.
  const int threads = 512, blocks = 4 * sms;
  const double warps = double(blocks) * threads / 32, lanes = double(blocks) * threads;

  const int mma_iters = 4096;
  const double t_mma = time_best([&] { mma_kernel<<<blocks, threads>>>(mma_iters, sink); });
  const double mma_flops = warps * mma_iters * kChains * 4096.0 / t_mma;
  std::fprintf(stderr, "  mma.sync: %.1f TFLOP/s\n", mma_flops / 1e12);

  const int ex2_iters = 4096;
  const double t_ex2 = time_best([&] { ex2_kernel<<<blocks, threads>>>(ex2_iters, sink); });
  const double ex2_rate = lanes * ex2_iters * kChains / t_ex2;
  std::fprintf(stderr, "  ex2: %.2f T/s\n", ex2_rate / 1e12);

  const int ffma_iters = 16384;
  const double t_ffma = time_best([&] { ffma_kernel<<<blocks, threads>>>(ffma_iters, sink); });
  const double ffma_flops = lanes * ffma_iters * kChains * 2.0 / t_ffma;
  std::fprintf(stderr, "  ffma: %.1f TFLOP/s\n", ffma_flops / 1e12);

  const int mix_iters = 1024;
  const double t_mix = time_best([&] { mix_kernel<<<blocks, threads>>>(mix_iters, sink); });
  const double mix_mma = warps * mix_iters * kChains * kMmaPerEx2, mix_ex2 = lanes * mix_iters * kChains;
  // Time the same work would take if MMA and MUFU overlapped perfectly (max) or not at all (sum).
  const double mix_alone_mma = mix_mma * 4096.0 / mma_flops, mix_alone_ex2 = mix_ex2 / ex2_rate;
  std::fprintf(stderr, "  mma+ex2 mix: %.1f us (sum %.1f, max %.1f)\n", t_mix * 1e6,
               (mix_alone_mma + mix_alone_ex2) * 1e6, std::max(mix_alone_mma, mix_alone_ex2) * 1e6);

  // FA2's occupancy: 2 CTAs of 4 warps per SM, 2 warps per scheduler. Alone, mixed, and mixed with
  // FA2's dependencies (exp after the MMAs, the next MMAs after the exps).
  const int fa2_blocks = 2 * sms, fa2_threads = 128;
  const double fa2_warps = double(fa2_blocks) * fa2_threads / 32, fa2_lanes = double(fa2_blocks) * fa2_threads;
  const double t2_mma = time_best([&] { mma_kernel<<<fa2_blocks, fa2_threads>>>(mix_iters * kMmaPerEx2, sink); });
  const double t2_ex2 = time_best([&] { ex2_kernel<<<fa2_blocks, fa2_threads>>>(mix_iters, sink); });
  const double t2_mix = time_best([&] { mix_kernel<<<fa2_blocks, fa2_threads>>>(mix_iters, sink); });
  const double t2_dep = time_best([&] { dependent_mix_kernel<<<fa2_blocks, fa2_threads>>>(mix_iters, sink); });
  const double mma2_flops = fa2_warps * mix_iters * kMmaPerEx2 * kChains * 4096.0 / t2_mma;
  const double ex22_rate = fa2_lanes * mix_iters * kChains / t2_ex2;
  std::fprintf(stderr, "  2 warps/scheduler: mma %.1f us (%.1f TFLOP/s), ex2 %.1f us, mix %.1f us, dependent %.1f us\n",
               t2_mma * 1e6, mma2_flops / 1e12, t2_ex2 * 1e6, t2_mix * 1e6, t2_dep * 1e6);

  const int ldm_iters = 8192, ldm_threads = 256, ldm_blocks = 8 * sms;  // as many as registers allow
  const double t_ldm = time_best([&] { ldmatrix_kernel<<<ldm_blocks, ldm_threads>>>(ldm_iters, sink); });
  const double ldm_bytes = double(ldm_blocks) * ldm_threads / 32 * ldm_iters * kChains * 512.0 / t_ldm;
  std::fprintf(stderr, "  ldmatrix: %.1f TB/s\n", ldm_bytes / 1e12);

  // Latencies: one warp on one SM, clocks per dependent step (the loop's own overhead included, a few clocks).
  long long* d_clocks = nullptr;
  CHECK(cudaMalloc(&d_clocks, sizeof(long long)));
  auto latency = [&](auto kernel) {
    long long best = -1;
    for (int r = 0; r < 6; ++r) {  // the first is a warm-up
      kernel<<<1, 32>>>(sink, d_clocks);
      CHECK(cudaGetLastError());
      long long clk = 0;
      CHECK(cudaMemcpy(&clk, d_clocks, sizeof(clk), cudaMemcpyDeviceToHost));
      if (r > 0 && (best < 0 || clk < best)) best = clk;
    }
    return double(best) / kLatencyHops;
  };
  const double lat_mma = latency(mma_latency_kernel), lat_ex2 = latency(ex2_latency_kernel),
               lat_ldsm = latency(ldmatrix_latency_kernel);
  const double lat_fadd = latency(fadd_latency_kernel), lat_fmax = latency(fmax_latency_kernel),
               lat_shfl = latency(shfl_latency_kernel);
  CHECK(cudaFree(d_clocks));
  std::fprintf(stderr, "  latency (clocks): mma.sync %.1f, ex2 %.1f, ldmatrix.x4 %.1f, add.f32 %.1f, max.f32 %.1f, shfl.bfly %.1f\n",
               lat_mma, lat_ex2, lat_ldsm, lat_fadd, lat_fmax, lat_shfl);

  // FA2's S = Q K^T in miniature at FA2's occupancy: both, MMAs alone, ldmatrix alone.
  const int gemm_iters = 512;
  double t_gemm[3];
  for (int mode = 0; mode < 3; ++mode)
    t_gemm[mode] = time_best([&] { mma_ldmatrix_kernel<<<fa2_blocks, fa2_threads>>>(gemm_iters, mode, sink); });
  std::fprintf(stderr, "  mma + ldmatrix (FA2's S = Q K^T, d = 128): both %.1f us, mma alone %.1f, ldmatrix alone %.1f\n",
               t_gemm[0] * 1e6, t_gemm[1] * 1e6, t_gemm[2] * 1e6);

  // L2: 20 MiB, well under the 50-60 MB L2, read 100 times; one warm-up pass puts it in L2.
  const size_t l2_bytes = size_t(20) << 20;
  const int l2_reps = 100;
  int4* l2_buf = nullptr;
  CHECK(cudaMalloc(&l2_buf, l2_bytes));
  CHECK(cudaMemset(l2_buf, 1, l2_bytes));
  const double t_l2 = time_best([&] { read_kernel<<<2 * sms, 1024>>>(l2_buf, l2_bytes / 16, l2_reps, sink); });
  const double l2_bw = double(l2_bytes) * l2_reps / t_l2;
  CHECK(cudaFree(l2_buf));
  std::fprintf(stderr, "  L2 read: %.2f TB/s\n", l2_bw / 1e12);

  // L2 keep curve: effective read bandwidth of 20 cyclic passes over buffers of 4..96 MiB, with a line
  // read by the same SM every pass (shift 0) and by other SMs: the next CTA (shift 1, another SM in the
  // first wave's order) or a CTA a quarter of the grid away (shift 66 of 264: another SM, likely in
  // another GPC). A CTA half the grid away (132) would be the same SM's second CTA.
  constexpr int kShifts[] = {0, 1, 66};
  std::vector<std::array<double, 4>> keep;  // MiB, bytes/s for each shift
  {
    const size_t most = size_t(96) << 20;
    int4* buf = nullptr;
    CHECK(cudaMalloc(&buf, most));
    CHECK(cudaMemset(buf, 1, most));
    const int grid = 2 * sms, passes = 20;
    for (int mib : {4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 56, 64, 80, 96}) {
      const size_t bytes = size_t(mib) << 20;
      std::array<double, 4> row{double(mib), 0, 0, 0};
      for (int k = 0; k < 3; ++k) {
        const int shift = kShifts[k] * grid / 264;
        const double t = time_best([&] { cyclic_read_kernel<<<grid, 1024>>>(buf, bytes / 16, passes, shift, sink); });
        row[1 + k] = double(bytes) * passes / t;
      }
      std::fprintf(stderr, "  cyclic %3d MiB: %.2f TB/s same SM, %.2f next CTA, %.2f a quarter away\n", mib,
                   row[1] / 1e12, row[2] / 1e12, row[3] / 1e12);
      keep.push_back(row);
    }
    CHECK(cudaFree(buf));
  }

  // HBM: 4 GiB read once (70x the L2), and a 2 GiB -> 2 GiB copy.
  const size_t big = size_t(4) << 30;
  int4* hbm = nullptr;
  CHECK(cudaMalloc(&hbm, big));
  CHECK(cudaMemset(hbm, 1, big));
  const double t_read = time_best([&] { read_kernel<<<2 * sms, 1024>>>(hbm, big / 16, 1, sink); });
  const double hbm_read = double(big) / t_read;
  const size_t half = big / 2;
  const double t_copy = time_best([&] {
    copy_kernel<<<2 * sms, 1024>>>(hbm, hbm + half / 16, half / 16);
  });
  const double hbm_copy = 2.0 * half / t_copy;
  CHECK(cudaFree(hbm));
  std::fprintf(stderr, "  HBM read: %.2f TB/s, copy: %.2f TB/s\n", hbm_read / 1e12, hbm_copy / 1e12);

  // DRAM latency: a random cycle through 2M lines of a 256 MiB buffer (4x the L2), 2^19 dependent loads a
  // run (64 MiB of lines, more than the L2), each run going on from where the last stopped. (The third
  // H200 run restarted every run at line 0 with 20000 hops: it timed 2.5 MB of lines already in L2,
  // 146 ns, an L2 latency.)
  const uint32_t lines = 1u << 21;
  const int hops = 1 << 19;
  std::vector<uint32_t> perm(lines);
  for (uint32_t i = 0; i < lines; ++i) perm[i] = i;
  uint64_t rng = 0x9E3779B97F4A7C15ull;  // fixed seed, Fisher-Yates
  for (uint32_t i = lines - 1; i > 0; --i) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(perm[i], perm[(rng >> 33) % (i + 1)]);
  }
  uint32_t *d_perm = nullptr, *chain = nullptr;
  CHECK(cudaMalloc(&d_perm, lines * sizeof(uint32_t)));
  CHECK(cudaMalloc(&chain, size_t(lines) * kLineWords * sizeof(uint32_t)));
  CHECK(cudaMemcpy(d_perm, perm.data(), lines * sizeof(uint32_t), cudaMemcpyHostToDevice));
  // L2 hit latency first: a chain over 16384 lines (2 MiB, far inside L2), walked once to warm it.
  const uint32_t l2_lines = 1u << 14;
  std::vector<uint32_t> small(l2_lines);
  for (uint32_t i = 0; i < l2_lines; ++i) small[i] = i;
  for (uint32_t i = l2_lines - 1; i > 0; --i) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(small[i], small[(rng >> 33) % (i + 1)]);
  }
  CHECK(cudaMemcpy(d_perm, small.data(), l2_lines * sizeof(uint32_t), cudaMemcpyHostToDevice));
  scatter_chain<<<2 * sms, 1024>>>(d_perm, chain, l2_lines);
  CHECK(cudaGetLastError());
  CHECK(cudaMemset(sink, 0, sizeof(uint32_t)));
  const int l2_hops = 1 << 16;
  const double l2_latency =
      time_best([&] { chase_kernel<<<1, 1>>>(chain, l2_hops, reinterpret_cast<uint32_t*>(sink)); }) / l2_hops;
  std::fprintf(stderr, "  L2 hit latency: %.0f ns\n", l2_latency * 1e9);
  CHECK(cudaMemcpy(d_perm, perm.data(), lines * sizeof(uint32_t), cudaMemcpyHostToDevice));
  scatter_chain<<<2 * sms, 1024>>>(d_perm, chain, lines);
  CHECK(cudaGetLastError());
  CHECK(cudaMemset(sink, 0, sizeof(uint32_t)));  // the chase's position, carried from run to run
  const double t_chase = time_best([&] { chase_kernel<<<1, 1>>>(chain, hops, reinterpret_cast<uint32_t*>(sink)); });
  const double dram_latency = t_chase / hops;
  CHECK(cudaFree(d_perm));
  CHECK(cudaFree(chain));
  std::fprintf(stderr, "  DRAM latency: %.0f ns\n", dram_latency * 1e9);

  // Barrier round trip: one CTA of 4 warps per SM, 100000 dependent exchanges.
  const int rounds = 100000;
  const double barrier_round = time_best([&] { barrier_kernel<<<sms, 128>>>(rounds, sink); }) / rounds;
  std::fprintf(stderr, "  barrier round trip (4 warps): %.1f ns = %.0f clocks\n", barrier_round * 1e9,
               barrier_round * clock_hz);

  // fp32 atomic adds into a 4 MiB buffer (resident in L2), all SMs, 20 passes.
  const size_t red_words = size_t(1) << 20;
  const int red_iters = 20;
  float* red_buf = nullptr;
  CHECK(cudaMalloc(&red_buf, red_words * sizeof(float)));
  CHECK(cudaMemset(red_buf, 0, red_words * sizeof(float)));
  const double t_red = time_best([&] { red_kernel<<<4 * sms, 256>>>(red_buf, red_words, red_iters); });
  const double red_rate = double(red_words) * red_iters / t_red;
  CHECK(cudaFree(red_buf));
  std::fprintf(stderr, "  fp32 atomicAdd into L2: %.1f G/s = %.1f per clock\n", red_rate / 1e9, red_rate / clock_hz);

  // Launch overhead: back-to-back empty kernels, launch to launch.
  const int launches = 2000;
  const double t_launch = time_best([&] {
    for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32>>>();
  }) / launches;
  std::fprintf(stderr, "  launch: %.2f us\n", t_launch * 1e6);

  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("{\n");
  std::printf("  \"device\": \"%s\",\n  \"compute_capability\": \"%d.%d\",\n  \"sm_count\": %d,\n", prop.name, major,
              minor, sms);
  std::printf("  \"max_sm_clock_hz\": %.0f,\n  \"cuda_driver\": %d,\n  \"cuda_runtime\": %d,\n", clock_hz, driver,
              runtime);
  std::printf("  \"mma_sync_bf16_flops_per_s\": %.6e,\n", mma_flops);
  std::printf("  \"mma_sync_bf16_flops_per_sm_per_clk\": %.1f,\n", mma_flops * per_sm_clk);
  std::printf("  \"ex2_per_s\": %.6e,\n  \"ex2_per_sm_per_clk\": %.2f,\n", ex2_rate, ex2_rate * per_sm_clk);
  std::printf("  \"ffma_flops_per_s\": %.6e,\n  \"ffma_flops_per_sm_per_clk\": %.1f,\n", ffma_flops,
              ffma_flops * per_sm_clk);
  std::printf("  \"mma_ex2_mix\": {\"mma_per_ex2_per_thread\": %d, \"time_s\": %.6e, \"sum_of_alone_s\": %.6e, "
              "\"max_of_alone_s\": %.6e},\n",
              kMmaPerEx2, t_mix, mix_alone_mma + mix_alone_ex2, std::max(mix_alone_mma, mix_alone_ex2));
  std::printf("  \"fa2_occupancy_2_warps_per_scheduler\": {\"mma_alone_s\": %.6e, \"mma_sync_bf16_flops_per_s\": %.6e, "
              "\"ex2_alone_s\": %.6e, \"ex2_per_s\": %.6e, \"mix_s\": %.6e, \"dependent_mix_s\": %.6e},\n",
              t2_mma, mma2_flops, t2_ex2, ex22_rate, t2_mix, t2_dep);
  std::printf("  \"ldmatrix_bytes_per_s\": %.6e,\n  \"ldmatrix_bytes_per_sm_per_clk\": %.1f,\n", ldm_bytes,
              ldm_bytes * per_sm_clk);
  std::printf("  \"latency_clocks\": {\"mma_sync_m16n8k16_bf16\": %.1f, \"ex2_approx_f32\": %.1f, \"ldmatrix_x4\": %.1f, "
              "\"add_f32\": %.1f, \"max_f32\": %.1f, \"shfl_bfly\": %.1f, "
              "\"method\": \"one warp, %d dependent steps, clock64(), best of 5\"},\n",
              lat_mma, lat_ex2, lat_ldsm, lat_fadd, lat_fmax, lat_shfl, kLatencyHops);
  std::printf("  \"fa2_qk_gemm_mma_ldmatrix\": {\"both_s\": %.6e, \"mma_alone_s\": %.6e, \"ldmatrix_alone_s\": %.6e, "
              "\"method\": \"2 CTAs of 4 warps per SM, %d passes of 8 k-steps: 6 ldmatrix.x4 of step k+1 and 16 mma.sync of step k a warp\"},\n",
              t_gemm[0], t_gemm[1], t_gemm[2], gemm_iters);
  std::printf("  \"l2_read_bytes_per_s\": %.6e,\n  \"l2_buffer_bytes\": %zu,\n", l2_bw, l2_bytes);
  std::printf("  \"hbm_read_bytes_per_s\": %.6e,\n  \"hbm_copy_bytes_per_s\": %.6e,\n  \"hbm_buffer_bytes\": %zu,\n",
              hbm_read, hbm_copy, big);
  std::printf("  \"dram_latency_s\": %.6e,\n  \"dram_latency_chain\": \"one thread, %d dependent ld.global.cg over a random cycle of %u 128-byte lines (256 MiB)\",\n",
              dram_latency, hops, lines);
  std::printf("  \"launch_overhead_s\": %.6e,\n  \"launches\": %d,\n", t_launch, launches);
  std::printf("  \"l2_hit_latency_s\": %.6e,\n  \"l2_hit_latency_chain\": \"one thread, %d dependent ld.global.cg over a random cycle of %u 128-byte lines (2 MiB), after a warm-up walk\",\n",
              l2_latency, l2_hops, l2_lines);
  std::printf("  \"l2_keep_curve\": {\"method\": \"20 passes of ld.global.cg over a buffer by %d CTAs of 1024 threads; a line is read the next pass by the CTA `shift` further on: 0 the same CTA (SM), 1 the next, 66 a quarter of the grid away\", \"rows\": [", 2 * sms);
  for (size_t n = 0; n < keep.size(); ++n)
    std::printf("%s{\"mib\": %.0f, \"shift0_bytes_per_s\": %.4e, \"shift1_bytes_per_s\": %.4e, \"shift66_bytes_per_s\": %.4e}",
                n ? ", " : "", keep[n][0], keep[n][1], keep[n][2], keep[n][3]);
  std::printf("]},\n");
  std::printf("  \"l2_fp32_atomics_per_s\": %.6e,\n  \"l2_fp32_atomics_method\": \"atomicAdd(float) by %d CTAs of 256 threads over %zu contiguous words (4 MiB, L2-resident), %d passes; the result unused (RED)\",\n",
              red_rate, 4 * sms, red_words, red_iters);
  std::printf("  \"barrier_round_trip_s\": %.6e,\n  \"barrier_round_trip_clocks\": %.1f,\n  \"barrier_round_trip_method\": \"one CTA of 128 threads per SM: st.shared, __syncthreads, ld.shared of another warp's value, __syncthreads, %d dependent rounds\",\n",
              barrier_round, barrier_round * clock_hz, rounds);
  std::printf("  \"method\": \"best of 5 timed runs after a warm-up, CUDA events, clocks not locked; "
              "per-SM-per-clock figures use max_sm_clock_hz\"\n");
  std::printf("}\n");
  CHECK(cudaFree(sink));
  return 0;
}
