// Lesson 14, "Draw the roofline; predict FA's win for your sequence": the speedup of FlashAttention over
// standard attention that a roofline drawn from the H100's datasheet predicts, each kernel at
// min(peak, intensity x bandwidth). Standard attention's bytes are Algorithm 0's (tiled::naive_bytes),
// FlashAttention's the compulsory ones (Q, K, V read once, O written once: L2 keeps the re-reads of K, V).
#include <algorithm>

#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"
#include "schedule.hpp"

namespace flashlab::lessons {
namespace {

// Exercise 1: roofline speedup of FA over standard attention, one head, N = 8192, d = 128, bf16, H100 SXM.
Answer roofline_speedup() {
  Problem p;
  p.seqlen_q = p.seqlen_k = 8192;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.validate();
  const sim::GpuSpec gpu = sim::load_gpu("h100-sxm");
  const double peak = gpu.tensor_peak(DType::bf16), bw = gpu.hbm_bandwidth;
  const double flops = p.forward_flops();
  const tiled::NaiveBytes naive = tiled::naive_bytes(p, 0);
  const double standard_bytes = static_cast<double>(naive.read + naive.write);
  const double fa_bytes = 4.0 * 8192 * 128 * 2;  // Q, K, V read, O written: 4 N d e
  const double t_standard = std::max(flops / peak, standard_bytes / bw);
  const double t_fa = std::max(flops / peak, fa_bytes / bw);
  Answer a;
  a.value = t_standard / t_fa;
  a.unit = "x";
  a.rel_tolerance = 0.03;
  a.working = "FLOPs = 4 N^2 d = " + format_number(flops, 6) + "; ridge point = " + format_number(peak, 5) + " / " +
              format_number(bw, 4) + " = " + format_number(peak / bw, 4) + " FLOP/byte\n" +
              "standard: bytes 4 N d e + 4 N^2 e = " + format_number(standard_bytes, 6) + ", intensity " +
              format_number(flops / standard_bytes, 4) + " (below the ridge: HBM-bound), time " +
              format_number(t_standard * 1e6, 5) + " us\n" + "FlashAttention: bytes 4 N d e = " +
              format_number(fa_bytes, 6) + ", intensity " + format_number(flops / fa_bytes, 5) +
              " (above the ridge: compute-bound), time FLOPs / peak = " + format_number(t_fa * 1e6, 5) +
              " us\nspeedup = " + format_number(a.value, 4) + "x";
  return a;
}

}  // namespace

Lesson lesson_14() {
  Lesson l;
  l.number = 14;
  l.slug = "draw-the-roofline";
  l.exercises = {
      {"Draw the roofline of an H100 SXM from its datasheet: 989.4 TFLOP/s bf16, 3.35 TB/s HBM. One head,\n"
       "N = 8192, d = 128, bf16, forward. Place standard attention (Algorithm 0: S and P written and read\n"
       "back, N x N each) and FlashAttention (Q, K, V read once, O written once) on it, give each the time\n"
       "the roofline allows, and predict FlashAttention's speedup over standard attention (times).",
       roofline_speedup},
  };
  return l;
}

}  // namespace flashlab::lessons
