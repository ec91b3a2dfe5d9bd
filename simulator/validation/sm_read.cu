// sm_read.cu: how fast one SM reads, alone and beside busy SMs, from L2 and from DRAM, as JSON.
//
// Build and run (one line, on the GPU machine):
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/smr simulator/validation/sm_read.cu && /tmp/smr > out.json
// (sm_80/sm_89: -gencode=arch=compute_80,code=sm_80; everything here is sm_80 PTX.)
//
// Why: a CTA that starts waits for its first loads (its Q block and the first K/V block) before its first
// GEMM. How long depends on the rate one SM can pull bytes in, which microbench.cu does not measure: its
// l2_read and hbm_read tests run every SM at once and report the chip's rate. Here k CTAs of 1024
// threads (one per SM: a CTA this size takes an SM's 2048-thread limit's half, and k <= SM count) each
// read their own slice, k from 1 to every SM:
//   l2    each CTA reads its 128 KiB slice 200 times (the slices of all CTAs, 16.5 MiB at 132 SMs, stay
//         in L2 after the warm-up run): bytes a second a CTA, from L2
//   dram  each CTA reads a 4 MiB slice once, a fresh part of a 4 GiB buffer every run (never in L2):
//         bytes a second a CTA, from DRAM
//   tile  one CTA of 128 threads (FA2's CTA) loads 48 KiB from L2 with cp.async 16 bytes a thread a
//         load, all issued then waited for (Q block and first K block at d = 128, Br = 128, Bc = 64),
//         timed with clock64 inside the kernel: the wait of a starting CTA alone, in seconds
//   dispatch  grids of empty CTAs (128 threads, and dynamic shared memory that lets 2 of them, or 1, share
//         an SM, as FA2's forward CTAs do) of 1 to 64 waves: the time a wave adds (the least-squares slope)
//         is what the SM takes to retire a CTA and start the next one, with nothing to compute
// Loads are ld.global.cg (L1 bypassed), four independent 16-byte loads a thread in flight. Every figure
// is the best of 5 timed runs after a warm-up; clocks are not locked.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

constexpr const char* kProgram = "sm_read";  // CHECK's messages (timing.cuh)
#include "timing.cuh"

constexpr int kThreads = 1024;
constexpr int kUnroll = 4;  // independent loads a thread has in flight

// CTA c reads int4 [base + c * slice, base + (c + 1) * slice) `reps` times.
__global__ void __launch_bounds__(kThreads) slice_read_kernel(const int4* __restrict__ p, size_t base,
                                                               size_t slice, int reps, int* sink) {
  const int4* mine = p + base + size_t(blockIdx.x) * slice;
  int acc = 0;
  for (int r = 0; r < reps; ++r)
    for (size_t i = threadIdx.x; i < slice; i += kThreads * kUnroll) {
      int4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = __ldcg(mine + i + u * kThreads);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  if (acc == 0x12345678) sink[threadIdx.x] = 1;
}

// One CTA of 128 threads: cp.async every 16-byte chunk of `bytes`, wait for all, the clocks it took.
__global__ void tile_load_kernel(const int4* __restrict__ src, int chunks, long long* clocks, int* sink) {
  extern __shared__ int4 smem[];
  __syncthreads();
  const long long t0 = clock64();
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + c));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src + c));
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  const long long t1 = clock64();
  if (threadIdx.x == 0) *clocks = t1 - t0;
  if (smem[threadIdx.x].x == 0x12345678) sink[threadIdx.x] = 1;
}

// A CTA that does nothing: what dispatching and retiring it costs.
__global__ void empty_cta_kernel(int* sink) {
  extern __shared__ int dyn[];
  if (threadIdx.x == 1023) sink[0] = dyn[0];  // never true (128 threads): keeps the shared memory allocated
}

int main() {
  int dev = 0, sms = 0, clock_khz = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  const double clock_hz = clock_khz * 1e3;
  int* sink = nullptr;
  CHECK(cudaMalloc(&sink, kThreads * sizeof(int)));
  std::fprintf(stderr, "sm_read: %s, %d SMs, %.0f MHz max clock\n", prop.name, sms, clock_hz / 1e6);

  std::vector<int> ks;
  for (int k = 1; k < sms; k *= 2) ks.push_back(k);
  ks.push_back(sms / 2);
  ks.push_back(sms);
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());

  // L2: 128 KiB a CTA, 200 passes.
  const size_t l2_slice = (size_t(128) << 10) / 16;
  const int l2_reps = 200;
  int4* l2_buf = nullptr;
  CHECK(cudaMalloc(&l2_buf, l2_slice * 16 * sms));
  CHECK(cudaMemset(l2_buf, 1, l2_slice * 16 * sms));
  std::vector<double> l2_rate;
  for (int k : ks) {
    const double t = time_best([&] { slice_read_kernel<<<k, kThreads>>>(l2_buf, 0, l2_slice, l2_reps, sink); });
    l2_rate.push_back(double(l2_slice) * 16 * l2_reps / t);
    std::fprintf(stderr, "  L2,   %3d SMs: %6.1f GB/s an SM (%5.2f TB/s in all)\n", k, l2_rate.back() / 1e9,
                 l2_rate.back() * k / 1e12);
  }

  // DRAM: 4 MiB a CTA, once, a fresh region every run (6 runs x 132 x 4 MiB = 3.1 GiB < 4 GiB).
  const size_t dram_slice = (size_t(4) << 20) / 16;
  const size_t big = size_t(4) << 30;
  int4* dram_buf = nullptr;
  CHECK(cudaMalloc(&dram_buf, big));
  CHECK(cudaMemset(dram_buf, 1, big));
  std::vector<double> dram_rate;
  for (int k : ks) {
    size_t base = 0;
    const double t = time_best([&] {
      if ((base + dram_slice * k) * 16 > big) base = 0;
      slice_read_kernel<<<k, kThreads>>>(dram_buf, base, dram_slice, 1, sink);
      base += dram_slice * k;
    });
    dram_rate.push_back(double(dram_slice) * 16 / t);
    std::fprintf(stderr, "  DRAM, %3d SMs: %6.1f GB/s an SM (%5.2f TB/s in all)\n", k, dram_rate.back() / 1e9,
                 dram_rate.back() * k / 1e12);
  }
  CHECK(cudaFree(dram_buf));

  // A starting CTA's first loads, alone: 48 KiB from L2 (the buffer above, warm) by 128 threads.
  const int tile_bytes = 48 << 10;
  long long* clocks = nullptr;
  CHECK(cudaMalloc(&clocks, sizeof(long long)));
  CHECK(cudaFuncSetAttribute(tile_load_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, tile_bytes));
  long long best_clocks = 1LL << 62;
  for (int r = 0; r < 6; ++r) {
    tile_load_kernel<<<1, 128, tile_bytes>>>(l2_buf, tile_bytes / 16, clocks, sink);
    CHECK(cudaGetLastError());
    long long c = 0;
    CHECK(cudaMemcpy(&c, clocks, sizeof c, cudaMemcpyDeviceToHost));
    if (r > 0) best_clocks = std::min(best_clocks, c);
  }
  std::fprintf(stderr, "  48 KiB tile from L2, one CTA of 128 threads: %lld clocks = %.2f us at max clock\n",
               best_clocks, best_clocks / clock_hz * 1e6);
  CHECK(cudaFree(clocks));
  CHECK(cudaFree(l2_buf));

  // Dispatch: 2 or 1 CTAs an SM (shared memory 100 KiB or 200 KiB a CTA), 1..64 waves of them.
  const int wave_list[] = {1, 2, 4, 8, 16, 32, 64};
  double dispatch_slope[2] = {0, 0};
  std::vector<double> dispatch_times[2];
  for (int per_sm = 2; per_sm >= 1; --per_sm) {
    const int smem = per_sm == 2 ? (100 << 10) : (200 << 10);
    CHECK(cudaFuncSetAttribute(empty_cta_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int w : wave_list) {
      const double t = time_best([&] { empty_cta_kernel<<<w * per_sm * sms, 128, smem>>>(sink); });
      dispatch_times[2 - per_sm].push_back(t);
      sx += w, sy += t, sxx += double(w) * w, sxy += w * t;
    }
    const double n = sizeof(wave_list) / sizeof(wave_list[0]);
    dispatch_slope[2 - per_sm] = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    std::fprintf(stderr, "  dispatch, %d CTAs an SM: %.3f us a wave (64 waves: %.1f us)\n", per_sm,
                 dispatch_slope[2 - per_sm] * 1e6, dispatch_times[2 - per_sm].back() * 1e6);
  }

  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("{\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"max_sm_clock_hz\": %.0f,\n", prop.name, sms, clock_hz);
  std::printf("  \"cuda_driver\": %d,\n  \"cuda_runtime\": %d,\n", driver, runtime);
  std::printf("  \"per_sm_read\": [");
  for (size_t n = 0; n < ks.size(); ++n)
    std::printf("%s\n    {\"sms\": %d, \"l2_bytes_per_s_per_sm\": %.4e, \"dram_bytes_per_s_per_sm\": %.4e}",
                n ? "," : "", ks[n], l2_rate[n], dram_rate[n]);
  std::printf("\n  ],\n");
  std::printf("  \"tile_48k_from_l2_one_cta_clocks\": %lld,\n  \"tile_48k_from_l2_one_cta_s\": %.4e,\n", best_clocks,
              best_clocks / clock_hz);
  for (int c = 0; c < 2; ++c) {
    std::printf("  \"dispatch_%d_ctas_per_sm\": {\"seconds_per_wave\": %.4e, \"rows\": [", 2 - c, dispatch_slope[c]);
    for (size_t n = 0; n < dispatch_times[c].size(); ++n)
      std::printf("%s{\"waves\": %d, \"time_s\": %.4e}", n ? ", " : "", wave_list[n], dispatch_times[c][n]);
    std::printf("]},\n");
  }
  std::printf("  \"method\": \"k CTAs of %d threads (one an SM), each its own slice, ld.global.cg, %d 16-byte loads a "
              "thread in flight; L2: 128 KiB a CTA x %d passes; DRAM: 4 MiB a CTA once, fresh each run; tile: one CTA "
              "of 128 threads, cp.async.cg 16 B, clock64; dispatch: empty CTAs of 128 threads, 1-64 waves, the slope; best of 5 after a warm-up, clocks not locked\"\n}\n",
              kThreads, kUnroll, l2_reps);
  CHECK(cudaFree(sink));
  return 0;
}
