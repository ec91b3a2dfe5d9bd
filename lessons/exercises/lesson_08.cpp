// Lesson 08, "The backward pass that never stored the matrix": FA2's backward (K_j, V_j outer, Q_i inner)
// recomputes S_ij and P_ij = exp(S_ij - L_i) from Q, K and the saved LSE instead of reading a stored P.
// Exercise 1: its HBM bytes, from the schedule's closed form in the backward order. Exercise 2: the matmul
// FLOPs that recomputing S costs over standard attention's backward, from the simulator.
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"
#include "model.hpp"
#include "schedule.hpp"

namespace flashlab::lessons {
namespace {

// Exercise 1: one head, N = 4096, d = 128, bf16, Br = Bc = 128, FA2's backward order.
Answer backward_bytes() {
  Problem p;
  p.seqlen_q = p.seqlen_k = 4096;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.validate();
  const tiled::Schedule s(p, 0, tiled::Tiling{128, 128}, tiled::Order::backward);
  const tiled::ByteCounts c = s.closed_form();
  const auto mb = [](int64_t bytes) { return format_number(static_cast<double>(bytes) / 1e6, 5) + " MB"; };
  const auto of = [&](tiled::TensorId t) {
    const int k = static_cast<int>(t);
    return c.load[k] + c.store[k];
  };
  using T = tiled::TensorId;
  Answer a;
  a.value = static_cast<double>(c.total_load() + c.total_store()) / 1e6;
  a.unit = "MB";
  a.rel_tolerance = 0.01;
  a.working =
      "N d e = 4096 x 128 x 2 = 1 MiB; Tr = Tc = 4096 / 128 = 32; LSE and D are fp32 (4 bytes a row), dQ's\n"
      "accumulator is fp32 (d x 4 = 512 bytes a row)\n"
      "before the loop: read O and dO, write D = rowsum(dO o O), zero dQ's accumulator\n"
      "each K/V block j (the outer loop): read K_j, V_j once; write dK_j, dV_j once\n"
      "each tile (i, j): read Q_i, dO_i, L_i, D_i; read and write back dQ_i's accumulator: all of them Tc times over\n"
      "after the loop: read dQ's accumulator, write dQ in bf16\n"
      "the schedule's closed form, per tensor (reads + writes):\n"
      "  Q " + mb(of(T::Q)) + ", dO " + mb(of(T::dO)) + ", LSE " + mb(of(T::LSE)) + ", D " + mb(of(T::D)) +
      "\n  dQ " + mb(of(T::dQ)) + " (32 reads and 32 writes of a 2 MiB fp32 accumulator, plus the ends)\n" +
      "  K " + mb(of(T::K)) + ", V " + mb(of(T::V)) + ", dK " + mb(of(T::dK)) + ", dV " + mb(of(T::dV)) + ", O " +
      mb(of(T::O)) + "\n" + "total " + format_number(a.value, 5) + " MB";
  return a;
}

// Exercise 2: GFLOP of FA2's backward minus standard attention's, 32 heads, N = 4096, d = 128, H100.
Answer recompute_flops() {
  Problem p;
  p.heads_q = p.heads_kv = 32;
  p.seqlen_q = p.seqlen_k = 4096;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.validate();
  const sim::GpuSpec gpu = sim::load_gpu("h100-sxm");
  const sim::Estimate fa2 = sim::estimate(p, gpu, sim::Algo::fa2, Pass::bwd);
  const sim::Estimate standard = sim::estimate(p, gpu, sim::Algo::standard, Pass::bwd);
  Answer a;
  a.value = (fa2.flops - standard.flops) / 1e9;
  a.unit = "GFLOP";
  a.rel_tolerance = 0.02;
  a.working = std::string("one GEMM of an N x N by an N x d matrix, per head: 2 N^2 d; 32 heads: 32 x 2 x 4096^2 x 128 = ") +
              format_number(32 * 2.0 * 4096 * 4096 * 128 / 1e9, 5) + " GFLOP\n" +
              "standard attention's backward reads the stored P: dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q, 4 GEMMs: " +
              format_number(standard.flops / 1e9, 5) + " GFLOP (the simulator)\n" +
              "FA2's backward first recomputes S_ij = Q_i K_j^T, a 5th GEMM: " + format_number(fa2.flops / 1e9, 5) +
              " GFLOP (the simulator)\nextra: " + format_number(a.value, 5) +
              " GFLOP (P_ij = exp(S_ij - L_i) itself is elementwise, not a matmul)";
  return a;
}

}  // namespace

Lesson lesson_08() {
  Lesson l;
  l.number = 8;
  l.slug = "backward-without-the-matrix";
  l.exercises = {
      {"FA2's backward order, one head, N = 4096, d = 128, bf16, Br = Bc = 128. K_j, V_j outer, Q_i inner;\n"
       "L (the LSE) and D = rowsum(dO o O) are fp32, and dQ is accumulated in an fp32 buffer in HBM that each\n"
       "tile reads and writes back; before the loop the pass reads O and dO, writes D and zeroes the buffer;\n"
       "after it, it reads the buffer and writes dQ in bf16. How many MB (10^6 bytes) does it move in all?",
       backward_bytes},
      {"Training step, H100, batch 1, 32 heads, N = 4096, d = 128, bf16, no mask. How many GFLOP of matrix\n"
       "products more than standard attention's backward (which reads the P its forward stored) does FA2's\n"
       "backward execute?",
       recompute_flops},
  };
  l.viz = {"--seqlen", "8", "--hdim", "4", "--br", "4", "--bc", "4", "--dtype", "fp32", "--order", "bwd"};
  return l;
}

}  // namespace flashlab::lessons
