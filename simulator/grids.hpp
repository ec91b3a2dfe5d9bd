// The fused kernels' CTA grids, as the replay (replay.hpp) walks them.
//
// Each grid is built from the Schedule of every batch entry (the same tile
// ranges the tiled executor walks) and the kernel's per-element costs; its
// CTAs come in the order the real kernel hands them out:
//   ForwardGrid   one CTA (or one persistent tile) per (batch, head, Q block i):
//                 loads Q_i, streams K_j, V_j over [kv_begin(i), kv_end(i)),
//                 stores O_i and LSE_i (FA2 forward; FA3 forward with its tile order).
//   BackwardGrid  one CTA per (batch, head, K/V block j): loads K_j, V_j, streams
//                 Q_i, dO_i, LSE_i, D_i over [q_begin(j), q_end(j)) and adds into
//                 dQ's fp32 accumulator rows with atomics, stores dK_j, dV_j (FA2); flashlab's
//                 fa3: one CTA per (batch, kv head, K/V block), the group's query heads in turn, dQ_i
//                 added by one bulk reduction a step (the same read and write of L2).
//   Fa1Grid       FlashAttention-1: one CTA per (batch, head, split of the Q
//                 blocks); K_j, V_j outer, Q_i inner, O_i (with l_i, m_i) read and
//                 written back at every step (Algorithm 1), or Q_i, O_i, dO_i,
//                 l_i, m_i read and dQ_i read and written (Algorithm 4).
// Coarsening: when the pass has more tiles than kMaxSegments (a backward: half of it), a segment (and an
// L2 key) covers G consecutive blocks along the streamed axis; G = 1 otherwise.
// What is lost: the order of blocks inside a chunk, and a CTA whose range ends
// inside a chunk touches the part it uses (L2Cache grows the entry later).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "flashlab/problem.hpp"
#include "replay.hpp"
#include "schedule.hpp"

namespace flashlab::sim {

// Seconds per element of S on one CTA slot: for a full tile, for a tile on the mask's edge.
struct ElementTime {
  double full = 0, partial = 0;
};

// How the tiles of a forward pass are handed to CTAs.
enum class TileOrder {
  fa2,       // FA2's grid (Q block, batch, head): Q blocks of one head consecutive, batch, then heads
  flashlab,  // flashlab's kernels (Q block, head, batch): gpu/fa2_fwd.cu, fa2_bwd.cu's dq kernel, and
             // fa3/scheduler.cuh's tiles without a mask: Q blocks of one head consecutive, heads, then batch
  fa3,  // FA3's persistent scheduler: heads in L2-sized sections, longest Q blocks first if causal
};

// flashlab's kernels under a causal mask (fa3's forward) or a mask function (fa2's forward and dK/dV,
// fa3's forward) deal their tiles as gpu/tile_order.hpp does: the lines (Q blocks forward, K/V blocks
// backward) in `order` (empty: from the last), every (batch, head) pair of a section at each, in
// `sections` even sections (model.cpp flashlab_deal makes it as gpu/launch.cpp's DeviceMask does).
// sections == 0: no deal, the grid's own order.
struct Deal {
  std::vector<int32_t> order;
  int sections = 0;
};

// What a Q-outer CTA loads of its own block at its start and stores at its end, in bytes a row (0: the
// forward's: Q_i in; O_i and its LSE out). The deterministic backward's dq kernel (tiled::Order::dq): Q_i,
// dO_i, LSE_i and D_i in; dQ_i out, in the input dtype.
struct LineBytes {
  double in = 0, out = 0;
};

// reverse: the CTA walks its band from the last block to the first (FA2's and FA3's forward start at the
// diagonal, where the mask is; FA2's backward walks its Q blocks from the last), else from the first.
// input_bytes: bytes an element of Q, K and V (0: the problem's dtype; 1: the FP8 forward's e4m3, O staying
// in the dtype's 2 bytes).
std::unique_ptr<CtaGrid> forward_grid(const Problem& p, const std::vector<tiled::Schedule>& schedules,
                                      ElementTime t, TileOrder order, bool reverse, double l2_section_bytes,
                                      double input_bytes = 0, const Deal& deal = {}, LineBytes line = {});
// How the backward's K/V blocks are handed to CTAs.
enum class BackwardOrder {
  fa2,       // FA2's grid (K/V block, batch, head): a CTA per query head, blockIdx.x fastest
  flashlab,  // gpu/fa2_bwd.cu's dkdv and gpu/fa3/fa3_bwd.cu: grid (K/V block, kv head, batch); a CTA per kv
             // head walks every query head of its group (dK, dV summed inside the CTA), for each its Q blocks
             // from the first
};
// How a backward kernel sums dQ:
//   atomics  FA2, FA3: every CTA adds into a Q block's fp32 rows as it goes, in no fixed order.
//   none     flashlab's fa2 deterministic dkdv kernel: no dQ here (its dq kernel, a Q-outer grid
//            over tiled::Order::dq, writes it).
//   turns    flashlab's fa3 deterministic: a Q block's dQ is added by the K/V blocks that see it from the last
//            down, each after the one before it released the rows (gpu/fa3/bwd_dq_writer.cuh); the grid
//            launches a head's K/V blocks from the last (fa3_bwd.cu), so a CTA waits only on CTAs launched
//            before it. Each segment carries its Turn (replay.hpp); a turn line is a (batch, query head,
//            chunk of Q blocks).
//   rotated  turns, with the walks rotated as fa3 rotates them without a mask where a head's K/V blocks fit
//            on the device at once (gpu/tile_order.hpp rotates_walks, rotated_turn_rank): K/V block j starts
//            at place j mod places, and the turns at a place go by step. Replayed Q block by Q block where
//            the grid is not in chunks; in chunks, each CTA's own turns only (replay.hpp Turn).
enum class DqSum { atomics, none, turns, rotated };
std::unique_ptr<CtaGrid> backward_grid(const Problem& p, const std::vector<tiled::Schedule>& schedules,
                                       ElementTime t, bool reverse, BackwardOrder order = BackwardOrder::fa2,
                                       const Deal& deal = {}, DqSum dq = DqSum::atomics);
// splits: CTAs per (batch, head), each a contiguous range of Q blocks.
std::unique_ptr<CtaGrid> fa1_grid(const Problem& p, const std::vector<tiled::Schedule>& schedules, ElementTime t,
                                  int64_t splits, bool backward);

}  // namespace flashlab::sim
