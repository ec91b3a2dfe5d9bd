// l2_reduce.cu: how fast fp32 reductions (atomic adds whose result is unused) reach an L2-resident buffer,
// scalar and 16 bytes at a time, from every SM and from one, as JSON.
//
// Build and run (one line, on the GPU machine):
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/l2r simulator/validation/l2_reduce.cu && /tmp/l2r > out.json
// (sm_80: -gencode=arch=compute_80,code=sm_80; the 16-byte reductions are then left out.)
//
// Why: a FlashAttention-2 backward adds dQ's partial sums into an fp32 buffer in L2, d / Bc floats an element
// of S: flash-attn 2 with scalar atomicAdd, flashlab's fa2 dkdv kernel with red.global.add.v4.f32 (16 bytes a
// lane, sm_90). ncu (2026-11-27, H100) puts the dkdv kernel with its dQ at 1.29-1.59x the same kernel without
// it, where its fifth GEMM explains 1.25x: the simulator needs the reductions' rate to charge the rest.
//   scalar  red.global.add.f32, a word a lane, consecutive lanes on consecutive words
//   v4      red.global.add.v4.f32, 16 bytes a lane, consecutive lanes on consecutive 16-byte chunks
// Each over a 4 MiB buffer (in L2 after the first pass), 20 passes, by 4 CTAs of 256 threads an SM (every
// SM) or one CTA of 1024 threads (one SM alone); best of 5 after a warm-up; clocks not locked.
// Then the kernels' own pattern (added 2026-11-28): fa3's backward at d = 256, whose two consumers (256
// threads) add a step's 64 x 256 fp32 dQ tile (64 KiB, a warp's 512 contiguous bytes at a time, v4) into
// its Q block's rows, one CTA an SM, over tiles that stay in L2 (2 an SM):
//   tile distinct  CTA b at step t adds into tile (b + t) mod tiles: every CTA on its own tile at a step
//                  (the deterministic kernel's rotated walks, and causal walks)
//   tile shared    every CTA at step t into tile t mod tiles: all on one tile (a head's CTAs at one Q block)
//   tile landed    distinct, each step's adds landed before the next step's begin: after the CTA's adds,
//                  a barrier and one thread's red.release.gpu (the deterministic kernel's turn keeper,
//                  gpu/fa3/bwd_dq_writer.cuh), then a barrier: a step's drain at full load, serialized
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

constexpr const char* kProgram = "l2_reduce";  // CHECK's messages (timing.cuh)
#include "timing.cuh"

__global__ void red_scalar_kernel(float* __restrict__ acc, size_t words, int passes) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int it = 0; it < passes; ++it)
    for (size_t w = blockIdx.x * size_t(blockDim.x) + threadIdx.x; w < words; w += stride)
      asm volatile("red.global.add.f32 [%0], %1;" ::"l"(acc + w), "f"(1.0f) : "memory");
}

__global__ void red_v4_kernel(float* __restrict__ acc, size_t words, int passes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const size_t chunks = words / 4, stride = size_t(gridDim.x) * blockDim.x;
  for (int it = 0; it < passes; ++it)
    for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < chunks; c += stride)
      asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(acc + 4 * c), "f"(1.0f), "f"(1.0f),
                   "f"(1.0f), "f"(1.0f)
                   : "memory");
#endif
}

// The kernels' pattern: mode 0 distinct, 1 shared, 2 landed (above).
constexpr int kTileFloats = 64 * 256;
__global__ void red_tile_kernel(float* __restrict__ acc, int* __restrict__ sem, int tiles, int steps, int mode) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (int t = 0; t < steps; ++t) {
    const int tile = mode == 1 ? t % tiles : (blockIdx.x + t) % tiles;
    float* base = acc + size_t(tile) * kTileFloats;
    for (int f = threadIdx.x; f < kTileFloats / 4; f += blockDim.x)
      asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(base + 4 * f), "f"(1.0f), "f"(1.0f),
                   "f"(1.0f), "f"(1.0f)
                   : "memory");
    if (mode == 2) {
      __syncthreads();
      if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(sem + blockIdx.x) : "memory");
      __syncthreads();
    }
  }
#endif
}

int main() {
  int dev = 0, sms = 0, major = 0, clock_khz = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  const size_t words = size_t(1) << 20;  // 4 MiB
  const int passes = 20;
  float* acc = nullptr;
  CHECK(cudaMalloc(&acc, words * sizeof(float)));
  CHECK(cudaMemset(acc, 0, words * sizeof(float)));

  struct Row {
    const char* name;
    bool all_sms;
    double floats_per_s;
  };
  Row rows[4] = {{"scalar", true, 0}, {"scalar", false, 0}, {"v4", true, 0}, {"v4", false, 0}};
  for (Row& r : rows) {
    const bool v4 = r.name[0] == 'v';
    if (v4 && major < 9) continue;
    const int ctas = r.all_sms ? 4 * sms : 1, threads = r.all_sms ? 256 : 1024;
    const double t = time_best([&] {
      if (v4) red_v4_kernel<<<ctas, threads>>>(acc, words, passes);
      else red_scalar_kernel<<<ctas, threads>>>(acc, words, passes);
    });
    r.floats_per_s = double(words) * passes / t;
    std::fprintf(stderr, "  %-6s %-8s %.1f G floats/s = %.2f TB/s\n", r.name, r.all_sms ? "all SMs" : "one SM",
                 r.floats_per_s / 1e9, 4 * r.floats_per_s / 1e12);
  }
  CHECK(cudaFree(acc));

  // The kernels' pattern: one CTA of 256 threads an SM, 2 tiles an SM (17 MB on an H100), 64 steps.
  struct TileRow {
    const char* name;
    int mode;
    double floats_per_s, step_s;
  };
  TileRow tile_rows[3] = {{"distinct", 0, 0, 0}, {"shared", 1, 0, 0}, {"landed", 2, 0, 0}};
  const int tiles = 2 * sms, steps = 64;
  int* sem = nullptr;
  if (major >= 9) {
    CHECK(cudaMalloc(&acc, size_t(tiles) * kTileFloats * sizeof(float)));
    CHECK(cudaMemset(acc, 0, size_t(tiles) * kTileFloats * sizeof(float)));
    CHECK(cudaMalloc(&sem, sms * sizeof(int)));
    CHECK(cudaMemset(sem, 0, sms * sizeof(int)));
    for (TileRow& r : tile_rows) {
      const double t = time_best([&] { red_tile_kernel<<<sms, 256>>>(acc, sem, tiles, steps, r.mode); });
      r.floats_per_s = double(sms) * steps * kTileFloats / t;
      r.step_s = t / steps;
      std::fprintf(stderr, "  tile %-8s %.1f G floats/s = %.2f TB/s, %.2f us a step\n", r.name, r.floats_per_s / 1e9,
                   4 * r.floats_per_s / 1e12, r.step_s * 1e6);
    }
    CHECK(cudaFree(acc));
    CHECK(cudaFree(sem));
  }

  std::printf("{\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"clock_hz\": %.0f,\n", prop.name, sms,
              clock_khz * 1e3);
  std::printf("  \"method\": \"red.global.add (result unused) over a %zu-word L2-resident buffer, %d passes; all SMs: "
              "%d CTAs of 256 threads; one SM: one CTA of 1024 threads; best of 5\",\n",
              words, passes, 4 * sms);
  std::printf("  \"rows\": [");
  for (int n = 0; n < 4; ++n)
    std::printf("%s{\"width\": \"%s\", \"sms\": \"%s\", \"fp32_per_s\": %.6e, \"bytes_per_s\": %.6e}", n ? ", " : "",
                rows[n].name, rows[n].all_sms ? "all" : "one", rows[n].floats_per_s, 4 * rows[n].floats_per_s);
  std::printf("],\n  \"tile_method\": \"one CTA of 256 threads an SM adding a 64 x 256 fp32 tile a step (v4, a warp's "
              "512 contiguous bytes at a time) into %d L2-resident tiles, %d steps; step_s: the kernel's time over "
              "its steps\",\n",
              tiles, steps);
  std::printf("  \"tile_rows\": [");
  for (int n = 0; n < 3; ++n)
    std::printf("%s{\"pattern\": \"%s\", \"fp32_per_s\": %.6e, \"bytes_per_s\": %.6e, \"step_s\": %.6e}",
                n ? ", " : "", tile_rows[n].name, tile_rows[n].floats_per_s, 4 * tile_rows[n].floats_per_s,
                tile_rows[n].step_s);
  std::printf("]\n}\n");
  return 0;
}
