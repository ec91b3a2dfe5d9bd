// cvt_e4m3.cu: the rate an SM converts fp32 pairs to e4m3 (what fa3's FP8 forward does to P~ before its
// second GEMM), alone and beside the softmax's exponentials, as JSON.
//
// Build and run (one line, on the GPU machine):
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/cvt simulator/validation/cvt_e4m3.cu && /tmp/cvt > out.json
//
// Three tests, 4 CTAs of 512 threads an SM, 8 independent dependency chains a thread (ptxas hoists an
// instruction whose operands do not change in the loop, so each result feeds the next):
//   cvt   cvt.rn.satfinite.e4m3x2.f32, its 16-bit result packed twice into the next operand (mov.b32 {h, h}):
//         pairs a second. The FP8 kernel packs two such results into one register too, so this is its cost
//         a pair of elements of P~ (consumer.cuh e4m3x4).
//   ex2   ex2.approx.ftz.f32, each result the next operand: results a second.
//   mix   the FP8 softmax's ratio, one exponential an element and one conversion a pair: 8 ex2 chains and
//         4 cvt chains a thread, in turn: does the conversion hide beside the MUFU work (time = the larger
//         alone) or add (the sum)?
// Best of 5 timed runs after a warm-up; clocks not locked.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

constexpr const char* kProgram = "cvt_e4m3";  // CHECK's messages (timing.cuh)
#include "timing.cuh"

// One conversion of (x, x) and the result packed twice into the next x.
__device__ __forceinline__ float cvt_step(float x) {
  float r;
  asm volatile("{\n.reg .b16 h;\ncvt.rn.satfinite.e4m3x2.f32 h, %1, %1;\nmov.b32 %0, {h, h};\n}\n" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm volatile("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}

__global__ void cvt_kernel(int iters, unsigned* sink) {
  float x[8];
  for (int k = 0; k < 8; ++k) x[k] = 0.01f * (threadIdx.x + k);
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = cvt_step(x[k]);
  float acc = 0;
  for (int k = 0; k < 8; ++k) acc += x[k];
  if (acc == 1234.5f) sink[threadIdx.x] = 1;
}

__global__ void ex2_kernel(int iters, unsigned* sink) {
  float x[8];
  for (int k = 0; k < 8; ++k) x[k] = -0.01f * (threadIdx.x + k);
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = ex2(x[k]);
  float acc = 0;
  for (int k = 0; k < 8; ++k) acc += x[k];
  if (acc == 1234.5f) sink[threadIdx.x] = 1;
}

__global__ void mix_kernel(int iters, unsigned* sink) {
  float x[8], y[4];
  for (int k = 0; k < 8; ++k) x[k] = -0.01f * (threadIdx.x + k);
  for (int k = 0; k < 4; ++k) y[k] = 0.01f * (threadIdx.x + k);
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      x[2 * k] = ex2(x[2 * k]);
      x[2 * k + 1] = ex2(x[2 * k + 1]);
      y[k] = cvt_step(y[k]);
    }
  }
  float acc = 0;
  for (int k = 0; k < 8; ++k) acc += x[k];
  for (int k = 0; k < 4; ++k) acc += y[k];
  if (acc == 1234.5f) sink[threadIdx.x] = 1;
}

int main() {
  int dev = 0, sms = 0, clock_khz = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  const double clock_hz = clock_khz * 1e3;
  unsigned* sink = nullptr;
  CHECK(cudaMalloc(&sink, 1024 * sizeof(unsigned)));
  const int blocks = 4 * sms, threads = 512, iters = 4096;
  const double lanes = double(blocks) * threads;
  const double t_cvt = time_best([&] { cvt_kernel<<<blocks, threads>>>(iters, sink); });
  const double t_ex2 = time_best([&] { ex2_kernel<<<blocks, threads>>>(iters, sink); });
  const double t_mix = time_best([&] { mix_kernel<<<blocks, threads>>>(iters, sink); });
  const double cvt_rate = lanes * iters * 8 / t_cvt, ex2_rate = lanes * iters * 8 / t_ex2;
  // The mix: iters iterations of 8 ex2 and 4 cvt a thread.
  const double mix_ex2 = lanes * iters * 8 / ex2_rate, mix_cvt = lanes * iters * 4 / cvt_rate;
  const double per = 1.0 / (sms * clock_hz);
  std::fprintf(stderr, "cvt_e4m3: %s: cvt %.3g/s (%.1f a clock an SM), ex2 %.3g/s (%.1f), mix %.1f us (sum %.1f, max %.1f)\n",
               prop.name, cvt_rate, cvt_rate * per, ex2_rate, ex2_rate * per, t_mix * 1e6, (mix_ex2 + mix_cvt) * 1e6,
               std::max(mix_ex2, mix_cvt) * 1e6);
  std::printf("{\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"max_sm_clock_hz\": %.0f,\n", prop.name, sms, clock_hz);
  std::printf("  \"cvt_e4m3x2_per_s\": %.6e,\n  \"cvt_e4m3x2_per_sm_per_clk\": %.2f,\n", cvt_rate, cvt_rate * per);
  std::printf("  \"ex2_per_s\": %.6e,\n  \"ex2_per_sm_per_clk\": %.2f,\n", ex2_rate, ex2_rate * per);
  std::printf("  \"mix_8_ex2_4_cvt\": {\"time_s\": %.6e, \"sum_of_alone_s\": %.6e, \"max_of_alone_s\": %.6e},\n", t_mix,
              mix_ex2 + mix_cvt, std::max(mix_ex2, mix_cvt));
  std::printf("  \"method\": \"4 CTAs of 512 threads an SM, 8 independent dependency chains a thread "
              "(mix: 8 ex2 and 4 cvt), %d iterations; best of 5 after a warm-up; clocks not locked\"\n}\n", iters);
  CHECK(cudaFree(sink));
  return 0;
}
