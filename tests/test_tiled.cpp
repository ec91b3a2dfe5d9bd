// The schedule and the tiled executor: byte counts, tile classification, the
// online-softmax invariant, and the stepper.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "check.hpp"
#include "executor.hpp"
#include "stepper.hpp"

using namespace flashlab;
using namespace flashlab::tiled;

namespace {

Problem make(int64_t sq, int64_t sk, int64_t d, bool causal) {
  Problem p;
  p.heads_q = p.heads_kv = 1;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.head_dim = d;
  p.causal = causal;
  p.dtype = DType::bf16;
  return p;
}

std::vector<Problem> byte_problems() {
  std::vector<Problem> ps = {make(256, 256, 64, false), make(250, 190, 32, false), make(256, 256, 64, true),
                             make(300, 100, 64, true), make(100, 300, 64, true)};
  Problem w = make(333, 1000, 80, true);
  w.window_left = 128;
  ps.push_back(w);
  Problem v = make(97, 97, 64, false);
  v.batch = 3;
  v.cu_seqlens_q = {0, 10, 60, 97};
  v.cu_seqlens_k = {0, 40, 41, 97};
  v.causal = true;
  ps.push_back(v);
  return ps;
}

}  // namespace

TEST_CASE("the bytes the executor's events report equal the schedule's closed-form counts") {
  for (const Problem& p : byte_problems())
    for (Order order : {Order::fa1, Order::fa2, Order::backward, Order::fa1_backward, Order::dkdv}) {
      CAPTURE(p.describe());
      CAPTURE(to_string(order));
      const auto in = harness::random_inputs(p, 3);
      const Tiling tiling{32, 64};
      ByteCounter counter;
      if (is_backward(order)) {
        const auto f = forward(p, in.q, in.k, in.v, tiling, Order::fa2);
        backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o, tiling, &counter, order);
      } else {
        forward(p, in.q, in.k, in.v, tiling, order, &counter);
      }
      ByteCounts expected;
      for (Order pass : passes_of(order))  // the deterministic backward: both of its passes
        for (int64_t b = 0; b < p.batch; ++b) {
          const ByteCounts c = Schedule(p, b, tiling, pass).closed_form();
          for (int t = 0; t < kTensorCount; ++t) {
            expected.load[t] += c.load[t] * p.heads_q;
            expected.store[t] += c.store[t] * p.heads_q;
          }
        }
      CHECK(counter.counts == expected);
    }
}

TEST_CASE("without a mask the counts are the papers' formulas") {
  const int64_t N = 1024, d = 64, Br = 64, Bc = 128, e = 2;  // bf16
  const Problem p = make(N, N, d, false);
  const int64_t Tr = N / Br, Tc = N / Bc;
  const auto idx = [](TensorId t) { return static_cast<int>(t); };
  const ByteCounts fa2 = Schedule(p, 0, {Br, Bc}, Order::fa2).closed_form();
  CHECK(fa2.load[idx(TensorId::Q)] == N * d * e);            // Q read once
  CHECK(fa2.load[idx(TensorId::K)] == Tr * N * d * e);       // K, V read once per Q block
  CHECK(fa2.store[idx(TensorId::O)] == N * d * e);           // O written once
  const ByteCounts fa1 = Schedule(p, 0, {Br, Bc}, Order::fa1).closed_form();
  CHECK(fa1.load[idx(TensorId::K)] == N * d * e);            // K, V read once
  CHECK(fa1.load[idx(TensorId::Q)] == Tc * N * d * e);       // Q, O read once per K/V block
  CHECK(fa1.store[idx(TensorId::O)] == (Tc + 1) * N * d * e);  // ... and O written back (+ its initialization)
}

TEST_CASE("tile classification agrees with the mask element by element") {
  // Causal with a window (mostly skipped), causal with seqlen_q > seqlen_k (the first rows see
  // nothing), a window on both sides, one only to the right, and a diagonal-only window.
  struct Mask {
    int64_t sq, sk;
    bool causal;
    int64_t left, right;
  };
  for (const Mask m : {Mask{333, 1000, true, 128, -1}, Mask{1000, 333, true, -1, -1}, Mask{700, 300, false, 5, 0},
                       Mask{300, 700, false, -1, 40}, Mask{257, 257, false, 0, 0}, Mask{100, 30, false, 5, 0}}) {
    Problem p = make(m.sq, m.sk, 16, m.causal);
    p.window_left = m.left;
    if (m.right >= 0) p.window_right = m.right;
    CAPTURE(m.sq);
    CAPTURE(m.sk);
    CAPTURE(m.left);
    CAPTURE(m.right);
    const Schedule s(p, 0, {32, 48}, Order::fa2);
    int64_t skipped = 0;
    for (int64_t i = 0; i < s.Tr(); ++i)
      for (int64_t j = 0; j < s.Tc(); ++j) {
        int64_t visible = 0, total = 0;
        for (int64_t r = i * 32; r < std::min<int64_t>(m.sq, (i + 1) * 32); ++r)
          for (int64_t c = j * 48; c < std::min<int64_t>(m.sk, (j + 1) * 48); ++c, ++total) visible += p.visible(0, r, c);
        const TileKind want = visible == 0 ? TileKind::skipped : visible == total ? TileKind::full : TileKind::partial;
        REQUIRE(s.classify(i, j) == want);
        skipped += want == TileKind::skipped;
      }
    CHECK(skipped == s.tiles_skipped());
    if (m.left == 128) CHECK(skipped > s.steps() / 2);  // the window really skips work
  }
}

TEST_CASE("Tiling from an SRAM budget follows Algorithm 1: Bc = ceil(M/4d), Br = min(Bc, d)") {
  CHECK(Tiling::from_sram(100 * 1024 / 4, 64).Bc == 100);
  CHECK(Tiling::from_sram(100 * 1024 / 4, 64).Br == 64);
  CHECK(Tiling::from_sram(1000, 64).Bc == 4);
  CHECK(Tiling::from_sram(1000, 64).Br == 4);
}

namespace {
// Checks after every forward tile that m and l equal the naive softmax
// statistics over the columns the row has seen so far.
struct InvariantChecker : Observer {
  const Problem& p;
  const harness::Inputs& in;
  int64_t checked = 0;
  double worst = 0;
  InvariantChecker(const Problem& p_, const harness::Inputs& in_) : p(p_), in(in_) {}
  void on_row_stats(const Where& w, const TileStep& st, const std::vector<RowStat>& rows) override {
    // Both orders visit a row's K/V blocks in increasing j, so after this step the row has seen
    // every visible column before the end of K/V block j.
    const int64_t cols_end = std::min<int64_t>(p.seqlen_k, st.col0 + st.cols);
    for (const RowStat& r : rows) {
      double m = -INFINITY;
      std::vector<double> s;
      for (int64_t j = p.col_begin(0, r.row); j < std::min(p.col_end(0, r.row), cols_end); ++j) {
        double dot = 0;
        for (int64_t c = 0; c < p.head_dim; ++c) dot += (double)in.q[p.q_offset(0, r.row, w.h) + c] * in.k[p.k_offset(0, j, 0) + c];
        s.push_back(dot * p.softmax_scale());
        m = std::max(m, s.back());
      }
      double l = 0;
      for (double x : s) l += std::exp(x - m);
      if (s.empty()) {
        REQUIRE(r.m_new == -INFINITY);
        REQUIRE(r.l_new == 0.0f);
      } else {
        worst = std::max({worst, std::fabs(r.m_new - m), std::fabs(r.l_new - l) / l});
        REQUIRE(std::fabs(r.alpha - std::exp(r.m_old - r.m_new)) < 1e-6);
      }
      ++checked;
    }
  }
};
}  // namespace

TEST_CASE("after every step the online-softmax state equals the naive softmax over the columns seen") {
  Problem p = make(100, 150, 32, true);
  p.dtype = DType::fp32;
  const auto in = harness::random_inputs(p, 9);
  for (Order order : {Order::fa1, Order::fa2}) {
    InvariantChecker checker(p, in);
    forward(p, in.q, in.k, in.v, {32, 32}, order, &checker);
    CHECK(checker.checked > 100);
    CHECK(checker.worst < 1e-5);
  }
}

TEST_CASE("observed (serial) and parallel runs give identical results") {
  // The second problem's first Q blocks see nothing (seqlen_q > seqlen_k, causal): the parallel FA2
  // path runs only their visited (closing) step, which must still store O = 0 and LSE = -inf.
  Problem wide = make(200, 333, 64, true), tall = make(333, 100, 64, true);
  for (Problem* p : {&wide, &tall}) {
    p->heads_q = 4;
    p->heads_kv = 2;
  }
  for (const Problem& p : {wide, tall}) {
    CAPTURE(p.describe());
    const auto in = harness::random_inputs(p, 4);
    for (const Tiling tiling : {kCpuDefault, Tiling{32, 32}})
      for (Order order : {Order::fa1, Order::fa2}) {
        ByteCounter counter;
        const auto a = forward(p, in.q, in.k, in.v, tiling, order);
        const auto b = forward(p, in.q, in.k, in.v, tiling, order, &counter);
        CHECK(a.o.data == b.o.data);
        CHECK(a.lse.data == b.lse.data);
      }
    // The deterministic backward (two passes; dQ summed on chip in a fixed order) observed and in parallel:
    // the same bits, and within rounding of the atomic order's gradients.
    const auto f = forward(p, in.q, in.k, in.v, kCpuDefault, Order::fa2);
    ByteCounter counter;
    const auto a = backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o, kCpuDefault, nullptr, Order::dkdv);
    const auto b = backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o, kCpuDefault, &counter, Order::dq);
    const auto atomic = backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o, kCpuDefault, nullptr, Order::backward);
    CHECK(a.dq.data == b.dq.data);
    CHECK(a.dk.data == b.dk.data);
    CHECK(a.dv.data == b.dv.data);
    CHECK(a.dk.data == atomic.dk.data);  // the same dK/dV walk
    CHECK(a.dv.data == atomic.dv.data);
    float largest = 0, off = 0;  // within a bf16 rounding of the largest element
    for (size_t n = 0; n < a.dq.data.size(); ++n) {
      largest = std::max(largest, std::abs(atomic.dq.data[n]));
      off = std::max(off, std::abs(a.dq.data[n] - atomic.dq.data[n]));
    }
    CHECK(off <= largest / 128);
  }
}

TEST_CASE("a walk of only each line's visited steps moves every byte of the pass, an empty line's stores included") {
  for (const Problem& p : byte_problems())
    for (Order order : {Order::fa1, Order::fa2, Order::backward, Order::fa1_backward, Order::dkdv, Order::dq}) {
      CAPTURE(p.describe());
      CAPTURE(to_string(order));
      const Schedule s(p, p.batch - 1, {32, 64}, order);
      ByteCounts walked;
      for (const Transfer& t : s.prologue()) walked.add(t);
      for (const Transfer& t : s.epilogue()) walked.add(t);
      int64_t steps_run = 0;
      for (int64_t line = 0; line < s.outer_blocks(); ++line) {
        const auto [begin, end] = s.visited(line);
        for (int64_t x = begin; x < end; ++x)
          for (const Transfer& t : s.step(s.q_outer() ? s.step_of(line, x) : s.step_of(x, line))) walked.add(t);
        steps_run += end - begin;
      }
      CHECK(walked == s.closed_form());
      CHECK(steps_run >= s.steps() - s.tiles_skipped());
    }
}

TEST_CASE("the stepper walks forward and back to the same states and byte counts") {
  Problem p = make(70, 90, 16, true);
  p.dtype = DType::fp32;
  const auto in = harness::random_inputs(p, 5);
  Stepper st(p, in.q, in.k, in.v, {16, 32}, Order::fa2);
  const auto full = forward(p, in.q, in.k, in.v, {16, 32}, Order::fa2);

  std::vector<ByteCounts> bytes_at;
  std::vector<size_t> events_at;
  while (!st.done()) {
    st.next_tile();
    bytes_at.push_back(st.bytes());
    events_at.push_back(st.tile_events().size());
  }
  CHECK(st.buffers().o.data == full.o.data);  // stepping to the end computes what the executor computes

  st.set_history_cap(1 << 12);                // force replays for part of the walk back
  for (int64_t k = static_cast<int64_t>(bytes_at.size()) - 1; k > 0; --k) {
    REQUIRE(st.prev_tile());
    REQUIRE(st.position() == k);
    CHECK(st.bytes() == bytes_at[k - 1]);
    CHECK(st.tile_events().size() == events_at[k - 1]);
  }
  // Event granularity: next_event walks into the next tile's events.
  REQUIRE(st.position() == 1);
  const Event* first = st.next_event();   // the first event of tile 0
  REQUIRE(first != nullptr);
  CHECK(first->kind == Event::Kind::tile_begin);
  const Event* second = st.next_event();
  REQUIRE(second != nullptr);
  const Event* back = st.prev_event();
  REQUIRE(back == first);
  for (size_t n = 0; n + 1 < events_at[0]; ++n) st.next_event();  // through the end of tile 0 ...
  const Event* next_tile_first = st.next_event();                   // ... into tile 1
  REQUIRE(next_tile_first != nullptr);
  CHECK(st.position() == 2);
  CHECK(next_tile_first->step.index == 1);
}

TEST_CASE("far jumps back land on keyframes and replay to exactly the state of a straight walk") {
  // Every order; a keyframe cap small enough that the keyframes merge several times (and large enough
  // for one copy of the rows a backward stores: merging never goes below one keyframe).
  Problem p = make(150, 170, 16, true);
  p.dtype = DType::fp32;
  p.heads_q = 2;
  p.heads_kv = 1;
  const auto in = harness::random_inputs(p, 6);
  const auto fwd = forward(p, in.q, in.k, in.v, {16, 16}, Order::fa2);
  for (Order order : {Order::fa2, Order::fa1, Order::backward, Order::fa1_backward, Order::dkdv, Order::dq}) {
    CAPTURE(to_string(order));
    auto make_stepper = [&] {
      return is_backward(order)
                 ? std::make_unique<Stepper>(p, in.q, in.k, in.v, fwd.o, fwd.lse, in.d_o, Tiling{16, 16}, 0, 1, order)
                 : std::make_unique<Stepper>(p, in.q, in.k, in.v, Tiling{16, 16}, order, 0, 1);
    };
    auto walked = make_stepper();
    walked->set_history_cap(1 << 10);   // no per-step undo to fall back on
    walked->set_keyframe_cap(48 << 10);
    walked->seek(walked->schedule().steps());
    CHECK(walked->keyframe_interval() > 1);  // merged at least once
    CHECK(walked->keyframe_bytes() <= size_t{48} << 10);
    const int64_t steps = walked->schedule().steps();
    for (int64_t target : {steps - 1, steps / 2, steps / 2 + 1, int64_t{1}, steps / 3, int64_t{0}, steps - 2}) {
      CAPTURE(target);
      walked->seek(target);
      auto straight = make_stepper();
      straight->seek(target);
      REQUIRE(walked->position() == target);
      CHECK(walked->bytes() == straight->bytes());
      CHECK(walked->tile_events().size() == straight->tile_events().size());
      const Buffers& a = walked->buffers();
      const Buffers& b = straight->buffers();
      CHECK(a.o.data == b.o.data);
      CHECK(a.l.data == b.l.data);
      CHECK(a.m.data == b.m.data);
      CHECK(a.dq.data == b.dq.data);
      CHECK(a.dk.data == b.dk.data);
      CHECK(a.dv.data == b.dv.data);
      const Sram& x = walked->sram();
      const Sram& y = straight->sram();
      CHECK(x.O == y.O);
      CHECK(x.m == y.m);
      CHECK(x.l == y.l);
      CHECK(x.dK == y.dK);
      CHECK(x.dV == y.dV);
    }
    walked->seek(steps);  // and on to the end after all the jumps: the same result as one straight walk
    auto straight = make_stepper();
    straight->seek(steps);
    CHECK(walked->buffers().o.data == straight->buffers().o.data);
    CHECK(walked->buffers().dq.data == straight->buffers().dq.data);
    CHECK(walked->buffers().dk.data == straight->buffers().dk.data);
  }
}

TEST_CASE("tiled FA2 forward keeps memory O(N): only the schedule's block ranges depend on the tile grid") {
  const Problem p = make(65536, 65536, 64, false);
  const Schedule s(p, 0, kCpuDefault, Order::fa2);
  CHECK(s.steps() == (65536 / kCpuDefault.Br) * (65536 / kCpuDefault.Bc));
  CHECK(s.step(s.steps() - 1).i == s.Tr() - 1);  // any step is computed on demand, none stored
}

TEST_CASE("the Schedule owns traversal: step <-> tile round trips, and the lines a pass visits") {
  Problem p;
  p.seqlen_q = 200;
  p.seqlen_k = 520;
  p.head_dim = 32;
  p.causal = true;  // bottom-right aligned
  p.dtype = DType::fp32;
  Problem tall = p;  // more queries than keys: the first 320 query rows see no key at all
  tall.seqlen_q = 520;
  tall.seqlen_k = 200;
  for (const Problem& q : {p, tall})
    for (Order o : {Order::fa1, Order::fa2, Order::backward, Order::fa1_backward, Order::dkdv, Order::dq}) {
      const Schedule s(q, 0, {64, 48}, o);
      CAPTURE(to_string(o));
      CHECK(s.q_outer() == (o == Order::fa2 || o == Order::dq));
      CHECK(s.outer_blocks() * s.inner_blocks() == s.steps());
      for (int64_t k = 0; k < s.steps(); ++k) {
        const auto t = s.tile_of(k);
        CHECK(s.step_of(t.i, t.j) == k);
        const TileStep st = s.step(k);
        CHECK((st.i == t.i && st.j == t.j));
      }
    }
  // FA2's forward visits the last tile of a Q block that sees nothing, to write its O_i and LSE_i.
  const Schedule f(tall, 0, {64, 48}, Order::fa2);
  CHECK(f.visible(0).begin == f.visible(0).end);
  CHECK((f.visited(0).begin == f.Tc() - 1 && f.visited(0).end == f.Tc()));
  const TileStep last = f.step(f.step_of(0, f.Tc() - 1));
  CHECK(last.kind == TileKind::skipped);
  bool stores_o = false;
  for (const Transfer& t : last) stores_o |= t.store && t.tensor == TensorId::O;
  CHECK(stores_o);
  const int64_t i = f.Tr() - 1;  // a Q block that sees keys visits exactly them
  CHECK((f.visited(i).begin == f.kv_begin(i) && f.visited(i).end == f.kv_end(i)));
}

TEST_CASE("Q blocks counted from the end put the ragged block first, where a causal walk is shortest") {
  // flashlab's fa3 forward at d = 64: 192-row tiles, 128-key blocks (gpu/shapes.hpp), s = 1024 causal.
  const Tiling top{192, 128}, end{192, 128, true};
  CHECK(end.q_blocks(1024) == 6);
  CHECK((end.q_block(0, 1024).row0 == 0 && end.q_block(0, 1024).rows == 64));
  CHECK((end.q_block(1, 1024).row0 == 64 && end.q_block(1, 1024).rows == 192));
  CHECK((end.q_block(5, 1024).row0 == 832 && end.q_block(5, 1024).rows == 192));
  CHECK((top.q_block(5, 1024).row0 == 960 && top.q_block(5, 1024).rows == 64));
  CHECK((end.q_block_of(63, 1024) == 0 && end.q_block_of(64, 1024) == 1 && end.q_block_of(1023, 1024) == 5));
  CHECK((Tiling{128, 128, true}.q_block(3, 1024).row0 == 384));  // a multiple of Br: the same blocks either way
  const Problem causal = make(1024, 1024, 64, true);
  const Schedule s_top(causal, 0, top, Order::fa2), s_end(causal, 0, end, Order::fa2);
  CHECK(s_top.steps() - s_top.tiles_skipped() == 32);  // the 64-row block last, walking all 8 key blocks
  CHECK(s_end.steps() - s_end.tiles_skipped() == 27);  // ... first, walking 1

  // Every consumer of the Schedule follows: tile kinds element by element, the executor's bytes against
  // the closed form, its outputs against the blocks counted from the start.
  Problem window = make(333, 1000, 32, true);
  window.window_left = 128;
  for (const Problem& p : {make(1000, 1000, 32, true), make(300, 700, 32, true), make(333, 100, 32, true), window}) {
    CAPTURE(p.describe());
    const Tiling tl{96, 64, true};
    const Schedule s(p, 0, tl, Order::fa2);
    for (int64_t i = 0; i < s.Tr(); ++i) {
      const Tiling::Rows rows = tl.q_block(i, p.seqlen_q);
      for (int64_t j = 0; j < s.Tc(); ++j) {
        int64_t visible = 0, total = 0;
        for (int64_t r = rows.row0; r < rows.row0 + rows.rows; ++r)
          for (int64_t c = j * 64; c < std::min<int64_t>(p.seqlen_k, (j + 1) * 64); ++c, ++total) visible += p.visible(0, r, c);
        REQUIRE(s.classify(i, j) == (visible == 0 ? TileKind::skipped : visible == total ? TileKind::full : TileKind::partial));
      }
    }
    const auto in = harness::random_inputs(p, 5);
    ByteCounter counter;
    const auto a = forward(p, in.q, in.k, in.v, tl, Order::fa2, &counter);
    CHECK(counter.counts == s.closed_form());
    const auto b = forward(p, in.q, in.k, in.v, Tiling{96, 64}, Order::fa2);
    float off = 0;
    for (size_t n = 0; n < a.o.data.size(); ++n) off = std::max(off, std::abs(a.o.data[n] - b.o.data[n]));
    CHECK(off < 1e-5f);
    ByteCounter bwd;
    backward(p, in.q, in.k, in.v, a.o, a.lse, in.d_o, tl, &bwd, Order::backward);
    CHECK(bwd.counts == Schedule(p, 0, tl, Order::backward).closed_form());
  }
}
