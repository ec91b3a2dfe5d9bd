#include "stepper.hpp"

#include <algorithm>

#include "flashlab/error.hpp"

namespace flashlab::tiled {

namespace {
size_t sram_bytes(const Sram& m) {
  return (m.Q.size() + m.K.size() + m.V.size() + m.O.size() + m.dO.size() + m.dK.size() + m.dV.size() +
          m.dQ.size() + m.m.size() + m.l.size() + m.lse.size() + m.D.size()) *
         sizeof(float);
}
}  // namespace

std::string to_string(Event::Kind kind) {
  switch (kind) {
    case Event::Kind::transfer: return "transfer";
    case Event::Kind::tile_begin: return "tile_begin";
    case Event::Kind::skip: return "skip";
    case Event::Kind::scores: return "scores";
    case Event::Kind::row_stats: return "row_stats";
    case Event::Kind::rescale: return "rescale";
    case Event::Kind::gradients: return "gradients";
    case Event::Kind::tile_end: return "tile_end";
    case Event::Kind::combine: return "combine";
  }
  return "?";
}

void Recorder::on_transfer(const Where& w, const Transfer& t) {
  Event e{Event::Kind::transfer, w, {}, t, {}, {}, {}};
  events.push_back(std::move(e));
}
void Recorder::on_tile_begin(const Where& w, const TileStep& s) { events.push_back({Event::Kind::tile_begin, w, s, {}, {}, {}, {}}); }
void Recorder::on_skip(const Where& w, const TileStep& s) { events.push_back({Event::Kind::skip, w, s, {}, {}, {}, {}}); }
void Recorder::on_scores(const Where& w, const TileStep& s, const Tile& S) {
  events.push_back({Event::Kind::scores, w, s, {}, S, {}, {}});
}
void Recorder::on_row_stats(const Where& w, const TileStep& s, const std::vector<RowStat>& r) {
  events.push_back({Event::Kind::row_stats, w, s, {}, {}, {}, r});
}
void Recorder::on_rescale(const Where& w, const TileStep& s, const Tile& before, const Tile& after) {
  events.push_back({Event::Kind::rescale, w, s, {}, before, after, {}});
}
void Recorder::on_gradients(const Where& w, const TileStep& s, const Tile& P, const Tile& dS) {
  events.push_back({Event::Kind::gradients, w, s, {}, P, dS, {}});
}
void Recorder::on_tile_end(const Where& w, const TileStep& s) { events.push_back({Event::Kind::tile_end, w, s, {}, {}, {}, {}}); }
void Recorder::on_combine(const Where& w, const TileStep& s, const Tile& lse_splits, const Tile& O) {
  events.push_back({Event::Kind::combine, w, s, {}, lse_splits, O, {}});
}

namespace {
void check_head(const Problem& p, int64_t b, int64_t h) {
  p.validate();
  if (b < 0 || b >= p.batch || h < 0 || h >= p.heads_q)
    throw Error("stepper: head (" + std::to_string(b) + ", " + std::to_string(h) + ") is outside batch " +
                std::to_string(p.batch) + " x heads " + std::to_string(p.heads_q));
}
}  // namespace

Stepper::Stepper(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Tiling tiling, Order order,
                 int64_t b, int64_t h)
    : p_(p), q_(q), k_(k), v_(v), tiling_(tiling), order_(order), b_(b), h_(h) {
  check_head(p, b, h);
  if (is_backward(order)) throw Error("stepper: a backward walk needs O, LSE and dO");
  restart();
}

Stepper::Stepper(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                 const Tensor& lse, const Tensor& d_o, Tiling tiling, int64_t b, int64_t h, Order order)
    : p_(p), q_(q), k_(k), v_(v), o_(o), lse_(lse), d_o_(d_o), tiling_(tiling), order_(order), b_(b), h_(h) {
  check_head(p, b, h);
  if (!is_backward(order)) throw Error("stepper: the backward constructor takes a backward order");
  restart();
}

std::unique_ptr<Stepper> make_stepper(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& d_o, Tiling tiling, Order order) {
  if (!is_backward(order)) return std::make_unique<Stepper>(p, q, k, v, tiling, order);
  const ForwardResult f = forward_for_backward(p, q, k, v, tiling);
  return std::make_unique<Stepper>(p, q, k, v, f.o, f.lse, d_o, tiling, 0, 0, order);
}

void Stepper::restart() {
  buf_ = std::make_unique<Buffers>(is_backward(order_)
                                       ? Buffers::for_backward(p_, q_, k_, v_, o_, lse_, d_o_)
                                       : Buffers::for_forward(p_, q_, k_, v_, order_));
  run_ = std::make_unique<HeadRun>(p_, *buf_, b_, h_, tiling_, order_);
  Recorder rec;
  run_->prologue(&rec);
  prologue_events_ = std::move(rec.events);
  bytes_ = {};
  for (const Event& e : prologue_events_) bytes_.add(e.transfer);
  next_ = 0;
  tile_events_.clear();
  event_cursor_ = -1;
  history_.clear();
  history_bytes_ = 0;
  keyframes_.clear();
  keyframe_bytes_ = 0;
  interval_ = std::max<int64_t>(1, schedule().steps() / 1024);  // up to ~1024 keyframes before merging
}

void Stepper::keep_for_keyframe(const HeadRun::Snapshot& snap) {
  if (keyframes_.empty() || (next_ % interval_ == 0 && keyframes_.back().position < next_)) {
    keyframes_.push_back({next_, run_->sram(), bytes_, {}});
    keyframe_bytes_ += sram_bytes(keyframes_.back().sram);
  }
  Keyframe& kf = keyframes_.back();
  for (const auto& [t, rows] : snap.rows) {
    const RowKey key{static_cast<int>(t.tensor), t.row0, t.rows};
    if (kf.rows.try_emplace(key, t, rows).second) keyframe_bytes_ += rows.size() * sizeof(float);
  }
  while (keyframe_bytes_ > keyframe_cap_ && keyframes_.size() > 1) merge_keyframes();
}

// Keeps every other keyframe; each kept one takes over its dropped neighbour's rows that it does not
// hold yet (their values at the dropped keyframe are the values at the kept one: not stored between).
void Stepper::merge_keyframes() {
  std::vector<Keyframe> kept;
  keyframe_bytes_ = 0;
  for (size_t n = 0; n < keyframes_.size(); n += 2) {
    Keyframe kf = std::move(keyframes_[n]);
    if (n + 1 < keyframes_.size())
      for (auto& [key, row] : keyframes_[n + 1].rows) kf.rows.try_emplace(key, std::move(row));
    keyframe_bytes_ += sram_bytes(kf.sram);
    for (const auto& [key, row] : kf.rows) keyframe_bytes_ += row.second.size() * sizeof(float);
    kept.push_back(std::move(kf));
  }
  keyframes_ = std::move(kept);
  interval_ *= 2;
}

size_t Stepper::snapshot_bytes(const HeadRun::Snapshot& s) const {
  size_t floats = 0;
  for (const auto& r : s.rows) floats += r.second.size();
  return sram_bytes(s.sram) + floats * sizeof(float) + sizeof(Undo);
}

bool Stepper::next_tile() {
  if (done()) return false;
  const TileStep st = schedule().step(next_);
  Undo undo{run_->snapshot(st), bytes_};
  keep_for_keyframe(undo.snap);
  history_bytes_ += snapshot_bytes(undo.snap);
  history_.push_back(std::move(undo));
  while (history_bytes_ > history_cap_ && history_.size() > 1) {
    history_bytes_ -= snapshot_bytes(history_.front().snap);
    history_.pop_front();
  }
  Recorder rec;
  run_->step(next_, &rec);
  ++next_;
  if (done()) run_->epilogue(&rec);  // the epilogue's transfers belong to the last step
  for (const Event& e : rec.events)
    if (e.kind == Event::Kind::transfer) bytes_.add(e.transfer);
  tile_events_ = std::move(rec.events);
  event_cursor_ = -1;
  return true;
}

bool Stepper::prev_tile() {
  if (next_ == 0) return false;
  const int64_t target = next_ - 1;
  auto pop = [this] {
    Undo undo = std::move(history_.back());
    history_bytes_ -= snapshot_bytes(undo.snap);
    history_.pop_back();
    return undo;
  };
  if (target == 0 && !history_.empty()) {  // back to the start: nothing was run yet
    Undo undo = pop();
    run_->restore(undo.snap);
    bytes_ = undo.bytes_before;
    next_ = 0;
    tile_events_.clear();
    event_cursor_ = -1;
  } else if (history_.size() >= 2) {  // undo two steps, then redo one to recover its events
    pop();
    Undo undo = pop();
    run_->restore(undo.snap);
    bytes_ = undo.bytes_before;
    next_ = target - 1;
    next_tile();
  } else {  // the snapshots were dropped to keep memory bounded: from the keyframe before
    seek(target);
  }
  return true;
}

int64_t Stepper::rewind(int64_t tile) {
  if (tile < 0 || tile > schedule().steps())
    throw Error("stepper: tile " + std::to_string(tile) + " is outside 0.." + std::to_string(schedule().steps()));
  if (tile >= next_) return next_;
  // The keyframe to land on: at or before tile - 1, so that replaying step tile - 1 recovers its events.
  const int64_t want = std::max<int64_t>(tile - 1, 0);
  size_t a = 0;
  while (a + 1 < keyframes_.size() && keyframes_[a + 1].position <= want) ++a;
  if (keyframes_.empty()) {  // nothing run yet
    restart();
    return next_;
  }
  for (size_t n = keyframes_.size(); n-- > a;)  // newest first: older values win
    for (const auto& [key, row] : keyframes_[n].rows) run_->restore_rows(row.first, row.second);
  Keyframe& kf = keyframes_[a];
  run_->restore_sram(kf.sram);
  bytes_ = kf.bytes;
  next_ = kf.position;
  keyframes_.resize(a + 1);
  kf.rows.clear();  // re-recorded as the steps after it run again
  keyframe_bytes_ = 0;
  for (const Keyframe& k : keyframes_) {
    keyframe_bytes_ += sram_bytes(k.sram);
    for (const auto& [key, row] : k.rows) keyframe_bytes_ += row.second.size() * sizeof(float);
  }
  history_.clear();  // the undo snapshots belong to later states
  history_bytes_ = 0;
  tile_events_.clear();
  event_cursor_ = -1;
  return next_;
}

void Stepper::seek(int64_t tile) {
  if (tile < 0 || tile > schedule().steps())
    throw Error("stepper: tile " + std::to_string(tile) + " is outside 0.." + std::to_string(schedule().steps()));
  if (tile < next_) rewind(tile);
  while (next_ < tile) next_tile();
}

const Event* Stepper::next_event() {
  if (event_cursor_ + 1 < static_cast<int64_t>(tile_events_.size())) return &tile_events_[++event_cursor_];
  if (!next_tile()) return nullptr;
  event_cursor_ = 0;
  return tile_events_.empty() ? nullptr : &tile_events_[0];
}

const Event* Stepper::prev_event() {
  if (event_cursor_ > 0) return &tile_events_[--event_cursor_];
  if (!prev_tile() || tile_events_.empty()) return nullptr;
  event_cursor_ = static_cast<int64_t>(tile_events_.size()) - 1;
  return &tile_events_[event_cursor_];
}

}  // namespace flashlab::tiled
