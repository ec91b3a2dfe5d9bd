// fa3's tile scheduler: the persistent CTAs (one an SM) take tiles (Q block, head, batch) in the order
// below, CTA b first taking tile b. Without a mask every tile is as long and CTA b goes on with
// b + gridDim.x, b + 2 gridDim.x, ...; under a causal mask (or a mask function, whose tiles are as
// unequal: fa3_fwd.cu's launch says why in this order) it takes whichever tile is next when it asks
// (an atomic counter), so that a CTA that drew short tiles takes more of them and the CTAs finish
// together (a static deal balances such tiles to 0.55-0.9 of the ideal makespan, by a count of its
// rounds, and measured 0.75-0.98x of this one). The producer asks and passes each tile index to the
// consumers through shared memory (a two-slot ring of mbarriers, smem.cuh).
//
// Order: without a mask every tile is as long; a head's Q blocks are adjacent, so the CTAs in flight
// share that head's K and V through L2. Under a causal mask a tile's length grows with its Q block, and
// the tiles go longest first within even sections of (batch, head) pairs whose K and V fit in half the L2
// (gpu/tile_order.hpp; FA3's scheduler does the same): inside a section Q block by Q block from the last,
// every pair of the section inside, so that a round of gridDim.x tiles is of nearly one length and the
// section's K/V, read again by every round, stays in L2. (Longest first over all heads at once measured
// 0.78-0.94x at s = 1k-4k: every CTA of a round then reads another head's K/V from DRAM.) Under a mask
// function "from the last" is longest first for prefix-LM but not for documents, whose walks follow their
// documents' lengths: there the Q blocks go in m_order, the mask's own longest-first order.
//
// PackGQA (params.hpp PackGqa; FA3's pack_gqa): with pack = the group size, a tile is every query head of
// one kv head at kBr / pack positions, head-major (the Q box lands heads outermost: packed row r is query
// head tile.head + r / rows, position row0 + r % rows), so that a short query sequence fills the tile and
// K/V is read once for the whole group. The walk of key blocks is that of `rows` positions.
//
// Where a tile's rows start (first_row): where a Q block spans more rows than a key block and no mask
// function is read (shapes.hpp fa3_forward_q_blocks_from_end), the Q blocks are counted from the sequence's
// end, so that where sq is not a multiple of the block the ragged block is the first, rows [-(padding),
// rows - padding), not the last. Under a causal mask or a window the first block's walk is the shortest and
// the last's the longest; the padded rows cost a whole block's GEMMs at every step of their walk, so a
// ragged last block pays them over the longest walk and a ragged first block over the shortest (d = 64's
// 192-row tiles at s = 1k causal: 27 steps of 128 keys against 32). Rows before 0 are loaded (zeros by the
// copy engine, or the previous batch entry's rows), neither walked for nor written, and, unpacked, not
// computed either: there each consumer warpgroup walks only the blocks its own 64 rows see (own_end; none
// before the sequence), so that a tall tile's first rows skip the causal diagonal's last block or two.
#pragma once
#include "../mask.cuh"
#include "../shapes.hpp"
#include "../tile_order.hpp"

namespace flashlab::gpu::fa3 {

// Whether each consumer warpgroup ends its walk at its own rows' last key block (TileScheduler::own_end), the
// producer releasing the stages of the blocks past it: the tiles counted from the sequence's end (taller than a
// key block, no mask function: d = 64's 192 x 128, d = 256's 128 x 80), not packed (a packed tile's rows mix
// heads' positions).
template <bool kMask, bool kPack>
constexpr bool kOwnWalkEnds(int block_m, int block_n) {
  return fa3_forward_q_blocks_from_end(kMask, block_m, block_n) && !kPack;
}

struct Tile {
  int m_block, head, batch;  // head: the tile's first query head (packed: the group's first)
};

struct TileScheduler {
  int num_m, heads, batch;  // Q blocks (of the longest sequence), head units (query heads / pack), entries
  int pack;                 // query heads a tile: 1, or the group's size (PackGQA)
  bool longest_first;       // causal or a mask function: dynamic, a section's Q blocks from the last
  int sections;             // sections of (batch, head) pairs (longest_first only; tile_order.hpp)
  int* counter;             // device: [0] tiles handed out after the first gridDim.x, [1] CTAs finished;
                            // both zero at launch, and the last CTA to finish sets them back to zero
  const int* m_order = nullptr;  // longest_first under a mask function: the Q blocks, longest walk first
                                 // (tiled::longest_first); null: from the last (causal)

  // The tile after this CTA's current tile t (count() or more: none left).
  __device__ int next(int t) const { return longest_first ? gridDim.x + atomicAdd(counter, 1) : t + gridDim.x; }
  // After this CTA's last `next`: the last CTA to get here resets the counters for the next launch on
  // this stream (every fetch of this launch is done by then).
  __device__ void finish() const {
    if (!longest_first) return;
    __threadfence();
    if (atomicAdd(counter + 1, 1) == int(gridDim.x) - 1) {
      counter[0] = 0;
      counter[1] = 0;
    }
  }

  __host__ __device__ int count() const { return num_m * heads * batch; }
  __device__ Tile at(int t) const {
    if (longest_first) {
      const DealtTile d = longest_first_tile(t, num_m, heads * batch, sections, m_order);
      return {d.line, d.pair % heads * pack, d.pair / heads};
    }
    const int mi = t % num_m, bh = t / num_m;
    return {mi, bh % heads * pack, bh / heads};
  }
  // Positions (query rows of one head) a tile of kBr rows covers; kPack: the kernels compiled for packed
  // tiles (the others keep kBr a constant).
  template <int kBr, bool kPack>
  __host__ __device__ int rows() const { return kPack ? kBr / pack : kBr; }
  // Whether Q block m_block (of `rows` positions) has rows in a sequence of sq (varlen: the longest
  // sequence's blocks are handed out to every entry).
  __device__ static bool in_sequence(int m_block, int rows, int sq) { return m_block * rows < sq; }
  // Its first position: counted from the sequence's end where kFromEnd (shapes.hpp
  // fa3_forward_q_blocks_from_end), negative for a ragged first block.
  template <bool kFromEnd>
  __device__ static int first_row(int m_block, int rows, int sq) {
    return m_block * rows - (kFromEnd ? (rows - sq % rows) % rows : 0);
  }
  // Its positions from row0, and the `count` from `first` that are in the sequence's start: the rows its walk
  // of key blocks is for (the producer's and the consumers', alike).
  struct TileRows {
    int row0, first, count;
  };
  template <bool kFromEnd>
  __device__ static TileRows tile_rows(int m_block, int rows, int sq) {
    const int row0 = first_row<kFromEnd>(m_block, rows, sq);
    if constexpr (!kFromEnd) return {row0, row0, rows};
    const int first = max(row0, 0);
    return {row0, first, row0 + rows - first};
  }
  // The end of consumer warpgroup wg's own walk within its tile's [x0, x1) of key blocks of kBc: the blocks its
  // 64 rows see (causal or a window: the first rows' keys end before the last rows' where the tile is taller than
  // a key block), none where they all lie before the sequence (a ragged tile counted from the end). The rows end
  // at the sequence's end or before (a tile counted from its end). The forward's kOwnEnds (consumer.cuh).
  template <int kBc>
  __device__ static int own_end(int row0, int wg, int sq, int sk, int right, int x0, int x1) {
    const int last = row0 + wg * 64 + 63;
    const int hi = last < 0 ? 0 : col_end(min(last, sq - 1), sq, sk, right);
    return max(x0, min(x1, (hi + kBc - 1) / kBc));
  }
};

}  // namespace flashlab::gpu::fa3
