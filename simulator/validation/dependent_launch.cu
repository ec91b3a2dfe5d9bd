// dependent_launch.cu: what a kernel that needs the results of the one before it pays between the two,
// kernels back to back, as JSON: a decode call's combine after its split kernel.
//
// Build and run (one line, on the GPU machine):
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/dl simulator/validation/dependent_launch.cu && /tmp/dl > out.json
// (sm_80: -gencode=arch=compute_80,code=sm_80; the programmatic launch is then left out.)
//
// Why: flashlab's decode call is a split kernel and, with splits, a combine that reads the split kernel's
// partials. The combine's own work is small (a few hundred KB from L2), yet in a call it adds 1-2 us
// (an H200, simulator/README.md "Decoding"). Beside its bytes it pays the dependency itself: the first
// kernel's completion made visible and the second's CTAs released. This measures that with kernels that
// do nothing else:
//   first   `ctas` CTAs of 96 threads, each spinning for `spin_ns` on the global timer (a split kernel's
//           stream, without its bytes); on sm_90 each CTA triggers its dependents at its start
//           (griddepcontrol.launch_dependents), as the decode split kernel does
//   second  `dep_ctas` CTAs of 256 threads (a combine: a CTA a row), each waiting for the first
//           (griddepcontrol.wait) and storing one word
//   modes   alone: the first kernel back to back; plain: first then second, stream order; pdl: the second
//           a programmatic dependent launch (cudaLaunchAttributeProgrammaticStreamSerialization)
// Each mode runs `pairs` calls back to back (launch gaps count, as a model's layers pay them), best of 5
// after a warm-up; a call's cost is the total over the pairs. The second kernel's in-call cost is a
// mode's time a call minus alone's. Clocks not locked.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

constexpr const char* kProgram = "dependent_launch";  // CHECK's messages (timing.cuh)
#include "timing.cuh"

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(96) first_kernel(uint64_t spin_ns, int* sink) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const uint64_t t0 = global_ns();
  while (global_ns() - t0 < spin_ns) {
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = int(t0 & 1);  // a result the second kernel would read
}

__global__ void __launch_bounds__(256) second_kernel(int* out) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}

int main() {
  int dev = 0, major = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  int *sink = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&sink, 4096 * sizeof(int)));
  CHECK(cudaMalloc(&out, 4096 * sizeof(int)));
  constexpr int kPairs = 200;

  auto second = [&](int dep_ctas, bool pdl) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(unsigned(dep_ctas));
    config.blockDim = dim3(256);
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    if (pdl) {
      config.attrs = attr;
      config.numAttrs = 1;
    }
    CHECK(cudaLaunchKernelEx(&config, second_kernel, out));
  };

  std::printf("{\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"cuda_driver\": %d,\n  \"cuda_runtime\": %d,\n",
              prop.name, sms, driver, runtime);
  std::printf("  \"pairs\": %d,\n  \"rows\": [\n", kPairs);
  struct Shape { int ctas, dep_ctas; uint64_t spin_ns; };
  const std::vector<Shape> shapes = {{sms * 112 / 132, 32, 10000},  {sms * 112 / 132, 256, 10000},
                                     {sms * 2, 256, 10000},         {sms * 112 / 132, 32, 20000},
                                     {sms * 112 / 132, 4096, 10000}};
  bool first_row = true;
  for (const Shape& s : shapes) {
    const double alone = time_best([&] {
      for (int i = 0; i < kPairs; ++i) first_kernel<<<s.ctas, 96>>>(s.spin_ns, sink);
    }) / kPairs;
    const double plain = time_best([&] {
      for (int i = 0; i < kPairs; ++i) {
        first_kernel<<<s.ctas, 96>>>(s.spin_ns, sink);
        second(s.dep_ctas, false);
      }
    }) / kPairs;
    double pdl = -1;
    if (major >= 9)
      pdl = time_best([&] {
        for (int i = 0; i < kPairs; ++i) {
          first_kernel<<<s.ctas, 96>>>(s.spin_ns, sink);
          second(s.dep_ctas, true);
        }
      }) / kPairs;
    std::printf("%s    {\"ctas\": %d, \"dep_ctas\": %d, \"spin_s\": %.4e, \"alone_s\": %.4e, \"plain_s\": %.4e, "
                "\"pdl_s\": %.4e, \"plain_cost_s\": %.4e, \"pdl_cost_s\": %.4e}",
                first_row ? "" : ",\n", s.ctas, s.dep_ctas, s.spin_ns * 1e-9, alone, plain, pdl, plain - alone,
                pdl < 0 ? -1.0 : pdl - alone);
    first_row = false;
  }
  std::printf("\n  ],\n  \"method\": \"a call: first kernel (ctas x 96 threads spinning spin_s on the global timer; on "
              "sm_90 triggering its dependents at its start) then second (dep_ctas x 256 threads: "
              "griddepcontrol.wait, one store), %d calls back to back, best of 5 after a warm-up; "
              "alone: the first kernel only; plain: stream order; pdl: the second a programmatic dependent "
              "launch; cost = a call's time minus alone's; clocks not locked\"\n}\n", kPairs);
  CHECK(cudaFree(sink));
  CHECK(cudaFree(out));
  return 0;
}
