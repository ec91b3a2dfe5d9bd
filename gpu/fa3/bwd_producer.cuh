// fa3 backward's producer: warp 0 of warpgroup 0, whose first lane issues every load of the CTA by the
// copy engine (the whole warp meets the consumers at the stages' barriers).
#pragma once
#include "bwd_smem.cuh"

namespace flashlab::gpu::fa3 {

// K_j and V_j once (kv_full), then each step's Q_i, dO_i (tensor maps) and the rows' LSE2 and D (plain
// bulk copies of the padded scratch) into stage t % 2, all four completing on full[stage]; a stage is
// refilled once every consumer has arrived on its barrier kStageEmpty + stage (its GEMMs are done with it).
template <class S, typename T>
__device__ void produce_bwd(BwdSmemOf<S, T>& sm, const BackwardParams& p, const BwdScratch& sc, const Sequence& seq,
                            const BwdWalk<S::kBr, S::kBc>& walk, int j, int g, int b, const CUtensorMap* map_q,
                            const CUtensorMap* map_k, const CUtensorMap* map_v, const CUtensorMap* map_do) {
  constexpr int kBr = S::kBr, kBc = S::kBc;
  constexpr uint32_t kKVBytes = 2 * kBc * S::D * sizeof(T);
  constexpr uint32_t kStepBytes = 2 * kBr * S::D * sizeof(T) + 2 * kBr * sizeof(float);
  if (walk.steps == 0) return;  // no query row sees these keys: the consumers store zeros
  const bool leader = threadIdx.x % 32 == 0;
  if (leader) {
    mbar_arrive_expect_tx(&sm.kv_full, kKVBytes);
    const int k_row = int(seq.k_row_base) + j * kBc;
#pragma unroll
    for (int c = 0; c < S::kChunks; ++c) {
      tma_load_3d(&sm.k[c][0][0], map_k, &sm.kv_full, c * 64, k_row, g);
      tma_load_3d(&sm.v[c][0][0], map_v, &sm.kv_full, c * 64, k_row, g);
    }
  }
  const int64_t first = block_start<kBr>(p, b);
  for (int t = 0; t < walk.steps; ++t) {
    const int st = t % S::kStages, h = walk.head(t), i = walk.block(t);
    __syncwarp();
    if (t >= S::kStages) named_sync(kStageEmpty + st, kStageThreads);
    if (!leader) continue;
    mbar_arrive_expect_tx(&sm.full[st], kStepBytes);
    const int q_row = int(seq.row_base) + i * kBr;
#pragma unroll
    for (int c = 0; c < S::kChunks; ++c) {
      tma_load_3d(&sm.q[st][c][0][0], map_q, &sm.full[st], c * 64, q_row, h);
      tma_load_3d(&sm.d_o[st][c][0][0], map_do, &sm.full[st], c * 64, q_row, h);
    }
    const int64_t rows = (int64_t(h) * sc.blocks + first + i) * kBr;
    bulk_load(&sm.lse2[st][0], sc.lse2 + rows, kBr * sizeof(float), &sm.full[st]);
    bulk_load(&sm.dsum[st][0], sc.dsum + rows, kBr * sizeof(float), &sm.full[st]);
  }
}

}  // namespace flashlab::gpu::fa3
