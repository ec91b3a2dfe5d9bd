// DecodeSession: the model behind flashlab-viz --decode. One split-KV decode
// (tiled_cpu/decode_executor.hpp) run once on random inputs with an Observer
// that records, for one batch entry b and one kv head g, what every schedule
// step did to the query rows of g: the q_len x (heads_q / heads_kv) rows the GPU
// kernel packs into one tile. Stepping forward and back is then an index into
// those records; no number is computed here that the executor did not report.
//
//   the walk          SplitSchedule(d, b, tiling): its steps, split_blocks(s), computed(s, i)
//   m^(s), l^(s)      Observer::on_row_stats of the split's tile steps (Where::split)
//   LSE^(s)           Observer::on_combine's (rows, splits) matrix
//   LSE               the executor's LSE output; the weight of split s is exp(LSE^(s) - LSE)
//   pages             DecodeProblem::cache_row (the cache's one indexing rule) and its block table
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "decode_executor.hpp"
#include "flashlab/decode_problem.hpp"
#include "split_schedule.hpp"

namespace flashlab::viz {

struct DecodeSettings {
  DecodeProblem problem;  // validated (cli/decode_flags)
  uint64_t seed = 0;
  tiled::Tiling tiling = tiled::kDecodeDefault;
  int64_t batch_index = 0;  // the entry whose walk is shown
  int64_t kv_head = 0;      // the kv head whose packed query rows are shown
};

class DecodeSession {
 public:
  explicit DecodeSession(const DecodeSettings& s);

  const DecodeProblem& problem() const { return d_; }
  const tiled::SplitSchedule& schedule() const { return sched_; }
  const DecodeSettings& settings() const { return set_; }
  int64_t b() const { return set_.batch_index; }
  int64_t g() const { return set_.kv_head; }
  int64_t group() const { return d_.heads_q / d_.heads_kv; }  // query heads per kv head
  // Packed rows: r = hh * q_len + i for query head g * group + hh and query i.
  int64_t rows() const { return group() * d_.q_len; }
  int64_t head_of(int64_t r) const { return g() * group() + r / d_.q_len; }
  int64_t query_of(int64_t r) const { return r % d_.q_len; }

  // Navigation: position = schedule steps done (0 .. steps()); the current step is position - 1.
  int64_t steps() const { return sched_.steps(); }
  int64_t position() const { return pos_; }
  void jump(int64_t position);
  void step() { jump(pos_ + 1); }
  void back() { jump(pos_ - 1); }
  bool has_current() const { return pos_ > 0; }
  tiled::SplitSchedule::Step current() const { return sched_.step(pos_ - 1); }

  // Split s's running state of packed row r after the steps done so far (as the executor reported it).
  struct RowState {
    bool started = false;  // some tile step of split s has run on row r
    bool empty = false;    // split s saw no key of this row's Q block (O^(s) = 0, LSE^(s) = -inf)
    float m = 0, l = 0;    // m^(s), l^(s) after the split's last step so far
  };
  const RowState& state(int64_t s, int64_t r) const { return snap_[pos_][s * rows() + r]; }
  // The combine of row r: done once its Q block's combine step has run.
  bool combined(int64_t r) const;
  float lse_split(int64_t s, int64_t r) const { return lse_s_[r * sched_.splits() + s]; }  // on_combine's LSE^(s)
  float lse(int64_t r) const { return lse_[r]; }                                            // the executor's LSE
  float weight(int64_t s, int64_t r) const;                                                 // exp(LSE^(s) - LSE)

  // Whether some tile step done so far computed K/V block j (any Q block).
  bool block_walked(int64_t j) const { return first_step_[j] >= 0 && first_step_[j] < pos_; }

  // Split s's state: not started, walking, done (its partial O^(s), LSE^(s) stored).
  enum class SplitState { pending, walking, done };
  SplitState split_state(int64_t s) const;

  // The physical page (or, contiguous, -1) holding logical key j of entry b.
  int64_t page_of(int64_t b, int64_t j) const { return d_.paged() ? d_.cache_row(b, j) / d_.page_size : -1; }
  // The entry owning physical page p through the block table (-1: no entry maps it).
  int64_t owner_of_page(int64_t p) const { return owner_[p]; }
  int64_t logical_page_of(int64_t p) const { return logical_[p]; }

  nlohmann::json to_json() const;  // --dump: the step and every number the panels show

  bool playing = false;
  double speed = 2;  // steps per second
  double carry = 0;  // fractional steps owed by play

 private:
  DecodeSettings set_;
  DecodeProblem d_;
  tiled::SplitSchedule sched_;
  int64_t pos_ = 0;
  std::vector<std::vector<RowState>> snap_;  // (steps + 1) x (splits * rows): the state after each prefix
  std::vector<int64_t> combine_step_;        // (rows): the step index of the row's combine, or -1
  std::vector<float> lse_s_, lse_;           // (rows, splits), (rows)
  std::vector<int64_t> owner_, logical_;     // (num_pages)
  std::vector<int64_t> first_step_;          // (Tc): the first step computing block j, or -1
};

}  // namespace flashlab::viz
