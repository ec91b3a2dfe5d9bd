#include "session.hpp"

#include <atomic>
#include <cmath>

#include "flashlab/error.hpp"
#include "flashlab/problem_spec.hpp"

namespace flashlab::viz {

using tiled::Event;
using tiled::Order;

Problem Settings::problem() const {
  ProblemSpec spec{.seqlen_q = seqlen, .seqlen_k = seqlen, .hdim = hdim, .causal = causal,
                   .window_left = window_left, .window_right = window_right, .seed = seed, .dtype = dtype};
  spec.mask = mask;
  if (!prefix.empty()) spec.prefix = parse_int_list(prefix, "--prefix");
  if (!doc_lengths.empty()) spec.doc_lengths = parse_int_list(doc_lengths, "--doc-lengths");
  spec.chunk = chunk;
  spec.mask_file = mask_file;
  const Problem p = spec.build();
  if (br < 1 || bc < 1)
    throw Error("tile sizes must be positive, got Br=" + std::to_string(br) + " Bc=" + std::to_string(bc));
  return p;
}

TileView view_of(const tiled::Stepper& st) {
  TileView v;
  const auto& events = st.tile_events();
  if (events.empty()) return v;
  v.valid = true;
  v.step = events.front().step;
  for (const Event& e : events) {
    switch (e.kind) {
      case Event::Kind::transfer: v.transfers.push_back(e.transfer); break;
      case Event::Kind::scores: v.S = &e.a; break;
      case Event::Kind::rescale: v.O_before = &e.a, v.O_after = &e.b; break;
      case Event::Kind::gradients: v.P = &e.a, v.dS = &e.b; break;
      case Event::Kind::row_stats: v.rows = &e.rows; break;
      default: break;
    }
  }
  return v;
}

namespace {

// The problem at sequence length n, for the speedup curve: a mask function's documents and prefix scaled
// in proportion (the last document takes the rounding), the chunk kept.
Problem at_seqlen(Problem q, int64_t n) {
  const int64_t old = q.seqlen_k;
  q.seqlen_q = q.seqlen_k = n;
  if (q.mask.kind == MaskKind::document) {
    int64_t used = 0;
    for (size_t d = 0; d + 1 < q.mask.doc_lengths.size(); ++d)
      used += q.mask.doc_lengths[d] = std::max<int64_t>(1, q.mask.doc_lengths[d] * n / old);
    q.mask.doc_lengths.back() = std::max<int64_t>(1, n - used);
    if (used >= n) q.mask.doc_lengths = {n};  // too many documents for n tokens: one document
  }
  for (int64_t& len : q.mask.prefix) len = std::min(n, len * n / old);
  return q;
}

// Session versions are unique across sessions, so a texture made for an old
// session is never taken for the current one's.
uint64_t next_version() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

// The other order of the same pass, for the side-by-side comparison.
Order partner(Order o) {
  switch (o) {
    case Order::fa1: return Order::fa2;
    case Order::fa2: return Order::fa1;
    case Order::backward: return Order::fa1_backward;
    case Order::fa1_backward: return Order::backward;
    case Order::dkdv: return Order::dq;  // the deterministic backward's two passes
    case Order::dq: return Order::dkdv;
  }
  return Order::fa2;
}

// Undo snapshots each walk's Stepper keeps (stepper.hpp: a snapshot holds the
// on-chip state a step changed and the HBM rows it stored, dropped oldest first
// past the cap). 128 MiB holds ~500 steps of 128 x 128 tiles at d = 64.
constexpr size_t kHistoryCap = size_t{128} << 20;

// An upper bound on one snapshot: every on-chip tile at full block size,
// doubled for the rows the step stored (at most that much again) and bookkeeping.
size_t undo_bytes_bound(const tiled::Schedule& s, const Problem& p) {
  const int64_t Br = s.tiling().Br, Bc = s.tiling().Bc, d = p.head_dim, dv = p.dv();
  int64_t floats = Br * d + Bc * d + Bc * dv + Br * dv + 4 * Br;                            // Q_i, K_j, V_j, O_i; m, l, LSE, D
  if (tiled::is_backward(s.order())) floats += Br * dv + Bc * d + Bc * dv + Br * d;        // dO_i, dK_j, dV_j, dQ_i
  return 2 * static_cast<size_t>(floats) * sizeof(float) + 4096;
}

}  // namespace

Session::Session(Settings s) : settings_(std::move(s)), problem_(settings_.problem()), version_(next_version()) {
  const Order order = tiled::parse_order(settings_.order);
  const tiled::Tiling tiling{settings_.br, settings_.bc, settings_.q_from_end};
  if (tiled::is_backward(order) && problem_.seqlen_q > kMaxBackwardSeqlen)
    throw Error("the backward walk needs the forward's O and LSE, computed on the CPU in O(N^2 d); seqlen " +
                std::to_string(problem_.seqlen_q) + " is above its limit " + std::to_string(kMaxBackwardSeqlen) +
                ": pick a shorter sequence or a forward order");
  gpu_ = sim::load_gpu(settings_.gpu);
  in_ = harness::random_inputs(problem_, settings_.seed);
  std::vector<Order> orders{order};
  if (settings_.compare) orders.push_back(partner(order));
  for (Order o : orders) {
    Walk w{o, nullptr, {}};
    w.stepper = tiled::make_stepper(problem_, in_.q, in_.k, in_.v, in_.d_o, tiling, o);
    w.stepper->set_history_cap(kHistoryCap);
    walks_.push_back(std::move(w));
  }
  undo_capacity_ = static_cast<int64_t>(kHistoryCap / undo_bytes_bound(primary().stepper->schedule(), problem_));

  // The simulator: this problem at the model's batch x heads, all algorithms, and
  // the speedup of each over standard attention against sequence length.
  const auto t0 = std::chrono::steady_clock::now();
  const Pass pass = tiled::is_backward(order) ? Pass::bwd : Pass::fwd;
  const std::vector<sim::Algo> algos = sim::parse_algos("all", &gpu_);  // fa3 only where the GPU has wgmma
  Problem model = problem_;
  model.batch = settings_.model_batch;
  model.heads_q = model.heads_kv = settings_.model_heads;
  model.validate();
  estimates_ = sim::estimate_all(model, gpu_, algos, pass);
  if (!tiled::is_backward(order)) {
    sim::Options probe;
    probe.block_m = settings_.br;
    probe.block_n = settings_.bc;
    probe.residency = &residency_;
    try {
      sim::estimate(model, gpu_, sim::Algo::fa2, Pass::fwd, probe);
    } catch (const Error&) {  // tiles this GPU's shared memory cannot hold: no residency to show
      residency_ = {};
    }
  }
  for (int64_t n = 512; n <= 131072 && model.mask.kind != MaskKind::dense; n *= 2) {  // a dense mask has one size
    const Problem q = at_seqlen(model, n);
    const auto e = sim::estimate_all(q, gpu_, algos, pass);
    curve_.push_back({n, e[1].speedup_vs_standard, e[2].speedup_vs_standard, e.size() > 3 ? e[3].speedup_vs_standard : 0.0});
  }
  estimate_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool Session::skipped_at(int64_t pos) const {
  const tiled::Schedule& s = primary().stepper->schedule();
  const tiled::TileStep t = s.step(pos - 1);
  return s.classify(t.i, t.j) == tiled::TileKind::skipped;
}

void Session::move_all(bool forward) {
  version_ = next_version();
  if (forward) {
    for (Walk& w : walks_) w.stepper->next_tile();
    if (!skipped_at(position())) ++computed_;
    undo_depth_ = std::min(undo_depth_ + 1, undo_capacity_);
  } else {
    if (!skipped_at(position())) --computed_;
    for (Walk& w : walks_) w.stepper->prev_tile();
    undo_depth_ = std::max<int64_t>(undo_depth_ - 1, 0);
  }
}

// Positions a step stops at: every one, or with skip_masked only those whose
// current tile is computed. The search classifies tiles (O(1) each) without
// running them; the run happens in advance().
int64_t Session::next_stop(int64_t pos) const {
  do ++pos;
  while (settings_.skip_masked && pos < steps() && skipped_at(pos));
  return std::min(pos, steps());
}

int64_t Session::prev_stop(int64_t pos) const {
  do --pos;
  while (settings_.skip_masked && pos > 0 && skipped_at(pos));
  return std::max<int64_t>(pos, 0);
}

void Session::step() { target_ = next_stop(target_); }
void Session::back() { target_ = prev_stop(target_); }

void Session::jump(int64_t tile) {
  target_ = std::clamp<int64_t>(tile, 0, steps());
  // Back: undo tile by tile (one tile of work each) while the Stepper surely
  // still holds the snapshots (it needs one more than the steps undone) and
  // that is no more than replaying from a keyframe; else every walk returns
  // to its nearest keyframe (pasting back the rows stored since, no tile
  // work), the walks are brought level, and advance() replays the rest (at
  // most one keyframe interval) over the next frames.
  const int64_t back = position() - target_;
  if (back > 0 && (back + 1 > undo_depth_ || back > primary().stepper->keyframe_interval())) {
    int64_t level = 0;
    for (Walk& w : walks_) level = std::max(level, w.stepper->rewind(target_));
    for (Walk& w : walks_)
      while (w.stepper->position() < level) w.stepper->next_tile();
    computed_ = 0;
    for (int64_t pos = 1; pos <= level; ++pos) computed_ += skipped_at(pos) ? 0 : 1;
    undo_depth_ = 0;
    version_ = next_version();
  }
}

void Session::jump_computed(int64_t n) {
  int64_t pos = 0;
  for (int64_t c = 0; c < n && pos < steps(); ++c) pos = next_stop(pos);
  jump(pos);
}

void Session::advance(std::chrono::duration<double> budget) {
  const auto now = std::chrono::steady_clock::now();
  const double dt = last_advance_.time_since_epoch().count() == 0
                        ? 0.0
                        : std::chrono::duration<double>(now - last_advance_).count();
  last_advance_ = now;
  if (playing) {
    play_debt_ += speed * std::min(dt, 0.25);
    const auto whole = static_cast<int64_t>(play_debt_);
    play_debt_ -= static_cast<double>(whole);
    for (int64_t n = 0; n < whole && target_ < steps(); ++n) target_ = next_stop(target_);
    if (position() >= steps()) playing = false;
  }
  const auto deadline = now + budget;
  while (target_ != position() && std::chrono::steady_clock::now() < deadline) move_all(target_ > position());
  if (!playing) play_debt_ = 0;
}

std::vector<SramItem> sram_footprint(const tiled::Stepper& st) {
  const tiled::Sram& s = st.sram();
  const tiled::Tiling& t = st.schedule().tiling();
  const auto f = [](int64_t n) { return n * int64_t{sizeof(float)}; };
  std::vector<SramItem> items{{"Q_i", f(s.Q.size())}, {"K_j", f(s.K.size())}, {"V_j", f(s.V.size())},
                              {"S_ij", f(t.Br * t.Bc)}, {"O_i", f(s.O.size())},
                              {"m, l", f(s.m.size() + s.l.size())}};
  if (tiled::is_backward(st.schedule().order())) {
    items.push_back({"dO_i", f(s.dO.size())});
    items.push_back({"dQ_i", f(s.dQ.size())});
    items.push_back({"dK_j", f(s.dK.size())});
    items.push_back({"dV_j", f(s.dV.size())});
    items.push_back({"LSE, D", f(s.lse.size() + s.D.size())});
  }
  std::erase_if(items, [](const SramItem& i) { return i.bytes == 0; });
  return items;
}

namespace {

// JSON has no infinities: -inf (a masked score, an empty row's max) is written as a string.
nlohmann::json num(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : (x < 0 ? "-inf" : "inf");
}

nlohmann::json matrix(const tiled::Tile* t) {
  nlohmann::json out = nlohmann::json::array();
  if (!t) return out;
  for (int64_t r = 0; r < t->rows(); ++r) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t c = 0; c < t->cols(); ++c) row.push_back(num((*t)(r, c)));
    out.push_back(std::move(row));
  }
  return out;
}

nlohmann::json bytes_json(const tiled::ByteCounts& b) {
  nlohmann::json load, store;
  for (int t = 0; t < tiled::kTensorCount; ++t) {
    const std::string name = tiled::to_string(static_cast<tiled::TensorId>(t));
    if (b.load[t]) load[name] = b.load[t];
    if (b.store[t]) store[name] = b.store[t];
  }
  return {{"load", load}, {"store", store}, {"total_load", b.total_load()}, {"total_store", b.total_store()}};
}

}  // namespace

nlohmann::json Session::to_json() const {
  nlohmann::json j;
  const Settings& s = settings_;
  j["problem"] = problem_.describe();
  j["settings"] = {{"seqlen", s.seqlen}, {"hdim", s.hdim}, {"br", s.br}, {"bc", s.bc}, {"q_from_end", s.q_from_end}, {"causal", s.causal},
                   {"window_left", s.window_left}, {"window_right", s.window_right}, {"order", s.order},
                   {"dtype", s.dtype}, {"gpu", s.gpu}, {"seed", s.seed}, {"compare", s.compare},
                   {"skip_masked", s.skip_masked}, {"mask", s.mask}, {"prefix", s.prefix},
                   {"doc_lengths", s.doc_lengths}, {"chunk", s.chunk}, {"mask_file", s.mask_file}};
  j["computed_tiles"] = computed_;
  const tiled::NaiveBytes naive = tiled::naive_bytes(problem_, 0);
  j["standard_attention_bytes"] = {{"read", naive.read}, {"write", naive.write}};
  for (const Walk& w : walks_) {
    const tiled::Stepper& st = *w.stepper;
    const tiled::Schedule& sc = st.schedule();
    const TileView v = view_of(st);
    nlohmann::json wj;
    wj["order"] = tiled::to_string(w.order);
    wj["position"] = st.position();
    wj["steps"] = sc.steps();
    wj["Tr"] = sc.Tr();
    wj["Tc"] = sc.Tc();
    wj["tiles_skipped"] = sc.tiles_skipped();
    wj["bytes"] = bytes_json(st.bytes());
    if (v.valid) {
      const tiled::TileStep& t = v.step;
      wj["tile"] = {{"index", t.index}, {"i", t.i}, {"j", t.j}, {"row0", t.row0}, {"rows", t.rows},
                    {"col0", t.col0}, {"cols", t.cols}, {"kind", tiled::to_string(t.kind)}};
      nlohmann::json rows = nlohmann::json::array();
      if (v.rows)
        for (const tiled::RowStat& r : *v.rows)
          rows.push_back({{"row", r.row}, {"m_old", num(r.m_old)}, {"m_new", num(r.m_new)}, {"l_old", num(r.l_old)},
                          {"l_new", num(r.l_new)}, {"alpha", num(r.alpha)}});
      wj["row_stats"] = rows;
      wj["S"] = matrix(v.S);
      wj["O_before"] = matrix(v.O_before);
      wj["O_after"] = matrix(v.O_after);
      wj["P"] = matrix(v.P);
      wj["dS"] = matrix(v.dS);
    }
    if (w.grid.drawn) {
      wj["grid"] = {{"x0", w.grid.x0}, {"y0", w.grid.y0}, {"cell_w", w.grid.cell_w}, {"cell_h", w.grid.cell_h}};
      if (v.valid)
        wj["current_tile_px"] = {static_cast<int>(std::floor(w.grid.x0 + (v.step.j + 0.5f) * w.grid.cell_w)),
                                 static_cast<int>(std::floor(w.grid.y0 + (v.step.i + 0.5f) * w.grid.cell_h))};
    }
    j["walks"].push_back(std::move(wj));
  }
  nlohmann::json est = nlohmann::json::array();
  for (const sim::Estimate& e : estimates_)
    est.push_back({{"algo", e.algo}, {"time_s", e.time_s}, {"hbm_read_bytes", e.hbm_read_bytes},
                   {"hbm_write_bytes", e.hbm_write_bytes}, {"flops", e.flops}, {"bound", e.bound},
                   {"speedup_vs_standard", e.speedup_vs_standard}});
  j["estimates"] = est;
  return j;
}

}  // namespace flashlab::viz
