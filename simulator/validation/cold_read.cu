// cold_read.cu: how long one kernel takes to read N bytes that are not in L2, kernels back to back as a
// model's layers read their KV caches, as JSON: the floor under a decode call's time.
//
// Build and run (one line, on the GPU machine):
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/cr simulator/validation/cold_read.cu && /tmp/cr > out.json
// (sm_80/sm_89: -gencode=arch=compute_80,code=sm_80; the bulk reader is then left out.)
//
// Why: a batch-1 decode call streams a KV cache of tens of MB (8k keys, 8 kv heads, d = 128: 33.6 MB), a
// few microseconds of HBM time at the copy rate. Whatever a single kernel pays to start streaming from
// cold (the first loads' latency, the ramp to full rate, the tail as CTAs finish) is a large share of
// that, for any kernel: this measures it with kernels that do nothing but read.
//   ldg    one CTA of 1024 threads an SM, each its own contiguous slice, ld.global.cg, 8 independent
//          16-byte loads a thread in flight (128 KiB an SM)
//   bulk   (sm_90) one CTA an SM, one thread keeping 6 cp.async.bulk copies of 32 KiB in flight into a ring
//          of shared memory (192 KiB an SM), each completing on its mbarrier: as many bytes in flight as
//          an SM's shared memory holds
//   empty  an empty kernel (one CTA an SM): what a kernel costs back to back with nothing to read
// For each size, `copies` buffers (together at least four L2s, four at least) are read in turn, 20 rounds,
// events around all of them: the time a kernel is the total over the launches, so launch gaps count
// as a model's layers pay them, and each buffer was evicted by the others' reads (clean lines: no
// write-back on the way). Beside it, a 2 GiB device-to-device copy's rate, (read + written) / time, as
// bench/decode_compare.py measures its roofline. Best of 5 after a warm-up; clocks not locked.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

constexpr const char* kProgram = "cold_read";  // CHECK's messages (timing.cuh)
#include "timing.cuh"

constexpr int kThreads = 1024;
constexpr int kUnroll = 8;  // independent 16-byte loads a thread has in flight

// CTA c reads int4 [c slice, (c + 1) slice) of p (the last CTA up to n).
__global__ void __launch_bounds__(kThreads) ldg_read_kernel(const int4* __restrict__ p, size_t n, size_t slice,
                                                             int* sink) {
  const size_t begin = size_t(blockIdx.x) * slice, end = begin + slice < n ? begin + slice : n;
  int acc = 0;
  for (size_t i = begin + threadIdx.x; i < end; i += size_t(kThreads) * kUnroll) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t at = i + size_t(u) * kThreads;
      v[u] = at < end ? __ldcg(p + at) : make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678) sink[threadIdx.x] = 1;
}

constexpr int kStages = 6;
constexpr uint32_t kChunk = 32 << 10;  // bytes a bulk copy

// CTA c reads bytes [c slice, (c + 1) slice) of p (the last CTA up to n) into a ring of kStages chunks:
// thread 0 issues a chunk's bulk copy as soon as its stage's previous copy has landed.
__global__ void bulk_read_kernel(const char* __restrict__ p, size_t n, size_t slice, int* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) char ring[];
  __shared__ __align__(8) uint64_t full[kStages];
  if (threadIdx.x != 0) return;
  const size_t begin = size_t(blockIdx.x) * slice, end = begin + slice < n ? begin + slice : n;
  const uint32_t ring_at = uint32_t(__cvta_generic_to_shared(ring));
  for (int s = 0; s < kStages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(uint32_t(__cvta_generic_to_shared(&full[s]))));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  auto issue = [&](size_t at, int s) {
    const uint32_t bytes = uint32_t(end - at < kChunk ? end - at : kChunk);
    const uint32_t bar = uint32_t(__cvta_generic_to_shared(&full[s]));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     ring_at + s * kChunk),
                 "l"(p + at), "r"(bytes), "r"(bar)
                 : "memory");
  };
  auto wait = [&](int s, int parity) {
    const uint32_t bar = uint32_t(__cvta_generic_to_shared(&full[s]));
    asm volatile(
        "{\n.reg .pred done;\nWAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
  };
  const size_t chunks = (end > begin ? end - begin + kChunk - 1 : 0) / kChunk;
  for (size_t c = 0; c < chunks && c < kStages; ++c) issue(begin + c * kChunk, int(c));
  for (size_t c = 0; c < chunks; ++c) {
    const int s = int(c % kStages);
    wait(s, int((c / kStages) & 1));
    if (c + kStages < chunks) issue(begin + (c + kStages) * kChunk, s);
  }
  if (chunks && ring[0] == 0x5a && ring[1] == 0x12) sink[0] = 1;  // the data read, so that nothing is elided
#else
  if (n == 0 && slice == 0) sink[0] = 1;
#endif
}

__global__ void empty_kernel(int* sink) {
  if (sink == nullptr) sink[0] = 1;
}

int main() {
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  const int sms = prop.multiProcessorCount;
  const bool bulk = prop.major >= 9;
  const size_t l2 = size_t(prop.l2CacheSize);
  int* sink = nullptr;
  CHECK(cudaMalloc(&sink, kThreads * sizeof(int)));
  constexpr size_t kRingBytes = size_t(kStages) * kChunk;
  if (bulk) CHECK(cudaFuncSetAttribute(bulk_read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kRingBytes)));

  // The roofline bench/decode_compare.py divides by: a 2 GiB device-to-device copy, (read + written) / time.
  const size_t copy_bytes = size_t(2) << 30;
  char *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, copy_bytes));
  CHECK(cudaMalloc(&dst, copy_bytes));
  CHECK(cudaMemset(src, 1, copy_bytes));
  const double copy_rate =
      2.0 * copy_bytes / time_best([&] { CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); });
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));
  std::fprintf(stderr, "cold_read: %s, %d SMs, L2 %.1f MB; a 2 GiB copy %.2f TB/s\n", prop.name, sms, l2 / 1e6,
               copy_rate / 1e12);

  constexpr int kRounds = 20;
  const double empty_s = time_best([&] {
                           for (int r = 0; r < kRounds * 8; ++r) empty_kernel<<<sms, 128>>>(sink);
                         }) /
                         (kRounds * 8);
  std::fprintf(stderr, "  an empty kernel back to back: %.2f us\n", empty_s * 1e6);

  struct Row {
    size_t bytes;
    int copies;
    double ldg_s, bulk_s;
  };
  std::vector<Row> rows;
  const double sizes_mb[] = {4.2, 16.8, 33.6, 67.1, 134.2, 268.4, 1073.7};
  for (double mb : sizes_mb) {
    const size_t bytes = size_t(mb * 1e6) / 16 * 16;
    const int copies = int(std::max<size_t>(4, (4 * l2 + bytes - 1) / bytes));
    std::vector<char*> bufs(copies);
    for (auto& b : bufs) {
      CHECK(cudaMalloc(&b, bytes));
      CHECK(cudaMemset(b, 1, bytes));
    }
    const size_t n4 = bytes / 16, slice4 = (n4 + sms - 1) / sms;
    const double ldg = time_best([&] {
                         for (int r = 0; r < kRounds; ++r)
                           for (char* b : bufs)
                             ldg_read_kernel<<<sms, kThreads>>>(reinterpret_cast<const int4*>(b), n4, slice4, sink);
                       }) /
                       (kRounds * copies);
    double blk = 0;
    if (bulk) {
      const size_t slice = (bytes / sms + 15) / 16 * 16;
      blk = time_best([&] {
              for (int r = 0; r < kRounds; ++r)
                for (char* b : bufs) bulk_read_kernel<<<sms, 32, kRingBytes>>>(b, bytes, slice, sink);
            }) /
            (kRounds * copies);
    }
    for (char* b : bufs) CHECK(cudaFree(b));
    rows.push_back({bytes, copies, ldg, blk});
    std::fprintf(stderr, "  %7.1f MB x %2d copies: ldg %8.2f us (%5.1f%% of the copy rate)", bytes / 1e6, copies,
                 ldg * 1e6, bytes / ldg / copy_rate * 100);
    if (bulk) std::fprintf(stderr, ", bulk %8.2f us (%5.1f%%)", blk * 1e6, bytes / blk / copy_rate * 100);
    std::fprintf(stderr, "\n");
  }

  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("{\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"l2_bytes\": %zu,\n", prop.name, sms, l2);
  std::printf("  \"cuda_driver\": %d,\n  \"cuda_runtime\": %d,\n", driver, runtime);
  std::printf("  \"copy_bytes_per_s\": %.4e,\n  \"empty_kernel_s\": %.4e,\n  \"reads\": [", copy_rate, empty_s);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("%s\n    {\"bytes\": %zu, \"copies\": %d, \"ldg_s\": %.4e, \"ldg_of_copy_rate\": %.4f", i ? "," : "",
                r.bytes, r.copies, r.ldg_s, r.bytes / r.ldg_s / copy_rate);
    if (bulk) std::printf(", \"bulk_s\": %.4e, \"bulk_of_copy_rate\": %.4f", r.bulk_s, r.bytes / r.bulk_s / copy_rate);
    std::printf("}");
  }
  std::printf("\n  ],\n  \"method\": \"a kernel a buffer, buffers (together >= 4 L2s) read in turn 20 rounds, events "
              "around all: the time a kernel; ldg: one CTA of %d threads an SM, ld.global.cg, %d 16-byte loads a "
              "thread in flight; bulk: one CTA an SM, %d cp.async.bulk copies of %u bytes in flight; best of 5 after a "
              "warm-up, clocks not locked\"\n}\n",
              kThreads, kUnroll, kStages, kChunk);
  CHECK(cudaFree(sink));
  return 0;
}
