#include "grids.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "tile_order.hpp"

namespace flashlab::sim {
namespace {

using tiled::Schedule;
using tiled::TileKind;

// One line of tiles (a Q block's K/V blocks, or a K/V block's Q blocks): the visible range
// [b0, b1) and, inside it, the full tiles [f0, f1); an interval mask's partial tiles sit at the two ends.
// Under a dense mask (block_mask.hpp) the range can hold skipped and partial tiles anywhere: then
// `seen` and `partial` hold running sums over [b0, x) of the extents of the computed blocks and of the
// partial ones, and every count below reads them instead.
struct Band {
  int64_t b0 = 0, b1 = 0, f0 = 0, f1 = 0;
  std::vector<int64_t> seen, partial;  // dense masks only: b1 - b0 + 1 entries each
  bool holes() const { return !seen.empty(); }
};

// The extent of the computed blocks among [x0, x1) of a band: `span` of them, less the skipped ones.
template <typename Span>
int64_t computed_span(const Band& b, int64_t x0, int64_t x1, Span span) {
  const int64_t a0 = std::max(x0, b.b0), a1 = std::min(x1, b.b1);
  if (a1 <= a0) return 0;
  return b.holes() ? b.seen[a1 - b.b0] - b.seen[a0 - b.b0] : span(a0, a1);
}

// Rows of Q blocks [x0, x1) or of K/V blocks [x0, x1).
int64_t q_span(const Schedule& s, int64_t x0, int64_t x1) {
  if (x1 <= x0) return 0;
  const tiled::Tiling::Rows last = s.tiling().q_block(x1 - 1, s.seqlen_q());
  return last.row0 + last.rows - s.tiling().q_block(x0, s.seqlen_q()).row0;
}
int64_t kv_span(const Schedule& s, int64_t x0, int64_t x1) {
  return x1 <= x0 ? 0 : std::min(x1 * s.tiling().Bc, s.seqlen_k()) - x0 * s.tiling().Bc;
}

// The bands of every Q block (over K/V blocks) and of every K/V block (over Q blocks).
struct Bands {
  std::vector<Band> of_q, of_kv;
  explicit Bands(const Schedule& s) {
    const bool holes = s.block_mask().has_holes();
    for (int64_t i = 0; i < s.Tr(); ++i) {
      Band b{s.kv_begin(i), s.kv_end(i), s.kv_begin(i), s.kv_end(i), {}, {}};
      while (b.f0 < b.f1 && s.classify(i, b.f0) == TileKind::partial) ++b.f0;
      while (b.f1 > b.f0 && s.classify(i, b.f1 - 1) == TileKind::partial) --b.f1;
      if (holes) sums(b, [&](int64_t j) { return s.classify(i, j); }, [&](int64_t j) { return s.kv_rows(j); });
      of_q.push_back(std::move(b));
    }
    for (int64_t j = 0; j < s.Tc(); ++j) {
      Band b{s.q_begin(j), s.q_end(j), s.q_begin(j), s.q_end(j), {}, {}};
      while (b.f0 < b.f1 && s.classify(b.f0, j) == TileKind::partial) ++b.f0;
      while (b.f1 > b.f0 && s.classify(b.f1 - 1, j) == TileKind::partial) --b.f1;
      if (holes) sums(b, [&](int64_t i) { return s.classify(i, j); }, [&](int64_t i) { return s.q_rows(i); });
      of_kv.push_back(std::move(b));
    }
  }
  template <typename Kind, typename Rows>
  static void sums(Band& b, Kind kind, Rows rows) {
    b.seen.assign(b.b1 - b.b0 + 1, 0);
    b.partial.assign(b.b1 - b.b0 + 1, 0);
    for (int64_t x = b.b0; x < b.b1; ++x) {
      const TileKind k = kind(x);
      b.seen[x - b.b0 + 1] = b.seen[x - b.b0] + (k != TileKind::skipped ? rows(x) : 0);
      b.partial[x - b.b0 + 1] = b.partial[x - b.b0] + (k == TileKind::partial ? rows(x) : 0);
    }
  }
};

// Elements of one line's tiles among blocks [x0, x1) along the band: (all, in partial tiles).
// `rows` is the line's own extent, `span` the extent of blocks along the band.
template <typename Span>
std::pair<double, double> line_elements(const Band& b, int64_t x0, int64_t x1, int64_t rows, Span span) {
  const int64_t a0 = std::max(x0, b.b0), a1 = std::min(x1, b.b1);
  if (a1 <= a0) return {0, 0};
  if (b.holes())
    return {double(rows) * double(b.seen[a1 - b.b0] - b.seen[a0 - b.b0]),
            double(rows) * double(b.partial[a1 - b.b0] - b.partial[a0 - b.b0])};
  const double all = double(rows) * double(span(a0, a1));
  const double partial = double(rows) * double(span(a0, std::min(a1, b.f0)) + span(std::max(a0, b.f1), a1));
  return {all, partial};
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A line's walk over its band in chunks of G blocks, from the first or (reverse) the last: the chunk it
// starts in and how many it walks (worked out once a CTA: the replay asks for every segment).
struct Walk {
  int32_t first = 0, chunks = 0;
};
Walk walk_of(const Band& band, int64_t G, bool reverse) {
  if (band.b1 <= band.b0) return {};
  const int64_t lo = band.b0 / G, hi = (band.b1 - 1) / G;
  return {int32_t(reverse ? hi : lo), int32_t(hi - lo + 1)};
}
// Segment k of the walk: the chunk, and the blocks [x0, x1) of the band inside it.
struct Chunk {
  int64_t c, x0, x1;
};
Chunk chunk_at(const Band& band, const Walk& w, int64_t k, int64_t G, bool reverse) {
  const int64_t c = reverse ? w.first - k : w.first + k;
  return {c, std::max(c * G, band.b0), std::min((c + 1) * G, band.b1)};
}

// The chunk size G: tiles / G^axes stays under the budget (kMaxSegments; the backward's grids half of it).
// A backward at half the budget predicts its measured rows as well or better (every bwd file under
// simulator/validation, 2026-11-27: bytes within 15% on 1-3 more rows of four files, the rest unchanged)
// and halves its replay; the forward does not (the FA2 paper's FA2 >= 1.5x FA1 fell from 20 to 17 cells).
int64_t chunk_for(double tiles, int axes, double budget = double(kMaxSegments)) {
  if (tiles <= budget) return 1;
  return static_cast<int64_t>(std::ceil(std::pow(tiles / budget, 1.0 / axes)));
}

// What every grid shares: the problem, its schedules and their bands, the element costs.
struct Base {
  const Problem& p;
  const std::vector<Schedule>& sch;
  std::vector<Bands> bands;
  ElementTime t;
  double e;
  int64_t Tr_max = 0, Tc_max = 0;
  Base(const Problem& problem, const std::vector<Schedule>& schedules, ElementTime time)
      : p(problem), sch(schedules), t(time), e(bytes_per_element(problem.dtype)) {
    for (const auto& s : sch) {
      bands.emplace_back(s);
      Tr_max = std::max(Tr_max, s.Tr());
      Tc_max = std::max(Tc_max, s.Tc());
    }
  }
  const Schedule& at(int64_t b) const { return sch.size() == 1 ? sch[0] : sch[b]; }
  const Bands& bands_at(int64_t b) const { return sch.size() == 1 ? bands[0] : bands[b]; }
  int64_t kv_head(int64_t h) const { return h / p.group(); }
  void charge(Segment& out, std::pair<double, double> el) const {
    out.elements = el.first;
    out.partial_elements = el.second;
    out.seconds = el.first * t.full + el.second * (t.partial - t.full);
  }
  double tiles() const {
    double n = 0;
    for (int64_t b = 0; b < p.batch; ++b) n += double(at(b).Tr()) * double(at(b).Tc());
    return n * double(p.heads_q);
  }
};

struct Tile {
  int32_t b, h, x;  // batch entry, query head, block (Q block forward, K/V block backward)
  Walk walk = {};   // its band's chunks
};

// The deal's tiles in order, (entry, head, line) each: gpu/tile_order.hpp's longest_first_tile over
// `lines` x (batch x heads) pairs, a pair being entry x heads + head as the kernels number them.
std::vector<std::array<int64_t, 3>> dealt(const Deal& deal, int64_t lines, int64_t batch, int64_t heads) {
  const int64_t pairs = batch * heads;
  std::vector<std::array<int64_t, 3>> out;
  out.reserve(size_t(lines * pairs));
  for (int64_t t = 0; t < lines * pairs; ++t) {
    const gpu::DealtTile d = gpu::longest_first_tile(int(t), int(lines), int(pairs), deal.sections,
                                                     deal.order.empty() ? nullptr : deal.order.data());
    out.push_back({d.pair / heads, d.pair % heads, d.line});
  }
  return out;
}

// ---- forward: one CTA (tile) per Q block --------------------------------------------------------
class ForwardGrid final : public CtaGrid {
 public:
  ForwardGrid(const Problem& p, const std::vector<Schedule>& s, ElementTime t, TileOrder order, bool reverse,
              double section, double input_bytes, const Deal& deal, LineBytes line)
      : base_(p, s, t), reverse_(reverse), e_in_(input_bytes > 0 ? input_bytes : base_.e) {
    in_row_ = line.in > 0 ? line.in : double(p.head_dim) * e_in_;             // Q_i
    out_row_ = line.out > 0 ? line.out : double(p.dv()) * base_.e + 4.0;      // O_i and its LSE
    G_ = chunk_for(base_.tiles(), 1);
    chunks_ = ceil_div(base_.Tc_max, G_);
    const int64_t H = p.heads_q, B = p.batch;
    kv_keys_ = uint32_t(B * p.heads_kv * chunks_);
    q_keys_ = uint32_t(B * H * base_.Tr_max);
    if (deal.sections > 0) {
      for (const auto& [b, h, i] : dealt(deal, base_.Tr_max, B, H)) {
        if (i < base_.at(b).Tr()) tiles_.push_back({int32_t(b), int32_t(h), int32_t(i)});
      }
    } else if (order == TileOrder::fa2) {
      // FA2's grid is (Q block, batch, head): blockIdx.x fastest.
      for (int64_t h = 0; h < H; ++h)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t i = 0; i < base_.at(b).Tr(); ++i) tiles_.push_back({int32_t(b), int32_t(h), int32_t(i)});
    } else if (order == TileOrder::flashlab) {
      // flashlab's grids are (Q block, head, batch): blockIdx.x fastest.
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < base_.at(b).Tr(); ++i) tiles_.push_back({int32_t(b), int32_t(h), int32_t(i)});
    } else {
      // FA3's scheduler (hopper/tile_scheduler.hpp): (batch, head) pairs in sections of as many heads as
      // fit their K and V in `section` bytes (a power of two); within a section, Q blocks outer (the
      // last, longest first under a causal mask), the section's heads inner.
      const double kv_head_bytes = double(base_.at(0).seqlen_k()) * double(p.head_dim + p.dv()) * e_in_;
      const int64_t fit = std::max<int64_t>(1, int64_t(section / std::max(1.0, kv_head_bytes)));
      const int64_t per = int64_t(std::bit_floor(uint64_t(fit)));
      const int64_t pairs = B * H;
      for (int64_t s0 = 0; s0 < pairs; s0 += per) {
        const int64_t n = std::min(per, pairs - s0);
        for (int64_t m = 0; m < base_.Tr_max; ++m)
          for (int64_t k = 0; k < n; ++k) {
            const int64_t hh = s0 + k, b = hh / H, h = hh % H;
            const int64_t Tr = base_.at(b).Tr();
            const int64_t i = p.causal ? Tr - 1 - m : m;
            if (i >= 0 && i < Tr) tiles_.push_back({int32_t(b), int32_t(h), int32_t(i)});
          }
      }
    }
    for (Tile& tl : tiles_) tl.walk = walk_of(base_.bands_at(tl.b).of_q[tl.x], G_, reverse_);
  }
  int64_t ctas() const override { return int64_t(tiles_.size()); }
  uint32_t keys() const override { return kv_keys_ + 2 * q_keys_; }
  int64_t head(int64_t c) const override { return int64_t(tiles_[c].b) * base_.p.heads_q + tiles_[c].h; }
  int64_t segments(int64_t c) const override { return std::max<int32_t>(1, tiles_[c].walk.chunks); }
  std::vector<uint32_t> kv_keys(int64_t head) const override {
    const int64_t b = head / base_.p.heads_q, h = head % base_.p.heads_q;
    std::vector<uint32_t> keys;
    for (int64_t c = 0; c < ceil_div(base_.at(b).Tc(), G_); ++c)
      keys.push_back(uint32_t((b * base_.p.heads_kv + base_.kv_head(h)) * chunks_ + c));
    return keys;
  }
  int64_t chunk_blocks() const override { return G_; }
  int64_t block(int64_t c) const override { return tiles_[c].x; }
  int64_t segment_chunk(int64_t c, int64_t k) const override {
    const Tile& tl = tiles_[c];
    return tl.walk.chunks == 0 ? -1 : chunk_at(base_.bands_at(tl.b).of_q[tl.x], tl.walk, k, G_, reverse_).c;
  }
  void segment(int64_t c, int64_t k, Segment& out) const override {
    const Tile& tl = tiles_[c];
    const Schedule& s = base_.at(tl.b);
    const Band& band = base_.bands_at(tl.b).of_q[tl.x];
    const int64_t rows = s.q_rows(tl.x), d = base_.p.head_dim, dv = base_.p.dv();
    const uint32_t q_key = kv_keys_ + uint32_t((int64_t(tl.b) * base_.p.heads_q + tl.h) * base_.Tr_max + tl.x);
    if (k == 0) out.accesses.push_back({q_key, double(rows) * in_row_, AccessKind::load});
    if (band.b1 > band.b0) {
      const auto [c0, x0, x1] = chunk_at(band, tl.walk, k, G_, reverse_);
      const uint32_t kv_key = uint32_t((int64_t(tl.b) * base_.p.heads_kv + base_.kv_head(tl.h)) * chunks_ + c0);
      const int64_t kv = computed_span(band, x0, x1, [&](int64_t a, int64_t b) { return kv_span(s, a, b); });
      out.accesses.push_back({kv_key, double(kv * (d + dv)) * e_in_, AccessKind::load});
      base_.charge(out, line_elements(band, x0, x1, rows, [&](int64_t a, int64_t b) { return kv_span(s, a, b); }));
    }
    if (k + 1 == segments(c))  // O_i and its LSE (the dq kernel: dQ_i)
      out.accesses.push_back({q_key + q_keys_, double(rows) * out_row_, AccessKind::store});
  }

 private:
  Base base_;
  bool reverse_;
  double e_in_;  // bytes an element of Q, K, V
  double in_row_ = 0, out_row_ = 0;  // bytes a row of the CTA's own block: loaded first, stored last
  std::vector<Tile> tiles_;
  int64_t G_ = 1, chunks_ = 1;
  uint32_t kv_keys_ = 0, q_keys_ = 0;
};

// ---- backward: one CTA per K/V block ------------------------------------------------------------
class BackwardGrid final : public CtaGrid {
 public:
  BackwardGrid(const Problem& p, const std::vector<Schedule>& s, ElementTime t, bool reverse, BackwardOrder order,
               const Deal& deal, DqSum dq)
      : base_(p, s, t), reverse_(reverse), dq_(dq) {
    // Every backward grid in the same chunks, so that a deterministic estimate and its atomic twin are
    // replayed alike (rotated walks block by block took 4.2M segments for 8 x 64 heads at 8k, d = 128, and
    // came out 1.4x faster than the same grid's atomic replay in chunks of 128 blocks).
    G_ = chunk_for(base_.tiles(), 1, double(kMaxSegments) / 2);
    chunks_ = ceil_div(base_.Tr_max, G_);
    q_keys_ = uint32_t(p.batch * p.heads_q * chunks_);
    kv_keys_ = uint32_t(p.batch * p.heads_q * base_.Tc_max);
    if (deal.sections > 0) {  // fa2's dK/dV under a mask function: its (batch, kv head) pairs dealt, a CTA a
      heads_per_cta_ = p.group();  // kv head walking the group's query heads (as below)
      for (const auto& [b, g, j] : dealt(deal, base_.Tc_max, p.batch, p.heads_kv)) {
        if (j < base_.at(b).Tc()) tiles_.push_back({int32_t(b), int32_t(g * p.group()), int32_t(j)});
      }
    } else if (order == BackwardOrder::fa2) {
      // FA2's backward grid is (K/V block, batch, head): blockIdx.x fastest.
      for (int64_t h = 0; h < p.heads_q; ++h)
        for (int64_t b = 0; b < p.batch; ++b)
          for (int64_t j = 0; j < base_.at(b).Tc(); ++j) tiles_.push_back({int32_t(b), int32_t(h), int32_t(j)});
    } else {
      // flashlab's grids (gpu/fa2_bwd.cu's dkdv, gpu/fa3/fa3_bwd.cu) are (K/V block, kv head, batch):
      // blockIdx.x fastest; a CTA's `h` is its kv head's first query head, and it walks the group's heads in
      // turn (fa2: its steps' counters; fa3: bwd_smem.cuh BwdWalk).
      // In turns (deterministic), blockIdx.x takes a head's K/V blocks from the last.
      heads_per_cta_ = p.group();
      for (int64_t b = 0; b < p.batch; ++b)
        for (int64_t g = 0; g < p.heads_kv; ++g)
          for (int64_t x = 0; x < base_.at(b).Tc(); ++x) {
            const int64_t j = turns() ? base_.at(b).Tc() - 1 - x : x;
            tiles_.push_back({int32_t(b), int32_t(g * p.group()), int32_t(j)});
          }
    }
    for (Tile& tl : tiles_) tl.walk = walk_of(base_.bands_at(tl.b).of_kv[tl.x], G_, reverse_);
    if (dq == DqSum::turns) rank_turns();
  }
  bool turns() const { return dq_ == DqSum::turns || dq_ == DqSum::rotated; }
  uint32_t turn_lines() const override { return turns() ? q_keys_ : 0; }
  int64_t ctas() const override { return int64_t(tiles_.size()); }
  uint32_t keys() const override { return 2 * q_keys_ + 2 * kv_keys_; }
  int64_t head(int64_t c) const override { return int64_t(tiles_[c].b) * base_.p.heads_q + tiles_[c].h; }
  // Chunks of the CTA's band (the Q blocks that see its keys), once per query head it walks.
  int64_t band_chunks(int64_t c) const { return tiles_[c].walk.chunks; }
  int64_t segments(int64_t c) const override { return std::max<int64_t>(1, heads_per_cta_ * band_chunks(c)); }
  void segment(int64_t c, int64_t k, Segment& out) const override {
    const Tile& tl = tiles_[c];
    const Schedule& s = base_.at(tl.b);
    const Band& band = base_.bands_at(tl.b).of_kv[tl.x];
    const int64_t cols = s.kv_rows(tl.x), d = base_.p.head_dim, dv = base_.p.dv();
    const int64_t n = band_chunks(c);
    const int64_t m = segments(c), place = dq_ == DqSum::rotated ? (k + tl.x % m) % m : k;  // step k's place
    const int64_t head_k = heads_per_cta_ > 1 && n > 0 ? place / n : 0, kk = place - head_k * n;  // head, chunk
    const int64_t bh0 = int64_t(tl.b) * base_.p.heads_q + tl.h, bh = bh0 + head_k;
    const uint32_t kv_out = 2 * q_keys_ + kv_keys_ + uint32_t(bh0 * base_.Tc_max + tl.x);
    const uint32_t kv_shared = 2 * q_keys_ + uint32_t((int64_t(tl.b) * base_.p.heads_q +
                                                      base_.kv_head(tl.h) * base_.p.group()) * base_.Tc_max + tl.x);
    if (k == 0) out.accesses.push_back({kv_shared, double(cols * (d + dv)) * base_.e, AccessKind::load});
    if (band.b1 > band.b0) {
      const auto [c0, x0, x1] = chunk_at(band, tl.walk, kk, G_, reverse_);
      const double rows = double(computed_span(band, x0, x1, [&](int64_t a, int64_t b) { return q_span(s, a, b); }));
      const uint32_t q_key = uint32_t(bh * chunks_ + c0);
      out.accesses.push_back({q_key, rows * (double(d + dv) * base_.e + 8.0), AccessKind::load});  // Q, dO, LSE, D
      if (dq_ != DqSum::none)                                                                     // dQ += dS K
        out.accesses.push_back({q_key + q_keys_, rows * double(d) * 4.0, AccessKind::update});
      // The turn line is the dQ chunk's (batch, query head, chunk); a chunk of several Q blocks holds as
      // many of the CTA's turns. Rotated walks in chunks: their predecessors, a step ahead at each block,
      // are not at a chunk's blocks in the same order, so only the CTA's own turns are replayed.
      const uint32_t steps = uint32_t(x1 - x0);
      if (dq_ == DqSum::turns)
        out.turn = {q_key, ranks_[base_.sch.size() == 1 ? 0 : tl.b][c0 * base_.at(tl.b).Tc() + tl.x], steps};
      if (dq_ == DqSum::rotated)
        out.turn = G_ == 1 ? Turn{q_key, uint32_t(gpu::rotated_turn_rank(int(m), int(k), tl.x, int(s.Tc())))}
                           : Turn{Turn::kOwnOnly, 0, steps};
      base_.charge(out, line_elements(band, x0, x1, cols, [&](int64_t a, int64_t b) { return q_span(s, a, b); }));
    }
    if (k + 1 == m) out.accesses.push_back({kv_out, double(cols * (d + dv)) * base_.e, AccessKind::store});
  }

 private:
  // A turn's rank on its line: how many K/V blocks after j (launched before it) walk the same chunk of Q
  // blocks; per schedule, chunk-major (ranks_[s][c * Tc + j]).
  void rank_turns() {
    for (size_t si = 0; si < base_.sch.size(); ++si) {
      const Schedule& s = base_.sch[si];
      const int64_t Tc = s.Tc(), chunks = ceil_div(s.Tr(), G_);
      std::vector<uint32_t> ranks(size_t(chunks * Tc)), seen(static_cast<size_t>(chunks));
      for (int64_t j = Tc - 1; j >= 0; --j) {
        const Walk w = walk_of(base_.bands[si].of_kv[j], G_, reverse_);
        if (w.chunks == 0) continue;
        const int64_t lo = reverse_ ? w.first - w.chunks + 1 : w.first;
        for (int64_t c = lo; c < lo + w.chunks; ++c) ranks[size_t(c * Tc + j)] = seen[size_t(c)]++;
      }
      ranks_.push_back(std::move(ranks));
    }
  }
  Base base_;
  bool reverse_;
  DqSum dq_;
  std::vector<Tile> tiles_;
  int64_t G_ = 1, chunks_ = 1, heads_per_cta_ = 1;
  uint32_t q_keys_ = 0, kv_keys_ = 0;
  std::vector<std::vector<uint32_t>> ranks_;
};

// ---- FlashAttention-1: one CTA per (batch, head, split) -------------------------------------------
class Fa1Grid final : public CtaGrid {
 public:
  Fa1Grid(const Problem& p, const std::vector<Schedule>& s, ElementTime t, int64_t splits, bool backward)
      : base_(p, s, t), splits_(std::max<int64_t>(1, splits)), backward_(backward) {
    G_ = chunk_for(base_.tiles(), 2);
    qc_ = ceil_div(base_.Tr_max, G_);
    kc_ = ceil_div(base_.Tc_max, G_);
    const int64_t BH = p.batch * p.heads_q;
    q_keys_ = uint32_t(BH * qc_);
    kv_keys_ = uint32_t(BH * kc_);
    // FA1's grid is (batch, head, split): blockIdx.x (the batch entry) fastest.
    for (int64_t sp = 0; sp < splits_; ++sp)
      for (int64_t h = 0; h < p.heads_q; ++h)
        for (int64_t b = 0; b < p.batch; ++b) ctas_.push_back(make_cta(b, h, sp));
  }
  int64_t ctas() const override { return int64_t(ctas_.size()); }
  uint32_t keys() const override { return 2 * q_keys_ + 2 * kv_keys_; }
  int64_t head(int64_t c) const override { return int64_t(ctas_[c].b) * base_.p.heads_q + ctas_[c].h; }
  int64_t segments(int64_t c) const override {
    const Cta& x = ctas_[c];
    return x.o1 <= x.o0 || x.i1 <= x.i0 ? 0 : (ceil_div(x.o1, G_) - x.o0 / G_) * (ceil_div(x.i1, G_) - x.i0 / G_);
  }
  void segment(int64_t c, int64_t k, Segment& out) const override {
    const Cta& x = ctas_[c];
    const Schedule& s = base_.at(x.b);
    const Bands& bands = base_.bands_at(x.b);
    const int64_t inner_chunks = ceil_div(x.i1, G_) - x.i0 / G_;
    const int64_t oc = x.o0 / G_ + k / inner_chunks, ic = x.i0 / G_ + k % inner_chunks;
    const int64_t o0 = std::max(oc * G_, x.o0), o1 = std::min((oc + 1) * G_, x.o1);
    const int64_t i0 = std::max(ic * G_, x.i0), i1 = std::min((ic + 1) * G_, x.i1);
    const int64_t d = base_.p.head_dim, dv = base_.p.dv(), bh = int64_t(x.b) * base_.p.heads_q + x.h;
    const double e = base_.e;
    // The outer axis is K/V in both passes (Algorithms 1 and 4), Q blocks inner.
    const int64_t kv0 = o0, kv1 = o1, q0 = i0, q1 = i1;
    const double kv_rows = double(kv_span(s, kv0, kv1)), q_rows = double(q_span(s, q0, q1));
    const uint32_t kv_key = 2 * q_keys_ + uint32_t((int64_t(x.b) * base_.p.heads_q +
                                                   base_.kv_head(x.h) * base_.p.group()) * kc_ + oc);
    const uint32_t q_key = uint32_t(bh * qc_ + ic);
    if (k % inner_chunks == 0) out.accesses.push_back({kv_key, kv_rows * double(d + dv) * e, AccessKind::load});
    if (!backward_) {
      out.accesses.push_back({q_key, q_rows * double(d) * e, AccessKind::load});
      out.accesses.push_back({q_key + q_keys_, q_rows * (double(dv) * e + 8.0), AccessKind::update});  // O_i, l_i, m_i
    } else {
      out.accesses.push_back({q_key, q_rows * (double(d + 2 * dv) * e + 8.0), AccessKind::load});  // Q, O, dO, l, m
      out.accesses.push_back({q_key + q_keys_, q_rows * double(d) * e, AccessKind::update});       // dQ_i
      if (k % inner_chunks == inner_chunks - 1)  // dK_j, dV_j, kept on chip over the Q blocks
        out.accesses.push_back({uint32_t(2 * q_keys_ + kv_keys_ + bh * kc_ + oc), kv_rows * double(d + dv) * e,
                                AccessKind::store});
    }
    std::pair<double, double> el{0, 0};
    for (int64_t i = q0; i < q1; ++i) {
      const auto l = line_elements(bands.of_q[i], kv0, kv1, s.q_rows(i), [&](int64_t a, int64_t b) { return kv_span(s, a, b); });
      el.first += l.first;
      el.second += l.second;
    }
    base_.charge(out, el);
  }

 private:
  struct Cta {
    int32_t b, h;
    int64_t i0, i1, o0, o1;  // the split's blocks (inner axis forward: Q; backward: K/V) and the outer range
  };
  Cta make_cta(int64_t b, int64_t h, int64_t sp) const {
    const Schedule& s = base_.at(b);
    const Bands& bands = base_.bands_at(b);
    Cta x{int32_t(b), int32_t(h), 0, 0, 0, 0};
    const int64_t n = backward_ ? s.Tc() : s.Tr(), per = ceil_div(n, splits_);
    const int64_t s0 = std::min(n, sp * per), s1 = std::min(n, s0 + per);
    // Forward: the split is a range of Q blocks (inner), the K/V blocks they see are the outer range.
    // Backward: the split is a range of K/V blocks (outer), the Q blocks they see the inner range.
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t y = s0; y < s1; ++y) {
      const Band& band = backward_ ? bands.of_kv[y] : bands.of_q[y];
      if (band.b1 > band.b0) lo = std::min(lo, band.b0), hi = std::max(hi, band.b1);
    }
    if (lo >= hi) lo = hi = 0;
    if (backward_) x.o0 = s0, x.o1 = s1, x.i0 = lo, x.i1 = hi;
    else x.i0 = s0, x.i1 = s1, x.o0 = lo, x.o1 = hi;
    return x;
  }
  Base base_;
  int64_t splits_;
  bool backward_;
  std::vector<Cta> ctas_;
  int64_t G_ = 1, qc_ = 1, kc_ = 1;
  uint32_t q_keys_ = 0, kv_keys_ = 0;
};

}  // namespace

std::unique_ptr<CtaGrid> forward_grid(const Problem& p, const std::vector<tiled::Schedule>& s, ElementTime t,
                                      TileOrder order, bool reverse, double l2_section_bytes, double input_bytes,
                                      const Deal& deal, LineBytes line) {
  return std::make_unique<ForwardGrid>(p, s, t, order, reverse, l2_section_bytes, input_bytes, deal, line);
}
std::unique_ptr<CtaGrid> backward_grid(const Problem& p, const std::vector<tiled::Schedule>& s, ElementTime t,
                                       bool reverse, BackwardOrder order, const Deal& deal, DqSum dq) {
  return std::make_unique<BackwardGrid>(p, s, t, reverse, order, deal, dq);
}
std::unique_ptr<CtaGrid> fa1_grid(const Problem& p, const std::vector<tiled::Schedule>& s, ElementTime t,
                                  int64_t splits, bool backward) {
  return std::make_unique<Fa1Grid>(p, s, t, splits, backward);
}

}  // namespace flashlab::sim
