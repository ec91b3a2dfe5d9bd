// The tiled executor: runs a Schedule on real data with online softmax.
//
//   forward(p, q, k, v, tiling, Order::fa1 | Order::fa2)  ->  O, LSE
//   backward(p, q, k, v, o, lse, dO, tiling[, obs, order]) ->  dQ, dK, dV   (FA2 order, FA1's Algorithm 4, or
//                                                                    the deterministic pair: Order::dkdv or
//                                                                    Order::dq runs both passes, dK/dV then dQ)
//
// With no observer the work is spread over all cores: FA2 forward by
// (batch, head, Q block); FA1 forward by (batch, head), or by Q block within
// each K/V block when there are fewer heads than cores; backward by
// (batch, kv head) (the deterministic dQ pass by (batch, head)). With an observer it runs serially, in
// schedule order, and reports every transfer and statistic (events.hpp). Memory stays O(N): the
// only sq x sk-sized thing is the schedule's block ranges, O(Tr + Tc).
//
// HeadRun is one (batch, head)'s pass, advanced one tile at a time; the
// executor and the stepper (stepper.hpp) are both built on it.
#pragma once
#include <memory>
#include <vector>

#include "events.hpp"
#include "flashlab/problem.hpp"
#include "flashlab/tensor.hpp"
#include "schedule.hpp"

namespace flashlab::tiled {

struct ForwardResult {
  Tensor o;    // (batch, seqlen_q, heads_q, head_dim_v), rounded to the problem's dtype
  Tensor lse;  // (batch, heads_q, seqlen_q)
};

struct BackwardResult {
  Tensor dq, dk, dv;  // like Q, K, V, rounded to the problem's dtype
};

ForwardResult forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Tiling tiling,
                      Order order, Observer* observer = nullptr);
BackwardResult backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& d_o, Tiling tiling, Observer* observer = nullptr,
                        Order order = Order::backward);
// Any order over q, k, v (and d_o for a backward order), its events to `observer`. A backward walk reads
// the forward's O and LSE: they come from forward_for_backward, the one place that rule is written.
void run_order(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_o, Tiling tiling,
               Order order, Observer* observer);
// The O and LSE a backward walk reads: the tiled forward in FA2 order with the same tiles, unobserved.
ForwardResult forward_for_backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Tiling tiling);

// Everything a pass reads and writes in "HBM". Forward passes fill o and lse
// (and FA1's running l and m); backward fills D and the fp32 accumulators.
struct Buffers {
  const Tensor* q = nullptr;
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
  const Tensor* o_in = nullptr;    // backward: the forward's O
  const Tensor* lse_in = nullptr;  // backward: the forward's LSE
  const Tensor* d_o = nullptr;     // backward: dO
  Tensor o, lse;                   // forward outputs (fp32 until finalize)
  Tensor l, m;                     // FA1's running statistics, laid out like LSE
  Tensor D;                        // backward: rowsum(dO o O), laid out like LSE
  Tensor dq, dk, dv;               // backward: fp32 accumulators, laid out like Q, K, V

  static Buffers for_forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Order order);
  static Buffers for_backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& d_o);
};

// On-chip state of one pass: the tiles in SRAM and the running statistics.
struct Sram {
  Tile Q, K, V, O, dO, dK, dV;                   // Q_i (Br, d), K_j (Bc, d), V_j (Bc, dv), O_i (Br, dv), ...
  Eigen::VectorXf m, l, lse, D;                  // per query row of the block (Br)
  Tile dQ;                                       // backward: dQ_i read from the fp32 accumulator (Br, d)
};

class HeadRun {
 public:
  HeadRun(const Problem& p, Buffers& buffers, int64_t b, int64_t h, Tiling tiling, Order order);

  const Schedule& schedule() const { return schedule_; }
  Where where(int64_t step) const { return {b_, h_, schedule_.order(), step}; }
  void prologue(Observer* obs);
  void step(int64_t k, Observer* obs) { run_step(schedule_.step(k), sram_, obs); }
  void run_step(const TileStep& s, Sram& sram, Observer* obs);
  void epilogue(Observer* obs);

  // Undo support for the stepper: the state a step changes, copied before it runs.
  struct Snapshot {
    Sram sram;
    std::vector<std::pair<Transfer, std::vector<float>>> rows;  // HBM rows the step stores
  };
  Snapshot snapshot(const TileStep& s) const;
  void restore(const Snapshot& snap);
  void restore_sram(const Sram& sram) { sram_ = sram; }
  void restore_rows(const Transfer& t, const std::vector<float>& rows) { paste_rows(t, rows); }
  const Sram& sram() const { return sram_; }

 private:
  void load(const Transfer& t, Sram& sram);
  void store(const Transfer& t, const Sram& sram);
  void forward_tile(const TileStep& s, Sram& sram, Observer* obs);
  void backward_tile(const TileStep& s, Sram& sram, Observer* obs);
  void scores(const TileStep& s, const Sram& sram, Tile& S, Tile* dot) const;
  void zero_masked(const TileStep& s, Tile& P) const;
  void mask_tile(const TileStep& s, Tile& X, float fill) const;
  Tensor* hbm(TensorId t);
  void copy_rows(const Transfer& t, std::vector<float>& out) const;
  void paste_rows(const Transfer& t, const std::vector<float>& in);

  const Problem& p_;
  Buffers& buf_;
  int64_t b_, h_, g_;
  Schedule schedule_;
  Sram sram_;
};

}  // namespace flashlab::tiled
