// Stepper: walks one (batch, head) of a pass a tile or an event at a time,
// forwards and backwards, for `flashlab step`, the visualizer and lessons.
//
// Going forward runs exactly one tile step of the executor (O(tile) work)
// and records its events. Going back restores a snapshot of what that step
// changed (the on-chip state and the HBM rows it stored). Snapshots are kept
// up to a memory cap.
//
// Far jumps back use keyframes: every `interval` steps the stepper keeps the
// on-chip state and byte counters, and for the HBM rows the following steps
// store, their values at the keyframe (the first time each is stored). Going
// back to step t pastes those rows back, newest keyframe first, down to the
// keyframe at or before t, and replays at most one interval. In FA2 order
// each O row block is stored once, so the keyframes cost about one copy of
// the head's O; in FA1 order and the backward, rows are stored again and
// again, and when the keyframes outgrow their cap, neighbours merge (the
// interval doubles).
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "executor.hpp"

namespace flashlab::tiled {

struct Event {
  enum class Kind { transfer, tile_begin, skip, scores, row_stats, rescale, gradients, tile_end, combine };
  Kind kind;
  Where where;
  TileStep step;
  Transfer transfer{};                 // transfer
  Tile a, b;                           // scores: S; rescale: O before, O after; gradients: P, dS;
                                       // combine: LSE of each split (rows, splits), the merged O
  std::vector<RowStat> rows;           // row_stats
};
std::string to_string(Event::Kind kind);

// Records every event it is told about.
class Recorder : public Observer {
 public:
  std::vector<Event> events;
  void on_transfer(const Where& w, const Transfer& t) override;
  void on_tile_begin(const Where& w, const TileStep& s) override;
  void on_skip(const Where& w, const TileStep& s) override;
  void on_scores(const Where& w, const TileStep& s, const Tile& S) override;
  void on_row_stats(const Where& w, const TileStep& s, const std::vector<RowStat>& r) override;
  void on_rescale(const Where& w, const TileStep& s, const Tile& before, const Tile& after) override;
  void on_gradients(const Where& w, const TileStep& s, const Tile& P, const Tile& dS) override;
  void on_tile_end(const Where& w, const TileStep& s) override;
  void on_combine(const Where& w, const TileStep& s, const Tile& lse_splits, const Tile& O) override;
};

class Stepper;
// A Stepper for any order over q, k, v (and d_o for a backward order): a backward walk gets the
// forward's O and LSE from forward_for_backward (executor.hpp).
std::unique_ptr<Stepper> make_stepper(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& d_o, Tiling tiling, Order order);

class Stepper {
 public:
  // Forward (fa1 / fa2) over inputs q, k, v.
  Stepper(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Tiling tiling, Order order,
          int64_t b = 0, int64_t h = 0);
  // Backward over q, k, v and the forward's o, lse with upstream gradient d_o.
  Stepper(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
          const Tensor& d_o, Tiling tiling, int64_t b = 0, int64_t h = 0, Order order = Order::backward);
  Stepper(const Stepper&) = delete;  // the buffers point into this object
  Stepper& operator=(const Stepper&) = delete;

  const Schedule& schedule() const { return run_->schedule(); }
  const Sram& sram() const { return run_->sram(); }
  const Buffers& buffers() const { return *buf_; }
  int64_t position() const { return next_; }          // tile steps done
  bool done() const { return next_ >= schedule().steps(); }
  const ByteCounts& bytes() const { return bytes_; }  // moved so far, prologue included
  const std::vector<Event>& prologue_events() const { return prologue_events_; }

  // Tile granularity.
  bool next_tile();                                   // false when done
  bool prev_tile();                                   // false at the start
  void seek(int64_t tile);                            // to the state after `tile` steps
  // To the nearest keyframe at or before `tile` (pasting rows back, no replay); returns the position
  // reached, from which next_tile() goes on. For far jumps spread over frames (the visualizer).
  int64_t rewind(int64_t tile);
  int64_t keyframe_interval() const { return interval_; }
  size_t keyframe_bytes() const { return keyframe_bytes_; }
  const std::vector<Event>& tile_events() const { return tile_events_; }  // of the last step run

  // Event granularity within and across tiles: returns the event now current.
  const Event* next_event();
  const Event* prev_event();

  void set_history_cap(size_t bytes) { history_cap_ = bytes; }
  void set_keyframe_cap(size_t bytes) { keyframe_cap_ = bytes; }

 private:
  void restart();
  size_t snapshot_bytes(const HeadRun::Snapshot& s) const;
  void keep_for_keyframe(const HeadRun::Snapshot& s);
  void merge_keyframes();

  Problem p_;
  std::unique_ptr<Buffers> buf_;
  std::unique_ptr<HeadRun> run_;
  Tensor q_, k_, v_, o_, lse_, d_o_;  // own copies: the Buffers point into them
  Tiling tiling_;
  Order order_;
  int64_t b_, h_;
  int64_t next_ = 0;
  ByteCounts bytes_;
  std::vector<Event> prologue_events_;
  std::vector<Event> tile_events_;
  int64_t event_cursor_ = -1;  // index into tile_events_ of the current event
  struct Undo {
    HeadRun::Snapshot snap;
    ByteCounts bytes_before;
  };
  std::deque<Undo> history_;
  size_t history_bytes_ = 0;
  size_t history_cap_ = size_t{256} << 20;

  struct RowKey {  // a stored row block: (tensor, first row, rows)
    int tensor;
    int64_t row0, rows;
    auto operator<=>(const RowKey&) const = default;
  };
  struct Keyframe {
    int64_t position = 0;  // tile steps done
    Sram sram;
    ByteCounts bytes;
    std::map<RowKey, std::pair<Transfer, std::vector<float>>> rows;  // values at `position`
  };
  std::vector<Keyframe> keyframes_;  // positions increasing, the first at 0
  int64_t interval_ = 1;
  size_t keyframe_bytes_ = 0;
  size_t keyframe_cap_ = size_t{256} << 20;
};

}  // namespace flashlab::tiled
