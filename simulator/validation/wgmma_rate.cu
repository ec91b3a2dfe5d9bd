// wgmma_rate.cu: the rate an SM's tensor cores run fa3's wgmma shapes at, a multiply-add per cycle, as JSON:
// does a 64 x N x 16 step cost N / 8 units of the same time at every N, or do some widths pay more?
//
// Build and run (one line, on the GPU machine, from the repository root):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -I. -o /tmp/wr simulator/validation/wgmma_rate.cu && /tmp/wr > out.json
//
// Why: at d = 256 fa3's forward computes S = Q K^T in wgmmas 80 wide (its 80-key blocks: gpu/shapes.hpp
// fa3_forward_shape) and O += P V 256 wide over 80 keys (five k-steps). Under ncu (H100, 2026-12-07, d = 256
// s = 16k causal: bench/results/ncu-h100-2026-12-07-fa3-v23-fwd-vs-cudnn-d256-s16384-causal.csv) its tensor pipe
// was active 94.7% of 2.56 M cycles where cuDNN's was 82.2% of 2.87 M: 3% more tensor-active cycles for
// the same multiply-adds, and at the power cap more active time is a lower clock. If a 64 x 80 step cost
// as much as a 64 x 96 one (the N dimension served in units wider than 16), S would take 20% more than its
// share. This times each shape alone, the tensor cores kept busy:
//   ss     S's GEMM: acc[64 x N] += A[64 x 256] B[N x 256]^T, both K-major in shared memory in fa3's 128-byte
//          swizzled blocks (gpu/fa3/head_dim_gemm.cuh mma_over_head_dim: 16 k-steps a group), N = 64, 80,
//          128, 256
//   rs     P V's GEMM: acc[64 x 256] += A[64 x 16 k] (registers) B[16 k x 256] (shared memory, N-major:
//          gpu/fa3/wgmma_ops.cuh mma_rs_bt), k = 4 or 5 k-steps a group (a key block of 64 or 80; 128 keys,
//          eight A fragments beside the 128 accumulators, leave ptxas too few registers to keep wgmmas in
//          flight, as they would fa3 at d = 256)
// One CTA an SM of one or two warpgroups (fa3's consumers: two at d = 256), each issuing its groups back
// to back with one group queued behind the one running (wgmma.wait_group 1): the operands' values do not
// matter (zeros), their layout and widths do. A warpgroup's leader reads %clock64 around its loop; a row's
// rate is the multiply-adds of all its warpgroups over the slowest's cycles, per SM (H100 SXM's dense bf16
// peak, 989.4 TFLOP/s at its 1830 MHz boost clock over 132 SMs, is 2048 multiply-adds an SM a cycle); its
// TFLOP/s is the grid's, timed with events (best of 5 after a warm-up; clocks not locked, so beside it the
// clock the cycles and the time imply).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

constexpr const char* kProgram = "wgmma_rate";  // CHECK's messages (timing.cuh)
#include "timing.cuh"
#include "gpu/fa3/head_dim_gemm.cuh"

using namespace flashlab::gpu::fa3;
using T = __nv_bfloat16;

constexpr int kD = 256;                  // the head dim: S's reduction, P V's width
constexpr int kABytes = 64 * kD * 2;     // a warpgroup's A (64 rows x 256) in four 128-byte-swizzled blocks
constexpr int kBBlockRows = 256;         // B's rows a block has room for (the widest N)

// Shared memory: each warpgroup's A, then B (N rows x 256, four blocks of kBBlockRows x 128 bytes).
__host__ __device__ constexpr int smem_bytes(int warpgroups) {
  return warpgroups * kABytes + 4 * kBBlockRows * 128 + 1024;
}

// The CTA's operands in shared memory, 1024-byte aligned (the 128-byte swizzle's atom), zeroed and made
// visible to the wgmmas (the async proxy).
template <int kWarpgroups>
__device__ unsigned char* zeroed_operands(unsigned char* raw) {
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  for (int i = threadIdx.x; i < smem_bytes(kWarpgroups) / 16 - 64; i += blockDim.x)
    reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
  fence_async_shared();
  __syncthreads();
  return smem;
}

// A warpgroup's cycles (its leader's), and its accumulators kept alive: a sum stored only if not zero
// (never: the operands are zeros).
template <int kWarpgroups, int kCols>
__device__ void report(long long spent, float (&acc)[kCols][4], long long* cycles, float* sink) {
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * kWarpgroups + threadIdx.x / 128] = spent;
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kCols; ++j) s += acc[j][0] + acc[j][3];
  if (s != 0.f) sink[0] = s;
}

// S's group: acc[64 x N] += A B^T over the head dim, this warpgroup's A and the shared B, both K-major.
template <int N>
struct SsGroup {
  static constexpr int kCols = N / 8;
  uint32_t a, b;
  __device__ SsGroup(unsigned char* smem, int warpgroups)
      : a(smem_u32(smem + (threadIdx.x / 128) * kABytes)), b(smem_u32(smem + warpgroups * kABytes)) {}
  __device__ void issue(float (&acc)[kCols][4]) const {
    mma_over_head_dim<N, kD, T>(acc, a, 64 * 128, b, kBBlockRows * 128);
  }
};

// P V's group: acc[64 x 256] += P (registers, kKSteps fragments of 16 keys) V, V N-major: k-step kk reads 16
// rows (keys) of 256 columns in four 64-column swizzled blocks.
template <int kKSteps>
struct RsGroup {
  static constexpr int kCols = kD / 8;
  uint64_t b0;
  uint32_t pa[kKSteps][4];
  __device__ RsGroup(unsigned char* smem, int warpgroups)
      : b0(sw128_desc(smem_u32(smem + warpgroups * kABytes), kBBlockRows * 128, 1024)) {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) pa[kk][0] = pa[kk][1] = pa[kk][2] = pa[kk][3] = uint32_t(threadIdx.x >> 30);
  }
  __device__ void issue(float (&acc)[kCols][4]) const {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) mma_rs_bt<kD, T>(acc, pa[kk], desc_plus(b0, kk * 16 * 128), 1);
  }
};

// Each warpgroup issues `groups` groups back to back, one queued behind the one running.
template <class Group, int kWarpgroups>
__global__ void __launch_bounds__(128 * kWarpgroups, 1) rate_kernel(int groups, long long* cycles, float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  const Group group(zeroed_operands<kWarpgroups>(raw), kWarpgroups);
  float acc[Group::kCols][4] = {};
  const long long t0 = clock64();
  for (int g = 0; g < groups; ++g) {
    wgmma_fence();
    group.issue(acc);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  fence_regs(acc);
  report<kWarpgroups>(clock64() - t0, acc, cycles, sink);
#endif
}

struct Row {
  const char* mode;
  int n, k_steps, warpgroups;
  void (*kernel)(int, long long*, float*);
};

int main() {
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  const int sms = prop.multiProcessorCount;
  if (prop.major != 9) {
    std::fprintf(stderr, "wgmma_rate: %s is sm_%d%d; wgmma needs sm_90\n", prop.name, prop.major, prop.minor);
    return 2;
  }
  const std::vector<Row> rows = {
      {"ss", 64, 16, 1, rate_kernel<SsGroup<64>, 1>},   {"ss", 80, 16, 1, rate_kernel<SsGroup<80>, 1>},
      {"ss", 128, 16, 1, rate_kernel<SsGroup<128>, 1>}, {"ss", 256, 16, 1, rate_kernel<SsGroup<256>, 1>},
      {"ss", 64, 16, 2, rate_kernel<SsGroup<64>, 2>},   {"ss", 80, 16, 2, rate_kernel<SsGroup<80>, 2>},
      {"ss", 128, 16, 2, rate_kernel<SsGroup<128>, 2>}, {"ss", 256, 16, 2, rate_kernel<SsGroup<256>, 2>},
      {"rs", 256, 4, 1, rate_kernel<RsGroup<4>, 1>},    {"rs", 256, 5, 1, rate_kernel<RsGroup<5>, 1>},
      {"rs", 256, 4, 2, rate_kernel<RsGroup<4>, 2>},    {"rs", 256, 5, 2, rate_kernel<RsGroup<5>, 2>}};
  long long* cycles = nullptr;
  float* sink = nullptr;
  CHECK(cudaMalloc(&cycles, size_t(sms) * 2 * sizeof(long long)));
  CHECK(cudaMalloc(&sink, sizeof(float)));
  std::vector<long long> host(size_t(sms) * 2);
  std::printf("{\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"rows\": [\n", prop.name, sms);
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    const int smem = smem_bytes(row.warpgroups);
    CHECK(cudaFuncSetAttribute(row.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    // About the same multiply-adds in every row (~2 ms at the peak), so each runs long enough to time.
    const double fma_group = 64.0 * row.n * 16 * row.k_steps;
    const int groups = int(2.0e6 * 2048 / (fma_group * row.warpgroups));
    const double seconds = time_best([&] { row.kernel<<<sms, 128 * row.warpgroups, smem>>>(groups, cycles, sink); });
    CHECK(cudaMemcpy(host.data(), cycles, host.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    long long slowest = 0;
    for (int i = 0; i < sms * row.warpgroups; ++i) slowest = std::max(slowest, host[i]);
    const double fma_sm = fma_group * groups * row.warpgroups;
    std::printf("%s    {\"mode\": \"%s\", \"n\": %d, \"k_steps\": %d, \"warpgroups\": %d, \"groups\": %d, "
                "\"cycles\": %lld, \"fma_per_sm_cycle\": %.1f, \"cycles_per_64x8x16\": %.4f, \"tflops\": %.1f, "
                "\"implied_clock_mhz\": %.0f}",
                r ? ",\n" : "", row.mode, row.n, row.k_steps, row.warpgroups, groups, slowest, fma_sm / slowest,
                double(slowest) / (fma_sm / (64.0 * 8 * 16)), 2.0 * fma_sm * sms / seconds * 1e-12,
                slowest / seconds * 1e-6);
  }
  std::printf("\n  ],\n  \"method\": \"one CTA an SM of 1-2 warpgroups, each issuing wgmma groups back to back (one "
              "queued behind the one running); ss: 64 x n x 256 with both operands K-major in fa3's 128-byte "
              "swizzle (16 k-steps a group); rs: 64 x 256 x 16 k_steps, A from registers, B N-major; "
              "fma_per_sm_cycle: the SM's multiply-adds over its slowest warpgroup's %%clock64 cycles; tflops: "
              "the grid's over its event time (best of 5 after a warm-up); clocks not locked\"\n}\n");
  CHECK(cudaFree(cycles));
  CHECK(cudaFree(sink));
  return 0;
}
