// fa3's tile shape and shared-memory layout: what the producer and the consumers agree on.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "../params.hpp"
#include "../shapes.hpp"
#include "../sequence.cuh"
#include "ptx.cuh"
#include "scheduler.cuh"

namespace flashlab::gpu::fa3 {

// Registers a thread after the split (setmaxnreg) of a CTA of one producer and kConsumers consumer
// warpgroups. The CTA starts with 65536 / kThreads a thread, rounded down to 8, and setmaxnreg only moves
// registers within it: the consumers' increase waits until the producer's decrease has freed them, so both
// must add up to the same total (producer 32 / consumers 240 with two consumers asks for 1024 more, and
// the kernel hangs on an H100). The forward's and the backward's shapes (bwd_smem.cuh) both derive from it.
template <int kConsumers, int kProducerRegs_>
struct RegisterSplit {
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = kProducerRegs_;
  static constexpr int kConsumerRegs = (kLaunchRegs * kThreads - 128 * kProducerRegs) / (128 * kConsumers);
  static_assert(kConsumerRegs % 8 == 0 && 128 * kProducerRegs + 128 * kConsumers * kConsumerRegs ==
                                              kLaunchRegs * kThreads,
                "setmaxnreg must move registers, not add them");
};

// A kernel's tile shape: D the (padded) head dim, kBc keys a K/V block, kStages K/V buffers,
// kConsumers consumer warpgroups of 64 query rows each.
template <int D_, int kBc_, int kStages_, int kConsumers_>
struct Shape : RegisterSplit<kConsumers_, kConsumers_ == 2 ? 24 : 32> {
  static constexpr int D = D_, kBc = kBc_, kStages = kStages_;
  static constexpr int kConsumers = kConsumers_;
  static constexpr int kBr = 64 * kConsumers;
  static constexpr int kConsumerWarps = 4 * kConsumers;
};

// Where shared memory holds them (D <= 128: gpu/shapes.hpp fa3_forward_stages_o): two Q buffers, so that the
// next tile's Q lands while this one's last blocks run, and a buffer O goes out through (epilogue.cuh). Q's
// release and O's stores had been a tile's waits (forward v19).
template <class S, typename T>
constexpr bool kStagedTiles = fa3_forward_stages_o(S::D);
// Elsewhere (D = 256) O is staged in V's stages instead, warpgroup w's 64 rows in the stage of the tile's block
// `kStages - w` from its last, once both warpgroups' P V have read it (epilogue.cuh); the producer loads the next
// tile's first V after Smem::o_free, where the stores have read them. Either way O leaves by bulk tensor stores
// where a tile allows.
template <class S, typename T>
constexpr bool kOInV = !kStagedTiles<S, T>;

// O's element type: the input's, or bf16 under FP8.
template <typename T>
using OutType = std::conditional_t<sizeof(T) == 1, __nv_bfloat16, T>;

// O's staging buffer, as a base of Smem: none (no bytes, the layout as before) where kStagedTiles is false.
template <bool kOn, typename T, int kChunks, int kRows, int kRow>
struct OStaging {
  T o[kChunks][kRows][kRow];
};
template <typename T, int kChunks, int kRows, int kRow>
struct OStaging<false, T, kChunks, kRows, kRow> {};

// Shared memory: every tile as blocks of 128-byte rows (64 columns of a 16-bit type, 128 of FP8), as the
// copy engine's 128-byte swizzle lays them (each block 1024-byte aligned: the swizzle is a function of
// the address). V as loaded, Bc rows of D, read N-major by O += P V; under FP8, whose wgmma reads B only
// K-major, V^T: D rows of Bc keys (fa3_fwd.cu's transpose writes it).
template <class S, typename T>
struct Smem : OStaging<kStagedTiles<S, T>, OutType<T>, S::D / 64, S::kBr, 64> {
  static constexpr int kORow = 64, kOChunks = S::D / kORow;  // O's staging: 128-byte rows of its 16-bit type
  static constexpr int kRow = 128 / int(sizeof(T));  // elements in a 128-byte row
  static constexpr int kChunks = S::D / kRow;        // 128-byte blocks of a Q or K row
  static constexpr int kQBuffers = kStagedTiles<S, T> ? 2 : 1;
  static constexpr bool kVt = sizeof(T) == 1;
  static constexpr int kVChunks = kVt ? S::kBc / kRow : kChunks, kVRows = kVt ? S::D : S::kBc;
  static_assert(S::D % kRow == 0 && (!kVt || S::kBc % kRow == 0), "rows of whole 128-byte blocks");
  T q[kQBuffers][kChunks][S::kBr][kRow];
  T k[S::kStages][kChunks][S::kBc][kRow];
  T v[S::kStages][kVChunks][kVRows][kRow];
  uint64_t q_full[kQBuffers], q_empty[kQBuffers];
  uint64_t k_full[S::kStages], k_empty[S::kStages], v_full[S::kStages], v_empty[S::kStages];
  int tile[2];                           // the tile indices the producer hands the consumers
  uint64_t tile_full[2], tile_empty[2];  // a slot written / read by every consumer warp
  uint64_t o_free;  // kOInV: a tile's O out of V's stages (one arrival a consumer warpgroup, staged or not)
  static_assert(!kOInV<S, T> || (S::kStages == 2 && S::kConsumers == 2 && kQBuffers == 1 &&
                                 sizeof(v[0]) >= 64 * S::D * sizeof(OutType<T>)),
                "O in V: a warpgroup's 64 rows in each of the two stages, and the producer's o_free wait one tile "
                "behind (a single Q buffer keeps the consumers within a tile of it)");
};

}  // namespace flashlab::gpu::fa3
