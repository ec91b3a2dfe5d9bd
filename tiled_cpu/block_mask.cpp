#include "block_mask.hpp"

#include <algorithm>

#include "flashlab/enum_names.hpp"
#include "flashlab/error.hpp"

namespace flashlab::tiled {

static const EnumNames<TileKind, 3> kTileKindNames{
    {TileKind::full, "full"}, {TileKind::partial, "partial"}, {TileKind::skipped, "skipped"}};
std::string to_string(TileKind kind) { return enum_name(kTileKindNames, kind); }

BlockMask::BlockMask(const Problem& problem, int64_t batch_index, Tiling tiling)
    : problem_(problem), b_(batch_index), tiling_(tiling) {
  if (tiling.Br <= 0 || tiling.Bc <= 0) throw Error("tile sizes must be positive, got " + tiling.describe());
  sq_ = problem.len_q(b_);
  sk_ = problem.len_k(b_);
  Tr_ = tiling.q_blocks(sq_);
  Tc_ = (sk_ + tiling.Bc - 1) / tiling.Bc;
  kv_range_.assign(Tr_, {0, 0});
  q_range_.assign(Tc_, {0, 0});

  if (!problem.interval_mask()) {
    // A dense mask: read every bit of every head once. seen: some head sees some pair; all: every head
    // sees every pair (pairs outside a row's [col_begin, col_end) are masked whatever the bits say).
    grid_.assign(Tr_ * Tc_, TileKind::skipped);
    std::vector<int64_t> seen(Tr_ * Tc_, 0);
    const int64_t heads = problem.mask.dense->varies_by_head() ? problem.heads_q : 1;  // a 2-d mask: one for all
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < sq_; ++r) {
        int64_t* line = &seen[tiling.q_block_of(r, sq_) * Tc_];
        for (int64_t c = 0; c < sk_; ++c) line[c / tiling.Bc] += problem.visible(b_, h, r, c);
      }
    for (int64_t i = 0; i < Tr_; ++i)
      for (int64_t j = 0; j < Tc_; ++j) {
        const int64_t n = seen[i * Tc_ + j];
        const int64_t all = heads * tiling.q_block(i, sq_).rows * std::min(tiling.Bc, sk_ - j * tiling.Bc);
        grid_[i * Tc_ + j] = n == 0 ? TileKind::skipped : n == all ? TileKind::full : TileKind::partial;
      }
    // Hulls of every line, and whether any has a hole.
    for (int64_t i = 0; i < Tr_; ++i) {
      int64_t lo = Tc_, hi = 0, count = 0;
      for (int64_t j = 0; j < Tc_; ++j)
        if (grid_[i * Tc_ + j] != TileKind::skipped) lo = std::min(lo, j), hi = j + 1, ++count;
      if (count > 0) kv_range_[i] = {lo, hi};
      holes_ |= count > 0 && count != hi - lo;
    }
    for (int64_t j = 0; j < Tc_; ++j) {
      int64_t lo = Tr_, hi = 0, count = 0;
      for (int64_t i = 0; i < Tr_; ++i)
        if (grid_[i * Tc_ + j] != TileKind::skipped) lo = std::min(lo, i), hi = i + 1, ++count;
      if (count > 0) q_range_[j] = {lo, hi};
      holes_ |= count > 0 && count != hi - lo;
    }
    return;
  }

  // Visible columns of a Q block: the union over its rows of [col_begin, col_end).
  // Both edges grow with the row, so the union is one interval, from the first
  // non-empty row's begin to the last non-empty row's end. A row sees nothing
  // only where col_end is clamped at 0, which puts its col_begin at 0 as well:
  // so such rows form a prefix of the sequence, a block with any visible row
  // has its last row visible, and the block's first row gives the union's
  // begin. Two mask evaluations a block, not one a row.
  for (int64_t i = 0; i < Tr_; ++i) {
    const Tiling::Rows rows = tiling.q_block(i, sq_);
    const int64_t first = rows.row0, last = rows.row0 + rows.rows - 1;
    if (problem.col_begin(b_, last) >= problem.col_end(b_, last)) continue;
    const int64_t c0 = problem.col_begin(b_, first), c1 = problem.col_end(b_, last);
    kv_range_[i] = {c0 / tiling.Bc, (c1 + tiling.Bc - 1) / tiling.Bc};
  }
  // The Q blocks that see K/V block j: after the prefix of empty blocks, both ends of kv_range_ grow
  // with i, so those blocks are [lo, hi) with two pointers that only move forward.
  int64_t lo = 0, hi = 0;
  for (int64_t j = 0; j < Tc_; ++j) {
    while (lo < Tr_ && kv_range_[lo].second <= j) ++lo;  // empty blocks ({0, 0}) included
    hi = std::max(hi, lo);
    while (hi < Tr_ && kv_range_[hi].first <= j) ++hi;
    q_range_[j] = lo < hi ? std::pair<int64_t, int64_t>{lo, hi} : std::pair<int64_t, int64_t>{0, 0};
  }
}

TileKind BlockMask::kind(int64_t i, int64_t j) const {
  if (!grid_.empty()) return grid_[i * Tc_ + j];
  if (j < kv_begin(i) || j >= kv_end(i)) return TileKind::skipped;
  const Tiling::Rows rows = tiling_.q_block(i, sq_);
  const int64_t r0 = rows.row0, r1 = rows.row0 + rows.rows;
  const int64_t c0 = j * tiling_.Bc, c1 = std::min(sk_, c0 + tiling_.Bc);
  // Every row sees the whole tile when the last row starts at or before c0
  // and the first row ends at or after c1 (both edges grow with the row).
  const bool full = problem_.col_begin(b_, r1 - 1) <= c0 && problem_.col_end(b_, r0) >= c1;
  return full ? TileKind::full : TileKind::partial;
}

int64_t BlockMask::computed_tiles() const {
  int64_t n = 0;
  for (int64_t i = 0; i < Tr_; ++i) {
    if (!holes_) {
      n += kv_end(i) - kv_begin(i);
      continue;
    }
    for (int64_t j = kv_begin(i); j < kv_end(i); ++j) n += kind(i, j) != TileKind::skipped;
  }
  return n;
}

double BlockMask::density() const {
  double computed = 0;
  for (int64_t i = 0; i < Tr_; ++i)
    for (int64_t j = kv_begin(i); j < kv_end(i); ++j)
      if (kind(i, j) != TileKind::skipped)
        computed += double(tiling_.q_block(i, sq_).rows) * double(std::min(tiling_.Bc, sk_ - j * tiling_.Bc));
  return computed / (double(sq_) * double(sk_));
}

CompressedBlockMask compress(const BlockMask& m) {
  CompressedBlockMask c;
  c.Tr = m.Tr();
  c.Tc = m.Tc();
  c.full_count.assign(c.Tr, 0);
  c.partial_count.assign(c.Tr, 0);
  c.full_index.assign(c.Tr * c.Tc, 0);
  c.partial_index.assign(c.Tr * c.Tc, 0);
  for (int64_t i = 0; i < c.Tr; ++i)
    for (int64_t j = m.kv_begin(i); j < m.kv_end(i); ++j) {
      const TileKind k = m.kind(i, j);
      if (k == TileKind::full) c.full_index[i * c.Tc + c.full_count[i]++] = int32_t(j);
      if (k == TileKind::partial) c.partial_index[i * c.Tc + c.partial_count[i]++] = int32_t(j);
    }
  return c;
}

std::vector<int64_t> line_walks(const Problem& problem, Tiling tiling, bool by_q) {
  const int64_t variants = problem.mask_varies_by_batch() ? problem.batch : 1;
  std::vector<int64_t> walk;
  for (int64_t b = 0; b < variants; ++b) {
    const BlockMask mask(problem, b, tiling);
    walk.resize(size_t(by_q ? mask.Tr() : mask.Tc()), 0);
    for (int64_t line = 0; line < int64_t(walk.size()); ++line) {
      const int64_t begin = by_q ? mask.kv_begin(line) : mask.q_begin(line);
      const int64_t end = by_q ? mask.kv_end(line) : mask.q_end(line);
      for (int64_t x = begin; x < end; ++x)
        walk[size_t(line)] += (by_q ? mask.kind(line, x) : mask.kind(x, line)) != TileKind::skipped;
    }
  }
  return walk;
}

std::vector<int32_t> longest_first(const Problem& problem, Tiling tiling) {
  return longest_first(line_walks(problem, tiling, true));
}

namespace {
// The lines in `order`, stably sorted by their walks, the longest first.
std::vector<int32_t> by_walk(std::vector<int32_t> order, const std::vector<int64_t>& walk) {
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return walk[size_t(a)] > walk[size_t(b)]; });
  return order;
}
}  // namespace

std::vector<int32_t> longest_first(const std::vector<int64_t>& walk) {
  std::vector<int32_t> order(walk.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(order.size() - 1 - i);  // the causal order
  return by_walk(std::move(order), walk);
}

std::vector<int32_t> longest_first_columns(const std::vector<int64_t>& walk) {
  std::vector<int32_t> order(walk.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = int32_t(j);  // the causal order for columns
  return by_walk(std::move(order), walk);
}

std::vector<int32_t> longest_first_columns(const Problem& problem, Tiling tiling) {
  return longest_first_columns(line_walks(problem, tiling, false));
}

}  // namespace flashlab::tiled
