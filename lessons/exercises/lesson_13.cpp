// Lesson 13, "PyTorch SDPA, xFormers and the FA family tree": what each of SDPA's backends costs.
// Exercise 1 walks the MATH backend's kernels by hand (the unfused path, fp32 inside) and adds up its HBM
// bytes; exercise 2 asks the simulator for two backends by their place in the family tree (MATH is
// `--algo math`, CUDNN_ATTENTION is the FA3-class `--algo fa3 --impl cudnn`) and compares their times.
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"
#include "model.hpp"

namespace flashlab::lessons {
namespace {

// Both exercises: batch 1, 16 heads, N = 8192, d = 128, bf16, forward, on an H100 SXM.
Problem exercise_problem() {
  Problem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 16;
  p.seqlen_q = p.seqlen_k = 8192;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.validate();
  return p;
}

// Exercise 1: HBM bytes of SDPA's MATH backend (PyTorch's unfused path, as sim::math_pass models it), in GB.
Answer math_backend_bytes() {
  const Problem p = exercise_problem();
  const sim::GpuSpec gpu = sim::load_gpu("h100-sxm");
  const sim::Estimate math = sim::estimate(p, gpu, sim::Algo::math, Pass::fwd);
  const double heads = static_cast<double>(p.batch * p.heads_q), N = 8192, d = 128;
  const double scores = heads * N * N, rows = heads * N * d;  // elements of S, and of each of Q, K, V, O
  Answer a;
  a.value = (math.hbm_read_bytes + math.hbm_write_bytes) / 1e9;
  a.unit = "GB";
  a.rel_tolerance = 0.02;
  a.working =
      "per element of S (B h N^2 = " + format_number(scores, 6) + " of them), fp32 = 4 bytes, bf16 = 2:\n" +
      "  S = Q K^T written 4; softmax reads 4, writes 4; the fully-masked-row test reads 4, writes 1;\n" +
      "  any() reads 1; where() reads 5, writes 4; P to bf16 reads 4, writes 2; O = P V reads 4: 37 bytes\n" +
      "per element of Q, K, V, O (B h N d = " + format_number(rows, 6) + " each):\n" +
      "  Q and K: to fp32 (2 + 4), scaled (4 + 4), read by the first GEMM (4): 18 each; V: to fp32 (6), read\n" +
      "  by the second GEMM (4): 10; O: written by the GEMM in fp32 (4), to bf16 (4 + 2): 10; in all 56\n" +
      "37 x " + format_number(scores, 6) + " + 56 x " + format_number(rows, 6) + " = " +
      format_number(37 * scores + 56 * rows, 6) + " bytes; the simulator's math backend: " +
      format_number(a.value, 5) + " GB";
  return a;
}

// Exercise 2: the simulator's time of MATH over CUDNN_ATTENTION's (an FA3-class kernel) for the same call.
Answer math_over_cudnn() {
  const Problem p = exercise_problem();
  const sim::GpuSpec gpu = sim::load_gpu("h100-sxm");
  sim::Options cudnn;
  cudnn.impl = sim::Impl::cudnn;
  const sim::Estimate math = sim::estimate(p, gpu, sim::Algo::math, Pass::fwd);
  const sim::Estimate fa3 = sim::estimate(p, gpu, sim::Algo::fa3, Pass::fwd, cudnn);
  Answer a;
  a.value = math.time_s / fa3.time_s;
  a.unit = "x";
  a.rel_tolerance = 0.02;
  a.working = "MATH is the unfused path: flashlab estimate --algo math, " + format_number(math.time_s * 1e3, 4) +
              " ms (bound: " + math.bound + ")\nCUDNN_ATTENTION is cuDNN's Hopper kernel, FA3 class: " +
              "flashlab estimate --algo fa3 --impl cudnn, " + format_number(fa3.time_s * 1e3, 4) + " ms (bound: " +
              fa3.bound + ")\nratio " + format_number(math.time_s * 1e3, 4) + " / " +
              format_number(fa3.time_s * 1e3, 4) + " = " + format_number(a.value, 4) + "x";
  return a;
}

}  // namespace

Lesson lesson_13() {
  Lesson l;
  l.number = 13;
  l.slug = "sdpa-xformers-family-tree";
  l.exercises = {
      {"SDPA falls back to its MATH backend for one forward of batch 1, 16 heads, N = 8192, d = 128, bf16\n"
       "(no mask, no dropout). Walk its kernels as the lesson does (fp32 inside: 4 bytes an element) and\n"
       "give the HBM bytes it moves, reads and writes, in GB (1e9 bytes).",
       math_backend_bytes},
      {"Same call on an H100 SXM. Which `flashlab estimate` algorithm and implementation stand for SDPA's\n"
       "MATH and CUDNN_ATTENTION backends? Run both: how many times longer than CUDNN_ATTENTION does the\n"
       "simulator predict MATH takes (times)?",
       math_over_cudnn},
  };
  return l;
}

}  // namespace flashlab::lessons
