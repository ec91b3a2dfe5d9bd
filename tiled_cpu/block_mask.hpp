// BlockMask: the mask at tile granularity, computed once from the mask function.
//
// For one batch entry and one tiling it says, for every tile (Q block i, K/V
// block j) of the Tr x Tc grid, whether
//   skipped  no (query, key) pair of the tile is visible        -> not computed, K_j/V_j not loaded
//   full     every pair is visible                               -> computed, no element mask
//   partial  some are                                            -> computed, element mask applied
// The Schedule owns one and asks it for every classification; the executor,
// the stepper, the simulator's grids and the visualizer see it through the
// Schedule. All heads share it: a tile is skipped when every head skips it and
// full when every head sees all of it (only a 4-d dense mask differs by head).
//
// How it is found:
//   interval masks (all built-in kinds, mask.hpp): each row sees one interval whose edges never move left,
//     so a Q block sees one run of K/V blocks, found from its first and last row, and a tile is full when
//     its last row starts at or before the tile and its first row ends at or after it. O(Tr + Tc) memory.
//   a dense mask: every bit is read once and each tile's kind stored (Tr x Tc bytes); a Q block's blocks can
//     have holes (skipped tiles between computed ones).
// kv_begin(i), kv_end(i) are the first and one past the last non-skipped K/V block of Q block i (its
// hull); with holes, a walk over the hull meets skipped tiles inside it.
//
// compress() gives FlexAttention's form for a GPU kernel: per Q block, the count and indices of its full
// K/V blocks and, separately, of its partial ones.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "flashlab/problem.hpp"
#include "tiling.hpp"

namespace flashlab::tiled {

// full: every element visible; partial: some masked; skipped: none visible.
enum class TileKind : uint8_t { full, partial, skipped };
std::string to_string(TileKind kind);

class BlockMask {
 public:
  BlockMask(const Problem& problem, int64_t batch_index, Tiling tiling);

  int64_t Tr() const { return Tr_; }
  int64_t Tc() const { return Tc_; }
  TileKind kind(int64_t i, int64_t j) const;
  int64_t kv_begin(int64_t i) const { return kv_range_[i].first; }
  int64_t kv_end(int64_t i) const { return kv_range_[i].second; }
  int64_t q_begin(int64_t j) const { return q_range_[j].first; }
  int64_t q_end(int64_t j) const { return q_range_[j].second; }
  // Whether some line has a skipped tile inside its [begin, end): only a dense mask can.
  bool has_holes() const { return holes_; }
  // Non-skipped tiles, and their share of the Tr x Tc grid weighted by tile area (1: no mask; what the
  // mask saves in FLOPs at tile granularity is 1 - density).
  int64_t computed_tiles() const;
  double density() const;

 private:
  Problem problem_;
  int64_t b_, sq_, sk_, Tr_, Tc_;
  Tiling tiling_;
  std::vector<std::pair<int64_t, int64_t>> kv_range_, q_range_;
  std::vector<TileKind> grid_;  // dense masks only: Tr x Tc, row-major
  bool holes_ = false;
};

// FlexAttention's compressed block mask, per Q block i (rows of Tc entries, the first count[i] used):
//   full_count[i],    full_index[i * Tc + n]     the full K/V blocks of Q block i, ascending
//   partial_count[i], partial_index[i * Tc + n]  the partial ones, ascending
// A kernel runs the full blocks without an element mask and the partial ones with it, and never
// touches the rest.
struct CompressedBlockMask {
  int64_t Tr = 0, Tc = 0;
  std::vector<int32_t> full_count, full_index;        // (Tr), (Tr, Tc)
  std::vector<int32_t> partial_count, partial_index;  // (Tr), (Tr, Tc)
};
CompressedBlockMask compress(const BlockMask& mask);

// The Q blocks in the order a persistent kernel hands them out under a mask: the longest walk first (its
// computed tiles, summed over the batch entries whose masks differ), ties by the later block first (the
// causal order, which is longest first for causal and prefix-LM masks but not for documents, whose walks
// follow their documents' lengths). Handing the long tiles out first lets the short ones fill the end, so
// the CTAs finish together (longest processing time first). fa3's tile scheduler walks this order under a
// mask function (gpu/fa3/scheduler.cuh).
std::vector<int32_t> longest_first(const Problem& problem, Tiling tiling);
// The same order from each Q block's walk (computed tiles), where a caller has counted them already.
std::vector<int32_t> longest_first(const std::vector<int64_t>& walk);
// The K/V blocks in the same way, for a backward whose CTAs each own a K/V block (fa2's dK/dV kernel walks
// the Q blocks that see it): the longest walk first, ties by the earlier block first (the causal order
// for columns, longest first for causal and prefix-LM masks). From the columns' walks, or counted here.
std::vector<int32_t> longest_first_columns(const std::vector<int64_t>& walk);
std::vector<int32_t> longest_first_columns(const Problem& problem, Tiling tiling);
// Each line's walk, its computed tiles summed over the batch entries whose masks differ: the Q blocks'
// (by_q) or the K/V blocks'.
std::vector<int64_t> line_walks(const Problem& problem, Tiling tiling, bool by_q);

}  // namespace flashlab::tiled
