// Lesson 04, "Same math, completely different schedule": FA1's order (K_j, V_j outer) against FA2's
// (Q_i outer) in bytes, from the schedule; and the matmul FLOPs FlashAttention adds by recomputing
// S and P in the backward pass, from the simulator.
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

// Exercise 2: matmul FLOPs of FA2's forward + backward over standard attention's, from the simulator.
Answer recompute_flops() {
  Problem p;
  p.batch = 8;
  p.heads_q = p.heads_kv = 16;
  p.seqlen_q = p.seqlen_k = 2048;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.validate();
  const sim::GpuSpec g = sim::load_gpu("h100-sxm");
  const sim::Estimate fa2 = sim::estimate(p, g, sim::Algo::fa2, Pass::fwd_bwd);
  const sim::Estimate standard = sim::estimate(p, g, sim::Algo::standard, Pass::fwd_bwd);
  Answer a;
  a.value = fa2.flops / standard.flops;
  a.unit = "times";
  a.rel_tolerance = 0.02;
  a.working = std::string("forward, both: S = Q K^T and O = P V, 2 GEMMs of 2 N^2 d FLOPs each = 4 N^2 d\n"
              "backward, standard: dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q: 4 GEMMs = 8 N^2 d\n"
              "backward, FlashAttention: S = Q K^T recomputed first (P was never stored): 5 GEMMs = 10 N^2 d\n"
              "ratio = (4 + 10) / (4 + 8) = 14/12; the simulator counts ") + format_number(fa2.flops, 5) + " / " +
              format_number(standard.flops, 5) + " = " + format_number(a.value, 4);
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
      {"Forward + backward, how many times the matmul FLOPs of standard attention does FlashAttention (FA2)\n"
       "execute? (Count the GEMMs of each backward pass; FlashAttention stored neither S nor P.)",
       recompute_flops},
  };
  l.viz = {"--seqlen", "512", "--hdim", "32", "--br", "64", "--bc", "64", "--order", "fa1", "--compare"};
  return l;
}

}  // namespace flashlab::lessons
