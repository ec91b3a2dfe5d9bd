// flashlab_viz_session_check: a Session that jumps back reaches the same state
// as one that walked straight to the target, whether the jump undid tiles from
// the Stepper's history (no further back than a keyframe interval) or landed on
// a keyframe and replayed the rest (a long way back, or to the start): same
// tile, S_ij, O_i before/after, row statistics, bytes per tensor and
// computed-tile count. N = 8192 in 32 x 32 tiles gives keyframes 64 or more
// steps apart, so a jump of 40 undoes and one of 150 lands on a keyframe.
// Exits 1 with the first difference it finds.
#include <cstdio>
#include <iostream>
#include <string>

#include "session.hpp"

using namespace flashlab;
using namespace flashlab::viz;

namespace {

int failures = 0;
void fail(const std::string& what) {
  std::cerr << "FAIL: " << what << "\n";
  ++failures;
}

bool same_tile(const tiled::Tile* a, const tiled::Tile* b) {
  if (!a || !b) return a == b;
  if (a->rows() != b->rows() || a->cols() != b->cols()) return false;
  for (int64_t r = 0; r < a->rows(); ++r)
    for (int64_t c = 0; c < a->cols(); ++c)
      if ((*a)(r, c) != (*b)(r, c) && !((*a)(r, c) != (*a)(r, c) && (*b)(r, c) != (*b)(r, c))) return false;
  return true;
}

// Every walk of `got` against the same walk of `want`.
void compare(const Session& got, const Session& want, const std::string& what) {
  if (got.position() != want.position() || got.computed() != want.computed())
    return fail(what + ": position " + std::to_string(got.position()) + " (computed " + std::to_string(got.computed()) +
                "), straight walk " + std::to_string(want.position()) + " (" + std::to_string(want.computed()) + ")");
  for (size_t n = 0; n < got.walks().size(); ++n) {
    const TileView a = view_of(*got.walks()[n].stepper), b = view_of(*want.walks()[n].stepper);
    const std::string w = what + ", walk " + tiled::to_string(got.walks()[n].order);
    if (a.valid != b.valid || (a.valid && (a.step.i != b.step.i || a.step.j != b.step.j)))
      return fail(w + ": a different tile");
    if (!same_tile(a.S, b.S) || !same_tile(a.O_before, b.O_before) || !same_tile(a.O_after, b.O_after) ||
        !same_tile(a.P, b.P) || !same_tile(a.dS, b.dS))
      return fail(w + ": tile values differ");
    if ((a.rows == nullptr) != (b.rows == nullptr) || (a.rows && a.rows->size() != b.rows->size()))
      return fail(w + ": row statistics differ");
    for (size_t r = 0; a.rows && r < a.rows->size(); ++r) {
      const tiled::RowStat &x = (*a.rows)[r], &y = (*b.rows)[r];
      if (x.m_new != y.m_new || x.l_new != y.l_new || x.alpha != y.alpha)
        return fail(w + ": row " + std::to_string(r) + " statistics differ");
    }
    const tiled::ByteCounts &ba = got.walks()[n].stepper->bytes(), &bb = want.walks()[n].stepper->bytes();
    for (int t = 0; t < tiled::kTensorCount; ++t)
      if (ba.load[t] != bb.load[t] || ba.store[t] != bb.store[t])
        return fail(w + ": bytes of " + tiled::to_string(static_cast<tiled::TensorId>(t)) + " differ");
  }
  std::cout << "  " << what << ": step " << got.position() << ", same as the straight walk\n";
}

void arrive(Session& s) { s.advance(std::chrono::hours(1)); }

void check(const Settings& set) {
  std::cout << set.order << (set.compare ? " + partner" : "") << ", N=" << set.seqlen << (set.causal ? " causal" : "")
            << ":\n";
  Session s(set);
  const int64_t far = std::min<int64_t>(3000, s.steps()), near = far - 40, start = 3;
  s.jump(far);
  arrive(s);
  const int64_t depth = s.undo_depth();

  if (s.keyframe_interval() < 41) fail("keyframes only " + std::to_string(s.keyframe_interval()) + " steps apart");
  s.jump(near);  // 40 back: within the history and within a keyframe interval: undo
  if (s.undo_depth() != depth) fail("a jump 40 steps back did not undo (undo depth " + std::to_string(depth) + ")");
  arrive(s);
  Session straight(set);
  straight.jump(near);
  arrive(straight);
  compare(s, straight, "undone " + std::to_string(far - near) + " steps");

  s.jump(far);
  arrive(s);
  const int64_t back = far - 150;  // further than a keyframe interval: land on the keyframe before, replay
  s.jump(back);
  if (s.undo_depth() != 0 || s.position() > back || s.position() < back - s.keyframe_interval())
    fail("a jump 150 steps back did not land on the keyframe before it (at " + std::to_string(s.position()) + ")");
  arrive(s);
  Session straight1(set);
  straight1.jump(back);
  arrive(straight1);
  compare(s, straight1, "from a keyframe");

  s.jump(start);  // to step 3, far back: the first keyframe, then 3 steps
  if (s.undo_depth() != 0 || s.position() > start)
    fail("a jump to step 3 from " + std::to_string(back) + " did not land on the first keyframe");
  arrive(s);
  Session straight2(set);
  straight2.jump(start);
  arrive(straight2);
  compare(s, straight2, "replayed from step 0");

  s.jump(far);  // forward again, then back by the play-and-step path
  arrive(s);
  for (int n = 0; n < 5; ++n) {
    s.back();
    arrive(s);
  }
  Session straight3(set);
  straight3.jump(far);
  arrive(straight3);
  for (int n = 0; n < 5; ++n) {
    straight3.back();
    arrive(straight3);
  }
  compare(s, straight3, "five steps back");
}

}  // namespace

int main() {
  Settings fa2;
  fa2.seqlen = 8192, fa2.hdim = 32, fa2.br = fa2.bc = 32, fa2.causal = true, fa2.order = "fa2";
  check(fa2);
  Settings fa1 = fa2;
  fa1.order = "fa1", fa1.compare = true, fa1.causal = false;
  check(fa1);
  Settings bwd = fa2;
  bwd.order = "bwd";
  check(bwd);
  Settings dq = bwd;  // the deterministic backward's dQ pass beside its dK/dV pass
  dq.order = "bwd-dq", dq.compare = true;
  check(dq);
  if (failures) {
    std::cerr << failures << " check(s) failed\n";
    return 1;
  }
  std::cout << "ok: jumps back reach the same state as straight walks\n";
  return 0;
}
