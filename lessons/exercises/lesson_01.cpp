// Lesson 01, "Attention isn't slow, its memory traffic is": the arithmetic intensity of standard
// attention (FLOPs per HBM byte) against the ridge point of an A100, where a kernel stops waiting
// for memory and starts waiting for its tensor cores.
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"
#include "schedule.hpp"

namespace flashlab::lessons {
namespace {

// Exercise 1: standard attention (Algorithm 0), one head, N = 1024, d = 64, fp16.
Answer standard_intensity() {
  Problem p;
  p.seqlen_q = p.seqlen_k = 1024;
  p.head_dim = 64;
  p.dtype = DType::fp16;
  p.validate();
  const double flops = p.forward_flops();                     // 4 N^2 d
  const tiled::NaiveBytes hbm = tiled::naive_bytes(p, 0);    // Q, K, S, S, P, P, V read; S, P, O written
  const double bytes = static_cast<double>(hbm.read + hbm.write);
  Answer a;
  a.value = flops / bytes;
  a.unit = "FLOP/byte";
  a.rel_tolerance = 0.03;
  a.working = "FLOPs = 4 N^2 d = 4 x 1024^2 x 64 = " + format_number(flops, 6) +
              "\nHBM bytes (e = 2 bytes per fp16 element):\n"
              "  read  Q, K (2 N d e) + S (N^2 e) + P (N^2 e) + V (N d e) = " + format_number(hbm.read, 8) +
              "\n  write S (N^2 e) + P (N^2 e) + O (N d e)                  = " + format_number(hbm.write, 8) +
              "\nintensity = FLOPs / bytes = " + format_number(flops, 6) + " / " + format_number(bytes, 8) + " = " +
              format_number(a.value, 4) + " FLOP/byte (about d / e: the N^2 terms dominate both)";
  return a;
}

// Exercise 2: the A100 40GB's ridge point, from its preset (presets/a100-40gb.json).
Answer a100_ridge() {
  const sim::GpuSpec g = sim::load_gpu("a100-40gb");
  Answer a;
  a.value = g.tensor_fp16 / g.hbm_bandwidth;
  a.unit = "FLOP/byte";
  a.rel_tolerance = 0.03;
  a.working = "ridge = peak FLOP/s / HBM bytes/s = " + format_number(g.tensor_fp16 / 1e12, 4) + " TFLOP/s / " +
              format_number(g.hbm_bandwidth / 1e9, 5) + " GB/s = " + format_number(a.value, 4) +
              " FLOP/byte (presets/a100-40gb.json: tensor_flops_per_s.fp16, hbm_bandwidth_bytes_per_s).\n"
              "A kernel with fewer FLOPs per byte than this waits on HBM, whatever its FLOP count.";
  return a;
}

}  // namespace

Lesson lesson_01() {
  Lesson l;
  l.number = 1;
  l.slug = "attention-is-memory-bound";
  l.exercises = {
      {"Standard attention (Algorithm 0: S and P written to HBM and read back), one head, N = 1024, d = 64,\n"
       "fp16. What is its arithmetic intensity, in FLOPs per byte of HBM traffic? (FLOPs: 4 N^2 d)",
       standard_intensity},
      {"What is the ridge point of an A100 40GB in fp16, in FLOPs per byte: its tensor-core peak over its\n"
       "HBM bandwidth (312 TFLOP/s and 1555 GB/s, NVIDIA's A100 whitepaper)?",
       a100_ridge},
  };
  return l;
}

}  // namespace flashlab::lessons
