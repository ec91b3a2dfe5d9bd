// Schedule: the one description of tile traversal.
//
// For one batch entry (all heads share it) it enumerates the tile steps of a
// pass in order, classifies each tile of the Tr x Tc grid against the mask,
// and lists the transfers between HBM and on-chip memory (SRAM) each step
// makes. The tiled executor, the simulator's counters, the stepper, the
// visualizer and the lessons all walk this one object, so "the bytes the run
// moved" and "the bytes the model predicts" are the same number by
// construction.
//
//   Order::fa1       Algorithm 1 of FlashAttention: K_j, V_j outer, Q_i inner;
//                    O_i, l_i, m_i are read from and written back to HBM at
//                    every step (O kept normalized).
//   Order::fa2       FlashAttention-2: Q_i outer, K_j, V_j inner; O_i, l_i, m_i
//                    stay on chip, normalization deferred to the end, LSE stored.
//   Order::backward  FlashAttention-2 backward: K_j, V_j outer, Q_i inner;
//                    dK_j, dV_j on chip, P recomputed from LSE, dQ accumulated
//                    in HBM (fp32), D = rowsum(dO o O) computed first.
//   Order::fa1_backward  Algorithm 4 of FlashAttention: K_j, V_j outer, Q_i
//                    inner; every step reads Q_i, O_i, dO_i, dQ_i, l_i, m_i and
//                    writes dQ_i back (in the input precision); D_i is computed
//                    on chip from dO_i and O_i.
//   Order::dkdv      the deterministic backward's first pass (flashlab's fa2 dkdv kernel without dQ):
//                    K_j, V_j outer, Q_i inner, dK_j, dV_j on chip; no dQ accumulator, so no atomics.
//   Order::dq        its second pass (fa2's dq kernel): Q_i outer as the forward, K_j, V_j inner,
//                    S, P, dP and dS recomputed, dQ_i summed on chip over the K/V blocks in a fixed
//                    order and written once; D and LSE read from the first pass's preprocess.
//
// Which tiles are skipped, full or partial is the block mask's (block_mask.hpp), computed once from the
// mask function when the schedule is built; classify() and the block ranges read it. Under a dense mask a
// line's range can hold skipped tiles (holes): they are visited as skipped steps, with no transfers.
//
// Traversal belongs to the schedule alone: which axis the outer loop walks,
// step index <-> tile (i, j), and the steps a pass visits on each outer line
// (step_of, tile_of, outer_blocks, visited). Nothing outside computes a tile
// index from a step number.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "block_mask.hpp"
#include "flashlab/problem.hpp"
#include "tiling.hpp"

namespace flashlab::tiled {

enum class Order { fa1, fa2, backward, fa1_backward, dkdv, dq };
std::string to_string(Order order);
// "fa1" | "fa2" | "backward" (or "bwd") | "fa1-bwd" | "bwd-dkdv" | "bwd-dq"
Order parse_order(const std::string& name);
inline bool is_backward(Order o) { return o != Order::fa1 && o != Order::fa2; }
// The deterministic backward's passes (dkdv, then dq): dQ without atomics.
inline bool is_deterministic(Order o) { return o == Order::dkdv || o == Order::dq; }
// The passes tiled::backward runs for an order: the deterministic backward's two, else the order itself.
inline std::vector<Order> passes_of(Order o) {
  return is_deterministic(o) ? std::vector<Order>{Order::dkdv, Order::dq} : std::vector<Order>{o};
}

// Tensors moved between HBM and on-chip memory.
// Knew, Vnew, Oaccum, LSEaccum: decoding's appended rows and split-KV's partial outputs (split_schedule.hpp).
enum class TensorId { Q, K, V, O, l, m, LSE, dO, D, dQ, dK, dV, Knew, Vnew, Oaccum, LSEaccum, kCount };
std::string to_string(TensorId tensor);
constexpr int kTensorCount = static_cast<int>(TensorId::kCount);

struct Transfer {
  TensorId tensor;
  bool store;        // false: HBM -> SRAM (load); true: SRAM -> HBM (store)
  int64_t row0;      // first row of the block (a token row of Q/O/... or K/V)
  int64_t rows;      // rows in the block
  int64_t bytes;     // bytes moved for one head
};

struct TileStep {
  int64_t index = 0;              // position in the pass
  int64_t i = 0, j = 0;           // Q block, K/V block
  int64_t row0 = 0, rows = 0;     // query rows [row0, row0 + rows)
  int64_t col0 = 0, cols = 0;     // key rows   [col0, col0 + cols)
  TileKind kind = TileKind::full;
  int count = 0;                  // transfers used
  std::array<Transfer, 12> transfers{};  // FA1 backward uses the most: 11

  const Transfer* begin() const { return transfers.data(); }
  const Transfer* end() const { return transfers.data() + count; }
};

// Bytes per tensor, loads and stores, for one head.
struct ByteCounts {
  std::array<int64_t, kTensorCount> load{};
  std::array<int64_t, kTensorCount> store{};
  void add(const Transfer& t) { (t.store ? store : load)[static_cast<int>(t.tensor)] += t.bytes; }
  int64_t total_load() const;
  int64_t total_store() const;
  bool operator==(const ByteCounts&) const = default;
};

class Schedule {
 public:
  Schedule(const Problem& problem, int64_t batch_index, Tiling tiling, Order order);

  Order order() const { return order_; }
  const Tiling& tiling() const { return tiling_; }
  int64_t Tr() const { return Tr_; }
  int64_t Tc() const { return Tc_; }
  int64_t seqlen_q() const { return sq_; }
  int64_t seqlen_k() const { return sk_; }
  int64_t batch_index() const { return b_; }
  int64_t steps() const { return Tr_ * Tc_; }

  TileStep step(int64_t k) const;
  TileKind classify(int64_t i, int64_t j) const { return mask_.kind(i, j); }
  const BlockMask& block_mask() const { return mask_; }

  // ---- traversal ----
  // FA2's forward and the deterministic dQ pass walk Q blocks in the outer loop; FA1 and the other
  // backward orders walk K/V blocks.
  bool q_outer() const { return order_ == Order::fa2 || order_ == Order::dq; }
  int64_t outer_blocks() const { return q_outer() ? Tr_ : Tc_; }
  int64_t inner_blocks() const { return q_outer() ? Tc_ : Tr_; }
  int64_t step_of(int64_t i, int64_t j) const { return q_outer() ? i * Tc_ + j : j * Tr_ + i; }
  struct Tile {
    int64_t i, j;
  };
  Tile tile_of(int64_t k) const { return q_outer() ? Tile{k / Tc_, k % Tc_} : Tile{k % Tr_, k / Tr_}; }
  // The inner blocks of outer line o that have visible elements: [begin, end), the first and one past the
  // last; no holes except under a dense mask (block_mask.hpp).
  struct Range {
    int64_t begin, end;
  };
  Range visible(int64_t o) const {
    return q_outer() ? Range{kv_begin(o), kv_end(o)} : Range{q_begin(o), q_end(o)};
  }
  // The inner blocks a pass runs on line o: the visible ones, except that an order which writes the
  // line's outputs at its end (FA2's forward: O_i, LSE_i; the backward: dK_j, dV_j; the dQ pass: dQ_i)
  // still visits the last
  // tile of a line that sees nothing, to write zeros (and LSE = -inf).
  Range visited(int64_t o) const {
    const Range r = visible(o);
    return r.begin == r.end && writes_at_line_end() ? Range{inner_blocks() - 1, inner_blocks()} : r;
  }
  bool writes_at_line_end() const;

  // The non-skipped K/V blocks of Q block i lie in [kv_begin(i), kv_end(i)), and
  // the non-skipped Q blocks of K/V block j in [q_begin(j), q_end(j)), both ends
  // non-skipped; every block between is non-skipped too unless the mask is dense.
  int64_t kv_begin(int64_t i) const { return mask_.kv_begin(i); }
  int64_t kv_end(int64_t i) const { return mask_.kv_end(i); }
  int64_t q_begin(int64_t j) const { return mask_.q_begin(j); }
  int64_t q_end(int64_t j) const { return mask_.q_end(j); }
  int64_t q_rows(int64_t i) const;   // rows in Q block i
  int64_t kv_rows(int64_t j) const;  // rows in K/V block j

  // Whole-tensor transfers before the first and after the last step
  // (FA1: initializing O, l, m; backward: D = rowsum(dO o O), dQ = 0, dQ's conversion; dkdv: D alone;
  // FA1 backward: initializing dQ, dK, dV).
  std::vector<Transfer> prologue() const;
  std::vector<Transfer> epilogue() const;

  // The bytes one head of this batch entry moves over the whole pass,
  // computed from the block ranges, without walking the steps.
  ByteCounts closed_form() const;

  int64_t tiles_skipped() const;
  // Elements of S computed over the pass: rows x cols of every non-skipped tile
  // (a partial tile is computed whole and masked afterwards).
  int64_t computed_elements() const;

 private:
  void add_step_transfers(TileStep& s) const;
  int64_t row_bytes(int width) const;  // bytes per row of a rule's Width (schedule.cpp)
  int64_t inner_rows_computed(int64_t line) const;  // rows of the line's non-skipped inner blocks

  Problem problem_;
  int64_t b_;
  Tiling tiling_;
  Order order_;
  int64_t sq_, sk_, Tr_, Tc_;
  int64_t elem_;  // bytes per element of Q, K, V, O, dO, dQ, dK, dV in HBM
  BlockMask mask_;
};

}  // namespace flashlab::tiled

namespace flashlab::tiled {

// HBM bytes of standard attention (FlashAttention paper, Algorithm 0) for one
// head of batch entry b: read Q, K; write S; read S; write P; read P, V;
// write O. S and P are sq x sk in the input dtype.
struct NaiveBytes {
  int64_t read = 0, write = 0;
};
NaiveBytes naive_bytes(const Problem& p, int64_t b);

}  // namespace flashlab::tiled
