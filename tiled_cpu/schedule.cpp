#include "schedule.hpp"

#include <algorithm>

#include "flashlab/error.hpp"

namespace flashlab::tiled {

std::string to_string(Order order) {
  switch (order) {
    case Order::fa1: return "fa1";
    case Order::fa2: return "fa2";
    case Order::backward: return "backward";
    case Order::fa1_backward: return "fa1-bwd";
  }
  return "?";
}

Order parse_order(const std::string& name) {
  if (name == "fa1") return Order::fa1;
  if (name == "fa2") return Order::fa2;
  if (name == "backward" || name == "bwd") return Order::backward;
  if (name == "fa1-bwd" || name == "fa1_backward") return Order::fa1_backward;
  throw Error("unknown order '" + name + "': expected fa1, fa2, bwd or fa1-bwd");
}

std::string to_string(TileKind kind) {
  switch (kind) {
    case TileKind::full: return "full";
    case TileKind::partial: return "partial";
    case TileKind::skipped: return "skipped";
  }
  return "?";
}

std::string to_string(TensorId t) {
  static const char* names[] = {"Q", "K", "V", "O", "l", "m", "LSE", "dO", "D", "dQ", "dK", "dV"};
  return names[static_cast<int>(t)];
}

int64_t ByteCounts::total_load() const {
  int64_t s = 0;
  for (int64_t v : load) s += v;
  return s;
}
int64_t ByteCounts::total_store() const {
  int64_t s = 0;
  for (int64_t v : store) s += v;
  return s;
}

Schedule::Schedule(const Problem& problem, int64_t batch_index, Tiling tiling, Order order)
    : problem_(problem), b_(batch_index), tiling_(tiling), order_(order) {
  if (tiling.Br <= 0 || tiling.Bc <= 0)
    throw Error("tile sizes must be positive, got " + tiling.describe());
  sq_ = problem.len_q(b_);
  sk_ = problem.len_k(b_);
  Tr_ = (sq_ + tiling.Br - 1) / tiling.Br;
  Tc_ = (sk_ + tiling.Bc - 1) / tiling.Bc;
  elem_ = bytes_per_element(problem.dtype);

  // Visible columns of a Q block: the union over its rows of [col_begin, col_end).
  // Both edges grow with the row, so the union is one interval, from the first
  // non-empty row's begin to the last non-empty row's end. A row sees nothing
  // only where col_end is clamped at 0, which puts its col_begin at 0 as well:
  // so such rows form a prefix of the sequence, a block with any visible row
  // has its last row visible, and the block's first row gives the union's
  // begin. Two mask evaluations a block, not one a row.
  kv_range_.assign(Tr_, {0, 0});
  q_range_.assign(Tc_, {0, 0});
  for (int64_t i = 0; i < Tr_; ++i) {
    const int64_t first = i * tiling.Br, last = std::min(sq_, (i + 1) * tiling.Br) - 1;
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

int64_t Schedule::q_rows(int64_t i) const { return std::min(tiling_.Br, sq_ - i * tiling_.Br); }
int64_t Schedule::kv_rows(int64_t j) const { return std::min(tiling_.Bc, sk_ - j * tiling_.Bc); }

TileKind Schedule::classify(int64_t i, int64_t j) const {
  if (j < kv_begin(i) || j >= kv_end(i)) return TileKind::skipped;
  const int64_t r0 = i * tiling_.Br, r1 = r0 + q_rows(i);
  const int64_t c0 = j * tiling_.Bc, c1 = c0 + kv_rows(j);
  // Every row sees the whole tile when the last row starts at or before c0
  // and the first row ends at or after c1 (both edges grow with the row).
  const bool full = problem_.col_begin(b_, r1 - 1) <= c0 && problem_.col_end(b_, r0) >= c1;
  return full ? TileKind::full : TileKind::partial;
}

TileStep Schedule::step(int64_t k) const {
  TileStep s;
  s.index = k;
  const Tile t = tile_of(k);
  s.i = t.i;
  s.j = t.j;
  s.row0 = s.i * tiling_.Br;
  s.rows = q_rows(s.i);
  s.col0 = s.j * tiling_.Bc;
  s.cols = kv_rows(s.j);
  s.kind = classify(s.i, s.j);
  add_step_transfers(s);
  return s;
}

void Schedule::add_step_transfers(TileStep& s) const {
  const int64_t d = problem_.head_dim, dv = problem_.dv(), e = elem_;
  auto add = [&s](TensorId t, bool store, int64_t row0, int64_t rows, int64_t bytes) {
    s.transfers[s.count++] = Transfer{t, store, row0, rows, bytes};
  };
  const bool computed = s.kind != TileKind::skipped;
  auto q_block = [&](TensorId t, bool store, int64_t width_bytes) { add(t, store, s.row0, s.rows, s.rows * width_bytes); };
  auto kv_block = [&](TensorId t, bool store, int64_t width_bytes) { add(t, store, s.col0, s.cols, s.cols * width_bytes); };

  switch (order_) {
    case Order::fa2: {
      if (computed && s.j == kv_begin(s.i)) q_block(TensorId::Q, false, d * e);
      if (computed) {
        kv_block(TensorId::K, false, d * e);
        kv_block(TensorId::V, false, dv * e);
      }
      const bool last = s.j == visited(s.i).end - 1;  // the step that writes O_i and LSE_i
      if (last) {  // a Q block that sees nothing still writes O = 0 and LSE = -inf
        q_block(TensorId::O, true, dv * e);
        q_block(TensorId::LSE, true, 4);
      }
      break;
    }
    case Order::fa1: {
      if (!computed) break;
      if (s.i == q_begin(s.j)) {
        kv_block(TensorId::K, false, d * e);
        kv_block(TensorId::V, false, dv * e);
      }
      q_block(TensorId::Q, false, d * e);
      q_block(TensorId::O, false, dv * e);
      q_block(TensorId::l, false, 4);
      q_block(TensorId::m, false, 4);
      q_block(TensorId::O, true, dv * e);
      q_block(TensorId::l, true, 4);
      q_block(TensorId::m, true, 4);
      break;
    }
    case Order::backward: {
      if (computed && s.i == q_begin(s.j)) {
        kv_block(TensorId::K, false, d * e);
        kv_block(TensorId::V, false, dv * e);
      }
      if (computed) {
        q_block(TensorId::Q, false, d * e);
        q_block(TensorId::dO, false, dv * e);
        q_block(TensorId::LSE, false, 4);
        q_block(TensorId::D, false, 4);
        q_block(TensorId::dQ, false, d * 4);  // fp32 accumulator: read, add dS_ij K_j, write back
        q_block(TensorId::dQ, true, d * 4);
      }
      const bool last = computed ? s.i == q_end(s.j) - 1 : (q_begin(s.j) == q_end(s.j) && s.i == Tr_ - 1);
      if (last) {  // a K/V block nobody sees still writes dK = dV = 0
        kv_block(TensorId::dK, true, d * e);
        kv_block(TensorId::dV, true, dv * e);
      }
      break;
    }
    case Order::fa1_backward: {
      if (!computed) break;
      if (s.i == q_begin(s.j)) {
        kv_block(TensorId::K, false, d * e);
        kv_block(TensorId::V, false, dv * e);
      }
      q_block(TensorId::Q, false, d * e);
      q_block(TensorId::O, false, dv * e);
      q_block(TensorId::dO, false, dv * e);
      q_block(TensorId::dQ, false, d * e);
      q_block(TensorId::l, false, 4);
      q_block(TensorId::m, false, 4);
      q_block(TensorId::dQ, true, d * e);
      if (s.i == q_end(s.j) - 1) {
        kv_block(TensorId::dK, true, d * e);
        kv_block(TensorId::dV, true, dv * e);
      }
      break;
    }
  }
}

std::vector<Transfer> Schedule::prologue() const {
  const int64_t d = problem_.head_dim, dv = problem_.dv(), e = elem_;
  switch (order_) {
    case Order::fa1:  // Algorithm 1, line 2: O = 0, l = 0, m = -inf in HBM
      return {{TensorId::O, true, 0, sq_, sq_ * dv * e},
              {TensorId::l, true, 0, sq_, sq_ * 4},
              {TensorId::m, true, 0, sq_, sq_ * 4}};
    case Order::backward:  // D = rowsum(dO o O), and the fp32 dQ accumulator zeroed
      return {{TensorId::O, false, 0, sq_, sq_ * dv * e},
              {TensorId::dO, false, 0, sq_, sq_ * dv * e},
              {TensorId::D, true, 0, sq_, sq_ * 4},
              {TensorId::dQ, true, 0, sq_, sq_ * d * 4}};
    case Order::fa1_backward:  // Algorithm 4: dQ, dK, dV = 0 in HBM
      return {{TensorId::dQ, true, 0, sq_, sq_ * d * e},
              {TensorId::dK, true, 0, sk_, sk_ * d * e},
              {TensorId::dV, true, 0, sk_, sk_ * dv * e}};
    case Order::fa2: return {};
  }
  return {};
}

std::vector<Transfer> Schedule::epilogue() const {
  if (order_ != Order::backward) return {};
  const int64_t d = problem_.head_dim;
  return {{TensorId::dQ, false, 0, sq_, sq_ * d * 4},  // fp32 accumulator -> dQ in the input dtype
          {TensorId::dQ, true, 0, sq_, sq_ * d * elem_}};
}

int64_t Schedule::tiles_skipped() const {
  int64_t computed = 0;
  for (int64_t i = 0; i < Tr_; ++i) computed += kv_end(i) - kv_begin(i);
  return steps() - computed;
}

int64_t Schedule::computed_elements() const {
  int64_t elements = 0;
  for (int64_t i = 0; i < Tr_; ++i) {
    if (kv_begin(i) >= kv_end(i)) continue;
    const int64_t cols = std::min(kv_end(i) * tiling_.Bc, sk_) - kv_begin(i) * tiling_.Bc;
    elements += q_rows(i) * cols;
  }
  return elements;
}

ByteCounts Schedule::closed_form() const {
  const int64_t d = problem_.head_dim, dv = problem_.dv(), e = elem_;
  const int64_t Br = tiling_.Br, Bc = tiling_.Bc;
  // Rows covered by blocks [a, b) of a dimension of length n split by B.
  auto rows_in = [](int64_t a, int64_t b, int64_t B, int64_t n) { return a >= b ? 0 : std::min(b * B, n) - a * B; };
  ByteCounts c;
  auto L = [&c](TensorId t, int64_t bytes) { c.load[static_cast<int>(t)] += bytes; };
  auto S = [&c](TensorId t, int64_t bytes) { c.store[static_cast<int>(t)] += bytes; };
  for (const Transfer& t : prologue()) c.add(t);
  for (const Transfer& t : epilogue()) c.add(t);

  switch (order_) {
    case Order::fa2:
      for (int64_t i = 0; i < Tr_; ++i) {
        const int64_t kv = rows_in(kv_begin(i), kv_end(i), Bc, sk_);  // key rows this Q block reads
        if (kv > 0) L(TensorId::Q, q_rows(i) * d * e);
        L(TensorId::K, kv * d * e);
        L(TensorId::V, kv * dv * e);
      }
      S(TensorId::O, sq_ * dv * e);
      S(TensorId::LSE, sq_ * 4);
      break;
    case Order::fa1:
      for (int64_t j = 0; j < Tc_; ++j) {
        const int64_t q = rows_in(q_begin(j), q_end(j), Br, sq_);  // query rows that meet K/V block j
        if (q > 0) {
          L(TensorId::K, kv_rows(j) * d * e);
          L(TensorId::V, kv_rows(j) * dv * e);
        }
        L(TensorId::Q, q * d * e);
        L(TensorId::O, q * dv * e);
        L(TensorId::l, q * 4);
        L(TensorId::m, q * 4);
        S(TensorId::O, q * dv * e);
        S(TensorId::l, q * 4);
        S(TensorId::m, q * 4);
      }
      break;
    case Order::backward:
      for (int64_t j = 0; j < Tc_; ++j) {
        const int64_t q = rows_in(q_begin(j), q_end(j), Br, sq_);
        if (q > 0) {
          L(TensorId::K, kv_rows(j) * d * e);
          L(TensorId::V, kv_rows(j) * dv * e);
        }
        L(TensorId::Q, q * d * e);
        L(TensorId::dO, q * dv * e);
        L(TensorId::LSE, q * 4);
        L(TensorId::D, q * 4);
        L(TensorId::dQ, q * d * 4);
        S(TensorId::dQ, q * d * 4);
      }
      S(TensorId::dK, sk_ * d * e);
      S(TensorId::dV, sk_ * dv * e);
      break;
    case Order::fa1_backward:
      for (int64_t j = 0; j < Tc_; ++j) {
        const int64_t q = rows_in(q_begin(j), q_end(j), Br, sq_);
        if (q > 0) {
          L(TensorId::K, kv_rows(j) * d * e);
          L(TensorId::V, kv_rows(j) * dv * e);
          S(TensorId::dK, kv_rows(j) * d * e);
          S(TensorId::dV, kv_rows(j) * dv * e);
        }
        L(TensorId::Q, q * d * e);
        L(TensorId::O, q * dv * e);
        L(TensorId::dO, q * dv * e);
        L(TensorId::dQ, q * d * e);
        L(TensorId::l, q * 4);
        L(TensorId::m, q * 4);
        S(TensorId::dQ, q * d * e);
      }
      break;
  }
  return c;
}

Tiling Tiling::from_sram(int64_t M, int64_t d) {
  if (M <= 0 || d <= 0) throw Error("the SRAM budget and head_dim must be positive");
  const int64_t Bc = (M + 4 * d - 1) / (4 * d);
  if (Bc < 1) throw Error("an SRAM budget of " + std::to_string(M) + " elements cannot hold one row of Q, K, V and O");
  return Tiling{std::min(Bc, d), Bc};
}

}  // namespace flashlab::tiled

namespace flashlab::tiled {

NaiveBytes naive_bytes(const Problem& p, int64_t b) {
  const int64_t e = bytes_per_element(p.dtype), sq = p.len_q(b), sk = p.len_k(b);
  const int64_t qk = (sq + sk) * p.head_dim * e, s = sq * sk * e;
  return {qk + s + s + sk * p.dv() * e, s + s + sq * p.dv() * e};
}

}  // namespace flashlab::tiled
