#include "schedule.hpp"

#include <algorithm>

#include "flashlab/enum_names.hpp"
#include "flashlab/error.hpp"

namespace flashlab::tiled {

static const EnumNames<Order, 8> kOrderNames{{Order::fa1, "fa1"},           {Order::fa2, "fa2"},
                                             {Order::backward, "bwd"},       {Order::fa1_backward, "fa1-bwd"},
                                             {Order::dkdv, "bwd-dkdv"},      {Order::dq, "bwd-dq"},
                                             {Order::backward, "backward"},  {Order::fa1_backward, "fa1_backward"}};

// "backward" is how the tool has always printed the FA2 backward order; "bwd" is what users type.
std::string to_string(Order order) { return order == Order::backward ? "backward" : enum_name(kOrderNames, order); }
Order parse_order(const std::string& name) { return enum_parse(kOrderNames, name, "order"); }

std::string to_string(TensorId t) {
  static const char* names[] = {"Q", "K", "V", "O", "l", "m", "LSE", "dO", "D", "dQ", "dK", "dV", "Knew", "Vnew", "Oaccum", "LSEaccum"};
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
    : problem_(problem), b_(batch_index), tiling_(tiling), order_(order), mask_(problem, batch_index, tiling) {
  sq_ = problem.len_q(b_);
  sk_ = problem.len_k(b_);
  Tr_ = mask_.Tr();
  Tc_ = mask_.Tc();
  elem_ = bytes_per_element(problem.dtype);
}

int64_t Schedule::q_rows(int64_t i) const { return tiling_.q_block(i, sq_).rows; }
int64_t Schedule::kv_rows(int64_t j) const { return std::min(tiling_.Bc, sk_ - j * tiling_.Bc); }

TileStep Schedule::step(int64_t k) const {
  TileStep s;
  s.index = k;
  const Tile t = tile_of(k);
  s.i = t.i;
  s.j = t.j;
  s.row0 = tiling_.q_block(s.i, sq_).row0;
  s.rows = q_rows(s.i);
  s.col0 = s.j * tiling_.Bc;
  s.cols = kv_rows(s.j);
  s.kind = classify(s.i, s.j);
  add_step_transfers(s);
  return s;
}

namespace {

// When in the walk of one outer line a transfer happens. An `every` rule moves the inner block of each
// computed step (FA2: K_j, V_j of Q block i's line); the others move the line's own block (FA2: Q_i,
// O_i; FA1 and the backward: K_j, V_j, dK_j, dV_j).
enum class When {
  every,         // each computed step
  first,         // the line's first computed step
  last,          // the line's last computed step
  last_visited,  // the line's last visited step, even for a line with nothing visible (it writes zeros)
};
// Bytes per row: d or dv elements in the storage dtype, one fp32, or a row of dQ's fp32 accumulator.
enum class Width { d, dv, f32, d_f32 };
struct Rule {
  TensorId tensor;
  bool store;
  When when;
  Width width;
};

// One table per order: add_step_transfers and closed_form both read it, so the bytes a walk moves and
// the bytes the closed form counts are one description.
const std::vector<Rule>& rules_of(Order o) {
  using T = TensorId;
  static const std::vector<Rule> fa2{  // Q_i outer: O_i, l_i, m_i on chip, O_i and LSE_i written once
      {T::Q, false, When::first, Width::d},        {T::K, false, When::every, Width::d},
      {T::V, false, When::every, Width::dv},       {T::O, true, When::last_visited, Width::dv},
      {T::LSE, true, When::last_visited, Width::f32}};
  static const std::vector<Rule> fa1{  // Algorithm 1: K_j outer; O_i, l_i, m_i read and written every step
      {T::K, false, When::first, Width::d},  {T::V, false, When::first, Width::dv}, {T::Q, false, When::every, Width::d},
      {T::O, false, When::every, Width::dv}, {T::l, false, When::every, Width::f32}, {T::m, false, When::every, Width::f32},
      {T::O, true, When::every, Width::dv},  {T::l, true, When::every, Width::f32},  {T::m, true, When::every, Width::f32}};
  static const std::vector<Rule> backward{  // FA2 backward: K_j outer; dQ's fp32 accumulator read and written
      {T::K, false, When::first, Width::d},       {T::V, false, When::first, Width::dv},
      {T::Q, false, When::every, Width::d},       {T::dO, false, When::every, Width::dv},
      {T::LSE, false, When::every, Width::f32},   {T::D, false, When::every, Width::f32},
      {T::dQ, false, When::every, Width::d_f32},  {T::dQ, true, When::every, Width::d_f32},
      {T::dK, true, When::last_visited, Width::d}, {T::dV, true, When::last_visited, Width::dv}};
  static const std::vector<Rule> fa1_backward{  // Algorithm 4: dQ_i read and written back every step
      {T::K, false, When::first, Width::d},   {T::V, false, When::first, Width::dv},  {T::Q, false, When::every, Width::d},
      {T::O, false, When::every, Width::dv},  {T::dO, false, When::every, Width::dv}, {T::dQ, false, When::every, Width::d},
      {T::l, false, When::every, Width::f32}, {T::m, false, When::every, Width::f32}, {T::dQ, true, When::every, Width::d},
      {T::dK, true, When::last, Width::d},    {T::dV, true, When::last, Width::dv}};
  static const std::vector<Rule> dkdv{  // the deterministic backward's K_j-outer pass: dK_j, dV_j, no dQ
      {T::K, false, When::first, Width::d},       {T::V, false, When::first, Width::dv},
      {T::Q, false, When::every, Width::d},       {T::dO, false, When::every, Width::dv},
      {T::LSE, false, When::every, Width::f32},   {T::D, false, When::every, Width::f32},
      {T::dK, true, When::last_visited, Width::d}, {T::dV, true, When::last_visited, Width::dv}};
  static const std::vector<Rule> dq{  // its Q_i-outer pass: dQ_i on chip, written once in the input dtype
      {T::Q, false, When::first, Width::d},       {T::dO, false, When::first, Width::dv},
      {T::LSE, false, When::first, Width::f32},   {T::D, false, When::first, Width::f32},
      {T::K, false, When::every, Width::d},       {T::V, false, When::every, Width::dv},
      {T::dQ, true, When::last_visited, Width::d}};
  switch (o) {
    case Order::fa2: return fa2;
    case Order::fa1: return fa1;
    case Order::backward: return backward;
    case Order::fa1_backward: return fa1_backward;
    case Order::dkdv: return dkdv;
    case Order::dq: return dq;
  }
  return fa2;
}

}  // namespace

int64_t Schedule::row_bytes(int w) const {
  switch (static_cast<Width>(w)) {
    case Width::d: return problem_.head_dim * elem_;
    case Width::dv: return problem_.dv() * elem_;
    case Width::f32: return 4;
    case Width::d_f32: return problem_.head_dim * 4;
  }
  return 0;
}

bool Schedule::writes_at_line_end() const {
  for (const Rule& r : rules_of(order_))
    if (r.when == When::last_visited) return true;
  return false;
}

void Schedule::add_step_transfers(TileStep& s) const {
  const bool computed = s.kind != TileKind::skipped;
  const int64_t line = q_outer() ? s.i : s.j, x = q_outer() ? s.j : s.i;  // x: the step's place on its line
  const Range vis = visible(line), walk = visited(line);
  for (const Rule& r : rules_of(order_)) {
    bool fires = false;
    switch (r.when) {
      case When::every: fires = computed; break;
      case When::first: fires = computed && x == vis.begin; break;
      case When::last: fires = computed && x == vis.end - 1; break;
      case When::last_visited: fires = x == walk.end - 1; break;
    }
    if (!fires) continue;
    // `every` moves the inner block; the others the line's own block.
    const bool q_rows_moved = (r.when == When::every) != q_outer();
    const int64_t row0 = q_rows_moved ? s.row0 : s.col0, rows = q_rows_moved ? s.rows : s.cols;
    s.transfers[s.count++] = Transfer{r.tensor, r.store, row0, rows, rows * row_bytes(static_cast<int>(r.width))};
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
    case Order::dkdv:  // D = rowsum(dO o O) for both passes; no accumulator to zero
      return {{TensorId::O, false, 0, sq_, sq_ * dv * e},
              {TensorId::dO, false, 0, sq_, sq_ * dv * e},
              {TensorId::D, true, 0, sq_, sq_ * 4}};
    case Order::fa2:
    case Order::dq: return {};
  }
  return {};
}

std::vector<Transfer> Schedule::epilogue() const {
  if (order_ != Order::backward) return {};
  const int64_t d = problem_.head_dim;
  return {{TensorId::dQ, false, 0, sq_, sq_ * d * 4},  // fp32 accumulator -> dQ in the input dtype
          {TensorId::dQ, true, 0, sq_, sq_ * d * elem_}};
}

int64_t Schedule::tiles_skipped() const { return steps() - mask_.computed_tiles(); }

int64_t Schedule::inner_rows_computed(int64_t line) const {
  const Range vis = visible(line);
  if (vis.begin >= vis.end) return 0;
  if (!mask_.has_holes()) {
    if (q_outer()) return std::min(vis.end * tiling_.Bc, sk_) - vis.begin * tiling_.Bc;
    const Tiling::Rows last = tiling_.q_block(vis.end - 1, sq_);
    return last.row0 + last.rows - tiling_.q_block(vis.begin, sq_).row0;
  }
  int64_t rows = 0;
  for (int64_t x = vis.begin; x < vis.end; ++x) {
    const Tile t = q_outer() ? Tile{line, x} : Tile{x, line};
    if (classify(t.i, t.j) != TileKind::skipped) rows += q_outer() ? kv_rows(x) : q_rows(x);
  }
  return rows;
}

int64_t Schedule::computed_elements() const {
  int64_t elements = 0;
  for (int64_t i = 0; i < Tr_; ++i) {
    if (kv_begin(i) >= kv_end(i)) continue;
    int64_t cols = std::min(kv_end(i) * tiling_.Bc, sk_) - kv_begin(i) * tiling_.Bc;
    if (mask_.has_holes()) {
      cols = 0;
      for (int64_t j = kv_begin(i); j < kv_end(i); ++j) cols += classify(i, j) != TileKind::skipped ? kv_rows(j) : 0;
    }
    elements += q_rows(i) * cols;
  }
  return elements;
}

ByteCounts Schedule::closed_form() const {
  ByteCounts c;
  for (const Transfer& t : prologue()) c.add(t);
  for (const Transfer& t : epilogue()) c.add(t);
  const std::vector<Rule>& rules = rules_of(order_);
  for (int64_t line = 0; line < outer_blocks(); ++line) {
    const Range vis = visible(line);
    const bool seen = vis.begin < vis.end;
    const int64_t own = q_outer() ? q_rows(line) : kv_rows(line);  // the line's own block
    const int64_t inner = inner_rows_computed(line);  // rows of the inner blocks it computes
    for (const Rule& r : rules) {
      int64_t rows = 0;
      switch (r.when) {
        case When::every: rows = inner; break;
        case When::first:
        case When::last: rows = seen ? own : 0; break;
        case When::last_visited: rows = own; break;  // every line, seen or not
      }
      (r.store ? c.store : c.load)[static_cast<int>(r.tensor)] += rows * row_bytes(static_cast<int>(r.width));
    }
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
