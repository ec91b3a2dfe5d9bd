// fa3's producer: one thread of warpgroup 0 issues every bulk tensor copy (TMA) of the kernel.
#pragma once
#include "smem.cuh"

namespace flashlab::gpu::fa3 {

// One thread of warpgroup 0 feeds every tile's Q and its K/V blocks through the stages. The blocks are
// those the consumers will walk, in their order: a run of key_blocks, or with kMask (a mask function,
// params.hpp mask_lo / mask_hi) the run its row intervals give, or under a dense mask the Q block's list
// (sequence.cuh BlockWalk: partial blocks, then full ones), so that stage `it % kStages` holds the same
// block on both sides. A packed tile (scheduler.cuh PackGQA) walks the blocks of its positions. Under
// FP8 V's map is V^T's (fa3_fwd.cu vt_map: keys, head dim, batch x kv head).
template <class S, typename T, bool kMask, bool kPack>
__device__ void produce(Smem<S, T>& sm, const AttentionParams& p, const TileScheduler& sched,
                        const CUtensorMap* map_q, const CUtensorMap* map_k, const CUtensorMap* map_v) {
  using M = Smem<S, T>;
  constexpr int D = S::D, kBc = S::kBc, kBr = S::kBr, kStages = S::kStages;
  constexpr uint32_t kQBytes = kBr * D * sizeof(T), kKVBytes = kBc * D * sizeof(T);
  constexpr bool kFromEnd = fa3_forward_q_blocks_from_end(kMask, kBr, kBc);  // scheduler.cuh first_row
  constexpr bool kOwnEnds = kOwnWalkEnds<kMask, kPack>(kBr, kBc);
  const int group = p.heads_q / p.heads_kv;
  int it = 0, tile_it = 0;  // K/V blocks and tiles issued so far: the stage and the mbarrier parities
  int t = blockIdx.x;
  for (int k = 0;; ++k) {
    const int slot = k & 1;
    mbar_wait(&sm.tile_empty[slot], ((k >> 1) & 1) ^ 1);  // every consumer warp has read this slot
    sm.tile[slot] = t;
    mbar_arrive(&sm.tile_full[slot]);
    if (t >= sched.count()) break;
    const Tile tile = sched.at(t);
    t = sched.next(t);  // asked for now, so that the answer is back when it is needed
    const Sequence seq = sequence_of(p, tile.batch);
    const int rows = sched.rows<kBr, kPack>();  // positions (kBr unpacked)
    if (!TileScheduler::in_sequence(tile.m_block, rows, seq.sq)) continue;  // varlen: past this sequence's end
    const TileScheduler::TileRows tr = TileScheduler::tile_rows<kFromEnd>(tile.m_block, rows, seq.sq);
    const int row0 = tr.row0;
    const auto blocks = kMask ? key_blocks<kBr, kBc>(row0, row_mask<true>(p, seq, tile.batch))
                              : key_blocks<kBc>(tr.first, tr.count, seq.sq, seq.sk, p.window_left,
                                                p.window_right);
    const BlockWalk walk = kMask ? block_walk(p.fa3_blocks, tile.batch, tile.m_block, blocks.begin, blocks.end)
                                 : BlockWalk{};
    // The walk's steps [x0, x1): block x itself (the run, as before masks), or the walk's block x (kMask).
    const int x0 = kMask ? 0 : blocks.begin, x1 = kMask ? walk.count : blocks.end;
    // kOwnEnds (consumer.cuh): the consumer warps a block is past the walk of, whose arrivals on its stage's
    // "empty" barriers this thread makes for them once the load is issued (the stage's use before has completed
    // then, so they count towards this one). The last warpgroup's walk is the tile's; the others' ends, made once a
    // tile (a warpgroup's walk ends no later than the next one's).
    int ends[S::kConsumers - 1];
    if constexpr (kOwnEnds)
#pragma unroll
      for (int w = 0; w + 1 < S::kConsumers; ++w)
        ends[w] = TileScheduler::own_end<kBc>(row0, w, seq.sq, seq.sk, p.window_right, x0, x1);
    auto skipping_warps = [&](int x) {
      uint32_t warps = 0;
#pragma unroll
      for (int w = 0; w + 1 < S::kConsumers; ++w) warps += ends[w] <= x ? 4 : 0;
      return warps;
    };
    // The tensor maps' rows: batch and sequence folded into rows (fixed length), or the packed rows (varlen).
    // Q's box is `rows` rows of sched.pack heads from tile.head (fa3_fwd.cu's map_q).
    const int kv_head = tile.head / group, k_rows = int(seq.k_row_base);

    // Q into its buffer once the tile that last used it has done its last S = Q K^T (with two buffers the tile
    // before the previous one: the load goes out while the previous tile's last blocks run).
    const int qb = tile_it % M::kQBuffers;
    mbar_wait(&sm.q_empty[qb], ((tile_it / M::kQBuffers) & 1) ^ 1);
    mbar_arrive_expect_tx(&sm.q_full[qb], kQBytes);
#pragma unroll
    for (int c = 0; c < M::kChunks; ++c)
      tma_load_3d(&sm.q[qb][c][0][0], map_q, &sm.q_full[qb], c * M::kRow, int(seq.row_base) + row0, tile.head);
    for (int x = x0; x < x1; ++x, ++it) {
      const int j = kMask ? walk.block(x) : x;
      const int s = it % kStages, parity = (it / kStages) & 1;
      mbar_wait(&sm.k_empty[s], parity ^ 1);
      mbar_arrive_expect_tx(&sm.k_full[s], kKVBytes);
#pragma unroll
      for (int c = 0; c < M::kChunks; ++c)
        tma_load_3d(&sm.k[s][c][0][0], map_k, &sm.k_full[s], c * M::kRow, k_rows + j * kBc, kv_head);
      const uint32_t skipping = kOwnEnds ? skipping_warps(x) : 0;
      if (kOwnEnds && skipping) mbar_arrive(&sm.k_empty[s], skipping);
      mbar_wait(&sm.v_empty[s], parity ^ 1);
      // O in V (smem.cuh kOInV): the tile before's O, staged in both V stages, read out by its stores first.
      if constexpr (kOInV<S, T>)
        if (x == x0 && tile_it > 0) mbar_wait(&sm.o_free, (tile_it - 1) & 1);
      mbar_arrive_expect_tx(&sm.v_full[s], kKVBytes);
#pragma unroll
      for (int c = 0; c < M::kVChunks; ++c) {
        if constexpr (M::kVt)  // V^T of this batch entry's kv head: keys along the row, head-dim rows
          tma_load_3d(&sm.v[s][c][0][0], map_v, &sm.v_full[s], j * kBc + c * M::kRow, 0,
                      tile.batch * p.heads_kv + kv_head);
        else
          tma_load_3d(&sm.v[s][c][0][0], map_v, &sm.v_full[s], c * M::kRow, k_rows + j * kBc, kv_head);
      }
      if (kOwnEnds && skipping) mbar_arrive(&sm.v_empty[s], skipping);
    }
    ++tile_it;
  }
  sched.finish();
}

}  // namespace flashlab::gpu::fa3
