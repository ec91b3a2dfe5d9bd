// The Hopper instructions fa3 is built from, one small wrapper each (sm_90a): mbarriers, the bulk tensor
// copy engine (TMA), warpgroup MMA (wgmma) fences and shared-memory descriptors, named barriers and
// register reallocation. Every wrapper is the PTX instruction of its name; the PTX ISA's sections are
// named beside them.
#pragma once
#include <cuda.h>  // CUtensorMap (a type only: the driver is reached through the runtime, see tensor_maps.cpp)

#include <cstdint>

namespace flashlab::gpu::fa3 {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier"): a 64-bit
// shared-memory object whose phase completes when `count` threads have arrived and every byte a copy
// promised with expect_tx has landed. Waiters name the parity of the phase they wait for.
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
// Makes the initialised barriers visible to the copy engine (the async proxy) and to the other threads.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::); }

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)));
}
// `count` arrivals at once (sm_90): the producer's on behalf of consumer warps that skip a block (forward kOwnEnds).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
// Arrive and announce `bytes` that copies will deliver before this phase can complete.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes));
}
// Blocks until the phase of parity `parity` has completed (a fresh barrier counts parity 1 as done).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra LAB_WAIT;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity));
}

// ---- bulk tensor copy (PTX ISA "cp.async.bulk.tensor"): a box of a tensor described by a tensor map
// (a CUtensorMap, passed as a __grid_constant__ kernel parameter) lands in shared memory, swizzled as
// the map says, and completes its bytes on `bar`. Coordinates are in elements, innermost first; a box
// that crosses the tensor's edge is filled with zeros (and still counts its whole size).
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// The other way (PTX ISA "cp.async.bulk.tensor", .global.shared::cta): a box of shared memory, swizzled as the
// map says, out to the tensor, in this thread's bulk group (bulk_commit, bulk_wait_read and bulk_wait below);
// the parts of the box past the tensor's edge are not written.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- bulk copies without a tensor map (PTX ISA "cp.async.bulk", "cp.reduce.async.bulk"): `bytes` (a
// multiple of 16, both addresses 16-byte aligned) of contiguous memory. The load completes its bytes on
// `bar`, as a tensor copy does. The reduction adds fp32 shared memory into global memory element by
// element (atomically with respect to other reductions) and belongs to this thread's bulk group:
// bulk_commit closes the group, bulk_wait_read<N> returns once at most N groups may still read their
// shared memory (it may be written again), bulk_wait<N> once at most N are still in flight at all.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void bulk_reduce_add(float* dst, const float* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                   reinterpret_cast<uint64_t>(dst)),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- proxy fences (PTX ISA "membar / fence"): shared memory this thread wrote with ordinary stores
// becomes visible to the async proxy (wgmma operands, bulk copies out of shared memory) once it has
// fenced and the readers have met it at a barrier; the global variant orders this thread's global
// accesses with the async proxy's (a bulk reduction's writes and the flag that says they are done).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void fence_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

// ---- warpgroup MMA (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions").
// wgmma_fence orders this warpgroup's register and shared-memory writes before the wgmmas that read
// them; commit closes a group of issued wgmmas; wait<N> blocks until at most N groups are in flight.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// An accumulator the wgmmas in flight write: the compiler must not read or move it before the wait.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

// The shared-memory matrix descriptor of a wgmma operand ("Matrix Descriptor Format") for a tile stored
// with the 128-byte swizzle the copy engine writes: rows of 64 16-bit elements (128 bytes), 8-row atoms
// of 1024 bytes, the atom 1024-byte aligned. `stride_bytes` steps between 8-row atoms along the
// dimension the rows run in, `leading_bytes` between 64-element column blocks (read only when one wgmma
// spans several: an N-major B wider than 64).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t smem_addr, uint32_t leading_bytes, uint32_t stride_bytes) {
  uint64_t d = (smem_addr & 0x3FFFF) >> 4;
  d |= uint64_t((leading_bytes >> 4) & 0x3FFF) << 16;
  d |= uint64_t((stride_bytes >> 4) & 0x3FFF) << 32;
  d |= uint64_t(1) << 62;  // swizzle mode 1: 128 bytes
  return d;
}

// A descriptor `bytes` (a multiple of 16) further along shared memory: its start address field (bits 0-13,
// the address / 16) moved; every address stays below 256 KiB, so nothing carries into the other fields.
__device__ __forceinline__ uint64_t desc_plus(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// `x` as lane 0 holds it, known to the compiler to be the same in every lane of the warp: ptxas keeps a
// value in uniform registers (where wgmma reads its descriptors) only where it can tell so, and a value
// loaded from memory, or carried around a loop whose bounds were, it cannot. Shared-memory addresses and
// wgmma descriptors derived from uniform values are then computed on the uniform datapath instead of in
// general registers with a move each (R2UR) before every wgmma (gpu/HISTORY.md, fa3 forward v15 and v16).
// Every lane of the warp must call it.
__device__ __forceinline__ int warp_uniform(int x) { return __shfl_sync(0xffffffff, x, 0); }
// threadIdx.x / n, warp-uniform (the warpgroup index: +1-5% at d = 256, forward v15).
__device__ __forceinline__ int warp_uniform_index(int n) { return warp_uniform(int(threadIdx.x) / n); }

// With kFresh, `x` as far as the compiler knows made anew here: a GEMM's k-step descriptors derived from it
// are computed where they are issued instead of being hoisted out of the tile loop and held in registers
// (the forward at d = 256 held 32 for the 16 k-steps of S = Q K^T, and its consumers spilled in the main
// loop). Without, `x` as it is: the compiler may hoist (where registers are to spare, and the kernels were
// measured so).
template <bool kFresh>
__device__ __forceinline__ uint64_t fresh(uint64_t x) {
  if constexpr (kFresh) asm volatile("" : "+l"(x));
  return x;
}

__device__ __forceinline__ int fresh(int x) {  // an int made anew: the compiler cannot reuse a value it held before
  asm volatile("" : "+r"(x));
  return x;
}

// A 32-bit store to shared memory at a byte address (smem_u32).
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// ---- named barriers (PTX ISA "bar.sync"): a subset of the CTA's warps meet at barrier `id` (1..15;
// 0 is __syncthreads'); arrive signals without waiting.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- register reallocation (PTX ISA "setmaxnreg"): a warpgroup gives registers back to the SM's pool
// (the producer, which only issues copies) or takes them (the consumers, which hold S, P and O).
template <int N>
__device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

}  // namespace flashlab::gpu::fa3
