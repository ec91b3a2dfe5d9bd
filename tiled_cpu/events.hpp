// Observer: what the tiled executor reports as it runs. Every method has an
// empty default, so a listener overrides only what it needs; a run with no
// observer (nullptr) prepares none of the event data and pays nothing.
#pragma once
#include <cstdint>
#include <vector>

#include "flashlab/views.hpp"
#include "schedule.hpp"

namespace flashlab::tiled {

// Where an event happened: which head, which pass, which step of it.
// step = -1 for the prologue, schedule.steps() for the epilogue.
struct Where {
  int64_t b = 0, h = 0;
  Order order = Order::fa2;
  int64_t step = 0;
  int64_t split = -1;  // split-KV decoding: the split this step belongs to; -1 outside a split (and the combine)
};

// The online-softmax state of one query row across one tile step:
//   m_new = max(m_old, rowmax(S_ij)),  alpha = exp(m_old - m_new),
//   l_new = alpha * l_old + rowsum(exp(S_ij - m_new))
// (FA1 keeps O normalized, so it reports the same m and l with l_new as in Algorithm 1.)
struct RowStat {
  int64_t row;   // query row within the sequence
  float m_old, m_new;
  float l_old, l_new;
  float alpha;
};

using Tile = RowMajor<float>;

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_transfer(const Where&, const Transfer&) {}
  virtual void on_tile_begin(const Where&, const TileStep&) {}
  virtual void on_skip(const Where&, const TileStep&) {}
  // S_ij: the logits of the tile after scale, softcap, ALiBi and mask (-inf where masked).
  virtual void on_scores(const Where&, const TileStep&, const Tile& S) {}
  virtual void on_row_stats(const Where&, const TileStep&, const std::vector<RowStat>&) {}
  // The output accumulator O_i before and after this step's rescale-and-add.
  virtual void on_rescale(const Where&, const TileStep&, const Tile& O_before, const Tile& O_after) {}
  // Backward: the tile's P_ij (recomputed from LSE) and dS_ij.
  virtual void on_gradients(const Where&, const TileStep&, const Tile& P, const Tile& dS) {}
  virtual void on_tile_end(const Where&, const TileStep&) {}
  // Split-KV decoding's combine of Q block i (split_schedule.hpp): each row's LSE^(s) of every split
  // (rows, splits) and the merged O_i (rows, d).
  virtual void on_combine(const Where&, const TileStep&, const Tile& lse_splits, const Tile& O) {}
};

// Adds up every transfer it sees: what the tests compare with closed-form counts.
class ByteCounter : public Observer {
 public:
  ByteCounts counts;
  void on_transfer(const Where&, const Transfer& t) override { counts.add(t); }
};

}  // namespace flashlab::tiled
