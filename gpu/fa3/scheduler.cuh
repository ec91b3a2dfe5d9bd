// fa3's tile scheduler: the persistent CTAs (one an SM) take tiles (Q block, head, batch) round-robin,
// CTA b taking tiles b, b + gridDim.x, b + 2 gridDim.x, ... The producer and the consumers of a CTA walk
// the same sequence, so no tile index passes between them.
//
// Order: a head's Q blocks are adjacent, so the CTAs in flight share that head's K and V through L2.
// Under a causal mask the last (longest) Q block of a head comes first: long tiles start early and the
// short ones fill the tail.
#pragma once

namespace flashlab::gpu::fa3 {

struct Tile {
  int m_block, head, batch;
};

struct TileScheduler {
  int num_m, heads, batch;  // Q blocks (of the longest sequence), query heads, batch entries
  bool longest_first;       // causal: a head's Q blocks from the last

  __host__ __device__ int count() const { return num_m * heads * batch; }
  __device__ Tile at(int t) const {
    const int mi = t % num_m, bh = t / num_m;
    return {longest_first ? num_m - 1 - mi : mi, bh % heads, bh / heads};
  }
};

}  // namespace flashlab::gpu::fa3
