// Lesson 04, "Same math, completely different schedule": FA1's order (K_j, V_j outer) against FA2's
// (Q_i outer) in bytes, from the schedule; and the matmul FLOPs of FA2's backward, which recomputes
// S_ij because the forward never stored it, from the simulator.
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"
#include "model.hpp"
#include "schedule.hpp"

namespace flashlab::lessons {
namespace {

// Exercise 1: bytes of FA1's order over FA2's, one head, N = 1024, d = 64, fp16, Br = Bc = 64.
Answer fa1_over_fa2_bytes() {
  Problem p;
  p.seqlen_q = p.seqlen_k = 1024;
  p.head_dim = 64;
  p.dtype = DType::fp16;
  p.validate();
  const tiled::Tiling tiles{64, 64};
  const auto total = [&](tiled::Order order) {
    const tiled::ByteCounts c = tiled::Schedule(p, 0, tiles, order).closed_form();
    return static_cast<double>(c.total_load() + c.total_store());
  };
  const double fa1 = total(tiled::Order::fa1), fa2 = total(tiled::Order::fa2);
  Answer a;
  a.value = fa1 / fa2;
  a.unit = "times";
  a.rel_tolerance = 0.02;
  a.working = std::string("N d e = 1024 x 64 x 2 = 131072 bytes; Tr = Tc = 16; l, m and LSE are fp32 (N x 4 = 4096 bytes)\n"
              "FA1: O, l, m initialized (N d e + 2 N 4), K and V read once (2 N d e), and for each of the Tc K/V\n"
              "     blocks Q read, O read and written, l and m read and written (3 N d e + 4 N 4): ") +
              format_number(fa1, 8) + " bytes\n" +
              "FA2: Q read once, K and V read once per Q block (Tr x 2 N d e), O and LSE written once: " +
              format_number(fa2, 8) + " bytes\nratio = " + format_number(a.value, 4);
  return a;
}

// Exercise 2: the matmul FLOPs of FA2's backward pass, one head, from the simulator.
Answer backward_flops() {
  Problem p;
  p.seqlen_q = p.seqlen_k = 2048;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.validate();
  const sim::Estimate bwd = sim::estimate(p, sim::load_gpu("h100-sxm"), sim::Algo::fa2, Pass::bwd);
  Answer a;
  a.value = bwd.flops / 1e9;
  a.unit = "GFLOP";
  a.rel_tolerance = 0.02;
  a.working = std::string("a GEMM of an N x N by an N x d matrix costs 2 N^2 d = 2 x 2048^2 x 128 = ") +
              format_number(2.0 * 2048 * 2048 * 128 / 1e9, 4) + " GFLOP\n" +
              "standard attention's backward has 4: dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q (8 N^2 d)\n"
              "FlashAttention stored neither S nor P, so it first recomputes S_ij = Q_i K_j^T: 5 GEMMs, 10 N^2 d = " +
              format_number(a.value, 4) + " GFLOP (the simulator's count, from the schedule's tiles)";
  return a;
}

}  // namespace

Lesson lesson_04() {
  Lesson l;
  l.number = 4;
  l.slug = "same-math-different-schedule";
  l.exercises = {
      {"One head, N = 1024, d = 64, fp16, Br = Bc = 64. FA1's order (K_j, V_j outer) re-reads Q_i, O_i, l_i,\n"
       "m_i and writes back O_i, l_i, m_i at every tile; FA2's order (Q_i outer) reads Q_i once and re-reads\n"
       "K_j, V_j per Q block. How many times the bytes of FA2's order does FA1's move? (l, m, LSE are fp32)",
       fa1_over_fa2_bytes},
      {"FA2's backward pass, one head, N = 2048, d = 128: how many GFLOP of matrix products does it execute?\n"
       "(List its GEMMs. Remember what the forward pass never stored.)",
       backward_flops},
  };
  l.viz = {"--seqlen", "512", "--hdim", "32", "--br", "64", "--bc", "64", "--order", "fa1", "--compare"};
  return l;
}

}  // namespace flashlab::lessons
