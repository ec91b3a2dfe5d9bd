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
//   smem    rows with first_smem_bytes > 0 give each first CTA that much dynamic shared memory, as the decode
//           split kernel holds (100 KiB at d <= 128: two CTAs an SM), and time plain and pdl twice: with the
//           second kernel's carveout left to the driver (plain_s, pdl_s: the decode kernel's launch today)
//           and with it asking for the most shared memory (plain_max_s, pdl_max_s). The question: if the
//           driver gives the small second kernel a smaller split of L1 and shared memory than the first's,
//           and an SM can change its split only when idle, each change between the two waits for the SM to
//           drain (and the second's CTAs cannot sit beside the first's); the _max rows say whether it costs.
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
  extern __shared__ int held[];  // first_smem_bytes a CTA (the launch's): only held, as the split kernel's stages
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const uint64_t t0 = global_ns();
  while (global_ns() - t0 < spin_ns) {
  }
  if (threadIdx.x == 0) held[0] = int(t0 & 1);
  __syncwarp();
  if (threadIdx.x == 0) sink[blockIdx.x] = held[0];  // a result the second kernel would read
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
  constexpr int kMostSmem = 100 * 1024;  // the decode split kernel's at d <= 128 (gpu/shapes.hpp decode_split_shape)
  CHECK(cudaFuncSetAttribute(first_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMostSmem));
  struct Shape { int ctas, dep_ctas; uint64_t spin_ns; int smem; };
  const std::vector<Shape> shapes = {{sms * 112 / 132, 32, 10000, 0},     {sms * 112 / 132, 256, 10000, 0},
                                     {sms * 2, 256, 10000, 0},            {sms * 112 / 132, 32, 20000, 0},
                                     {sms * 112 / 132, 4096, 10000, 0},   {sms * 80 / 132, 32, 10000, kMostSmem},
                                     {sms * 112 / 132, 32, 10000, kMostSmem}, {sms * 2, 256, 10000, kMostSmem}};
  // A call's time over kPairs calls: the first kernel, and (second_ctas > 0) the second after it.
  const auto calls = [&](const Shape& s, int second_ctas, bool pdl) {
    return time_best([&] {
      for (int i = 0; i < kPairs; ++i) {
        first_kernel<<<s.ctas, 96, s.smem>>>(s.spin_ns, sink);
        if (second_ctas > 0) second(second_ctas, pdl);
      }
    }) / kPairs;
  };
  const auto carveout = [&](int percent) {
    CHECK(cudaFuncSetAttribute(second_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent));
  };
  bool first_row = true;
  for (const Shape& s : shapes) {
    carveout(int(cudaSharedmemCarveoutDefault));
    const double alone = calls(s, 0, false), plain = calls(s, s.dep_ctas, false);
    const double pdl = major >= 9 ? calls(s, s.dep_ctas, true) : -1;
    double plain_max = -1, pdl_max = -1;
    if (s.smem > 0) {
      carveout(int(cudaSharedmemCarveoutMaxShared));
      plain_max = calls(s, s.dep_ctas, false);
      pdl_max = major >= 9 ? calls(s, s.dep_ctas, true) : -1;
    }
    const auto cost = [&](double t) { return t < 0 ? -1.0 : t - alone; };
    std::printf("%s    {\"ctas\": %d, \"dep_ctas\": %d, \"spin_s\": %.4e, \"first_smem_bytes\": %d, "
                "\"alone_s\": %.4e, \"plain_s\": %.4e, \"pdl_s\": %.4e, \"plain_max_s\": %.4e, "
                "\"pdl_max_s\": %.4e, \"plain_cost_s\": %.4e, \"pdl_cost_s\": %.4e, \"plain_max_cost_s\": %.4e, "
                "\"pdl_max_cost_s\": %.4e}",
                first_row ? "" : ",\n", s.ctas, s.dep_ctas, s.spin_ns * 1e-9, s.smem, alone, plain, pdl, plain_max,
                pdl_max, cost(plain), cost(pdl), cost(plain_max), cost(pdl_max));
    first_row = false;
  }
  std::printf("\n  ],\n  \"method\": \"a call: first kernel (ctas x 96 threads spinning spin_s on the global timer, "
              "holding first_smem_bytes of shared memory a CTA; on sm_90 triggering its dependents at its start) then "
              "second (dep_ctas x 256 threads: griddepcontrol.wait, one store), %d calls back to back, best of 5 after "
              "a warm-up; alone: the first kernel only; plain: stream order; pdl: the second a programmatic dependent "
              "launch; _max: the second asking for the most shared memory (carveout); -1: not timed; cost = a call's "
              "time minus alone's; clocks not locked\"\n}\n", kPairs);
  CHECK(cudaFree(sink));
  CHECK(cudaFree(out));
  return 0;
}
