// loaded_latency.cu: the HBM's latency as it fills, from CTAs that each keep a fixed number of bytes in
// flight: with N of them streaming at X bytes/s in all, Little's law gives the time a load takes,
// L = N x W / X. As JSON, a row a (W, N).
//
// Build and run (one line, on the GPU machine):
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/ll simulator/validation/loaded_latency.cu && /tmp/ll > out.json
// (sm_80/sm_89: -gencode=arch=compute_80,code=sm_80.)
//
// Why: a kernel whose CTAs each hold a few blocks in flight (flashlab's decode kernel: a 32-key block of K
// and V a warp) streams at W / L a CTA. The pointer chase (microbench.cu, dram_latency_s) gives L with the
// HBM idle; near its peak the queues grow and L with them, so the grid that would fill the HBM at the idle
// latency does not. This measures L against the HBM's load.
//   stream  N CTAs (1 .. 2 an SM) of T threads, each thread keeping 8 independent 16-byte ld.global.cg in
//           flight (W = T x 128 bytes a CTA), each CTA its own contiguous slice, never read before (a 6 GiB
//           buffer walked so that no run reads what the last one left in L2).
// The rate is the difference of two runs, slices of 2 and 6 MiB a CTA, so the kernel's start and end
// cancel: X = N x 4 MiB / (t6 - t2). Best of 5 each; clocks not locked.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

constexpr const char* kProgram = "loaded_latency";  // CHECK's messages (timing.cuh)
#include "timing.cuh"

constexpr int kUnroll = 8;  // independent 16-byte loads a thread has in flight

// CTA c reads int4 [c slice, (c + 1) slice) of p, 8 loads a thread at a time, each round waiting for all 8.
__global__ void stream_kernel(const int4* __restrict__ p, size_t slice, int* sink) {
  const int4* begin = p + size_t(blockIdx.x) * slice;
  int acc = 0;
  for (size_t i = threadIdx.x; i < slice; i += size_t(blockDim.x) * kUnroll) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t at = i + size_t(u) * blockDim.x;
      v[u] = at < slice ? __ldcg(begin + at) : make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678) sink[threadIdx.x] = 1;
}

int main() {
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  const int sms = prop.multiProcessorCount;
  const size_t buffer_bytes = size_t(6) << 30;
  char* buf = nullptr;
  int* sink = nullptr;
  CHECK(cudaMalloc(&buf, buffer_bytes));
  CHECK(cudaMemset(buf, 1, buffer_bytes));
  CHECK(cudaMalloc(&sink, 1024 * sizeof(int)));
  std::fprintf(stderr, "loaded_latency: %s, %d SMs\n", prop.name, sms);

  struct Row {
    int threads, ctas;
    double rate;
  };
  std::vector<Row> rows;
  const int thread_counts[] = {128, 512};  // W = 16 and 64 KiB a CTA
  const double per_sm[] = {8.0 / 132, 16.0 / 132, 32.0 / 132, 48.0 / 132, 64.0 / 132, 88.0 / 132,
                           110.0 / 132, 1.0, 1.5, 2.0};
  size_t offset = 0;  // where the next run starts in the buffer: never where the last one read
  for (int threads : thread_counts) {
    for (double f : per_sm) {
      const int ctas = int(f * sms + 0.5);
      auto run = [&](size_t slice_bytes) {
        const size_t total = size_t(ctas) * slice_bytes;
        return time_best([&] {
          if (offset + total > buffer_bytes) offset = 0;
          stream_kernel<<<ctas, threads>>>(reinterpret_cast<const int4*>(buf + offset), slice_bytes / 16, sink);
          offset += total;
        });
      };
      const size_t small = size_t(2) << 20, large = size_t(6) << 20;
      if (size_t(ctas) * large > buffer_bytes / 2) continue;
      const double t_small = run(small), t_large = run(large);
      const double rate = double(ctas) * double(large - small) / (t_large - t_small);
      rows.push_back({threads, ctas, rate});
      const double w = double(threads) * kUnroll * 16;
      std::fprintf(stderr, "  W %5.0f KiB, %3d CTAs: %7.1f GB/s in all, %6.1f GB/s a CTA, latency %6.0f ns\n",
                   w / 1024, ctas, rate / 1e9, rate / ctas / 1e9, ctas * w / rate * 1e9);
    }
  }

  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("{\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n", prop.name, sms);
  std::printf("  \"cuda_driver\": %d,\n  \"cuda_runtime\": %d,\n  \"rows\": [", driver, runtime);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double w = double(r.threads) * kUnroll * 16;
    std::printf("%s\n    {\"bytes_in_flight_a_cta\": %.0f, \"ctas\": %d, \"bytes_per_s\": %.4e, \"latency_s\": %.4e}",
                i ? "," : "", w, r.ctas, r.rate, r.ctas * w / r.rate);
  }
  std::printf("\n  ],\n  \"method\": \"N CTAs of T threads, each thread 8 independent 16-byte ld.global.cg in flight "
              "(W = T x 128 bytes a CTA), each CTA a contiguous slice never read before; the rate from two runs "
              "(2 and 6 MiB a CTA) so that start and end cancel; latency = N W / rate (Little's law); best of 5, "
              "clocks not locked\"\n}\n");
  CHECK(cudaFree(buf));
  CHECK(cudaFree(sink));
  return 0;
}
