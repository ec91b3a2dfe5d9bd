#include "decode_session.hpp"

#include <cmath>
#include <limits>

#include "decode_check.hpp"
#include "flashlab/error.hpp"

namespace flashlab::viz {
namespace {

// The events of entry b's query heads of kv head g, by schedule step.
class Recorder : public tiled::Observer {
 public:
  struct StepEvents {
    int64_t split = -1;
    bool empty = false;
    std::vector<std::pair<int64_t, tiled::RowStat>> stats;  // (packed row, the executor's RowStat)
  };
  Recorder(const DecodeSession& s, int64_t steps) : steps_(static_cast<size_t>(steps)), s_(s) {}

  std::vector<StepEvents> steps_;
  std::vector<float> lse_s;             // (rows, splits)
  std::vector<int64_t> combine_step;    // (rows)

  void on_skip(const tiled::Where& at, const tiled::TileStep& t) override {
    if (!mine(at)) return;
    steps_[at.step].split = at.split;
    steps_[at.step].empty = true;
    (void)t;
  }
  void on_row_stats(const tiled::Where& at, const tiled::TileStep&, const std::vector<tiled::RowStat>& st) override {
    if (!mine(at)) return;
    steps_[at.step].split = at.split;
    for (const tiled::RowStat& r : st) steps_[at.step].stats.push_back({packed(at.h, r.row), r});
  }
  void on_combine(const tiled::Where& at, const tiled::TileStep& t, const tiled::Tile& lse_splits,
                  const tiled::Tile&) override {
    if (!mine(at)) return;
    const int64_t S = s_.schedule().splits();
    for (int64_t r = 0; r < t.rows; ++r) {
      const int64_t p = packed(at.h, t.row0 + r);
      combine_step[p] = at.step;
      for (int64_t s = 0; s < S; ++s) lse_s[p * S + s] = lse_splits(r, s);
    }
  }

 private:
  bool mine(const tiled::Where& at) const {
    return at.b == s_.b() && at.step >= 0 && at.h / s_.group() == s_.g();
  }
  int64_t packed(int64_t h, int64_t i) const { return (h - s_.g() * s_.group()) * s_.problem().q_len + i; }
  const DecodeSession& s_;
};

}  // namespace

namespace {
// The settings, once the problem is valid and the walked entry and kv head lie inside it (before the
// schedule of that entry is built).
const DecodeSettings& checked(const DecodeSettings& s) {
  s.problem.validate();
  if (s.batch_index < 0 || s.batch_index >= s.problem.batch)
    throw Error("--walk-batch " + std::to_string(s.batch_index) + " is outside the batch: expected 0.." +
                std::to_string(s.problem.batch - 1));
  if (s.kv_head < 0 || s.kv_head >= s.problem.heads_kv)
    throw Error("--walk-kv-head " + std::to_string(s.kv_head) + " is outside the kv heads: expected 0.." +
                std::to_string(s.problem.heads_kv - 1));
  return s;
}
}  // namespace

DecodeSession::DecodeSession(const DecodeSettings& s)
    : set_(checked(s)), d_(s.problem), sched_(d_, s.batch_index, s.tiling) {
  const int64_t S = sched_.splits(), R = rows();
  Recorder rec(*this, steps());
  rec.lse_s.assign(static_cast<size_t>(R * S), -std::numeric_limits<float>::infinity());
  rec.combine_step.assign(static_cast<size_t>(R), -1);
  const DecodeOutputs<float> out = tiled::decode(d_, harness::random_decode_inputs(d_, s.seed), s.tiling, &rec);
  lse_s_ = std::move(rec.lse_s);
  combine_step_ = std::move(rec.combine_step);
  for (int64_t r = 0; r < R; ++r) lse_.push_back(out.lse[d_.lse_offset(b(), head_of(r), query_of(r))]);

  // The state after each prefix of the walk: the previous one with this step's events applied.
  snap_.assign(1, std::vector<RowState>(static_cast<size_t>(S * R)));
  for (int64_t k = 0; k < steps(); ++k) {
    std::vector<RowState> next = snap_.back();
    const Recorder::StepEvents& e = rec.steps_[k];
    if (e.empty) {
      const tiled::TileStep t = sched_.step(k).tile;
      for (int64_t hh = 0; hh < group(); ++hh)
        for (int64_t i = t.row0; i < t.row0 + t.rows; ++i) next[e.split * R + hh * d_.q_len + i] = {true, true, 0, 0};
    }
    for (const auto& [r, st] : e.stats) next[e.split * R + r] = {true, false, st.m_new, st.l_new};
    snap_.push_back(std::move(next));
  }

  first_step_.assign(static_cast<size_t>(sched_.tiles().Tc()), -1);
  for (int64_t k = steps() - 1; k >= 0; --k) {
    const tiled::SplitSchedule::Step st = sched_.step(k);
    if (st.kind == tiled::SplitSchedule::Kind::tile) first_step_[st.tile.j] = k;
  }
  if (d_.paged()) {
    owner_.assign(static_cast<size_t>(d_.num_pages), -1);
    logical_.assign(static_cast<size_t>(d_.num_pages), -1);
    for (int64_t e = 0; e < d_.batch; ++e)
      for (int64_t p = 0; p < d_.max_pages; ++p) {
        const int64_t phys = d_.block_table[e * d_.max_pages + p];
        owner_[phys] = e;
        logical_[phys] = p;
      }
  }
}

void DecodeSession::jump(int64_t position) { pos_ = std::clamp<int64_t>(position, 0, steps()); }

bool DecodeSession::combined(int64_t r) const { return combine_step_[r] >= 0 && combine_step_[r] < pos_; }

float DecodeSession::weight(int64_t s, int64_t r) const { return std::exp(lse_split(s, r) - lse(r)); }

DecodeSession::SplitState DecodeSession::split_state(int64_t s) const {
  if (!has_current()) return SplitState::pending;
  const int64_t cur = current().split;
  if (cur == s) return SplitState::walking;
  if (cur < 0 || cur > s) return SplitState::done;  // combine steps come after every split
  return SplitState::pending;
}

namespace {
// A number for the dump: non-finite ones as "-inf", "inf", "nan" (JSON has none), as session.cpp writes them.
nlohmann::json number(float x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : (x < 0 ? "-inf" : "inf");
}
}  // namespace

nlohmann::json DecodeSession::to_json() const {
  nlohmann::json j;
  j["problem"] = d_.describe();
  j["batch_index"] = b();
  j["kv_head"] = g();
  j["position"] = pos_;
  j["steps"] = steps();
  j["splits"] = sched_.splits();
  j["rows"] = rows();
  if (has_current()) {
    const tiled::SplitSchedule::Step st = current();
    const char* kind = st.kind == tiled::SplitSchedule::Kind::tile    ? "tile"
                       : st.kind == tiled::SplitSchedule::Kind::empty ? "empty"
                                                                       : "combine";
    j["current"] = {{"kind", kind}, {"split", st.split}, {"i", st.tile.i}, {"j", st.tile.j}};
  }
  for (int64_t s = 0; s < sched_.splits(); ++s) {
    const auto r = sched_.split_blocks(s);
    nlohmann::json rows_j = nlohmann::json::array();
    for (int64_t r2 = 0; r2 < rows(); ++r2) {
      const RowState& x = state(s, r2);
      rows_j.push_back({{"started", x.started}, {"empty", x.empty}, {"m", number(x.m)}, {"l", number(x.l)}});
    }
    j["split_state"].push_back({{"blocks", {r.begin, r.end}}, {"rows", rows_j}});
  }
  for (int64_t r = 0; r < rows(); ++r) {
    nlohmann::json c = {{"head", head_of(r)}, {"query", query_of(r)}, {"combined", combined(r)}};
    if (combined(r)) {
      c["lse"] = number(lse(r));
      for (int64_t s = 0; s < sched_.splits(); ++s) {
        c["lse_splits"].push_back(number(lse_split(s, r)));
        c["weights"].push_back(number(weight(s, r)));
      }
    }
    j["combine"].push_back(c);
  }
  return j;
}

}  // namespace flashlab::viz
