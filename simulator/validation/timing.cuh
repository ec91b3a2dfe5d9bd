// What every microbenchmark of this folder shares (microbench.cu, sm_read.cu, cvt_e4m3.cu, cold_read.cu,
// loaded_latency.cu, dependent_launch.cu): a CUDA call
// checked with the program's name, and the best of several timed runs after a warm-up. Each benchmark is
// still one nvcc line: this header sits beside it.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

#define CHECK(call)                                                                                      \
  do {                                                                                                   \
    cudaError_t err_ = (call);                                                                           \
    if (err_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "%s: %s failed at %s:%d: %s\n", kProgram, #call, __FILE__, __LINE__,          \
                   cudaGetErrorString(err_));                                                            \
      std::exit(1);                                                                                      \
    }                                                                                                    \
  } while (0)

// Best of `runs` timed runs of `launch` (after one warm-up), in seconds; CUDA events on the default stream.
inline double time_best(const std::function<void()>& launch, int runs = 5) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  float best = 1e30f;
  for (int r = 0; r < runs; ++r) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return best * 1e-3;
}
