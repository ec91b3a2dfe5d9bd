// Lesson 11, "FA3 stops waiting for memory and starts overlapping it": per element of S, the matmuls
// (4d FLOPs on the tensor cores) against the exponential (one ex2 on the MUFU), from the H100 preset.
// When the two are close, running them one after the other costs nearly twice running them overlapped.
#include "flashlab/dtype.hpp"
#include "flashlab/format.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"

namespace flashlab::lessons {
namespace {

// Exercise 1: exp time over matmul time per element of S at d = 64, H100 SXM, bf16.
Answer exp_over_matmul_d64() {
  const sim::GpuSpec gpu = sim::load_gpu("h100-sxm");
  const double d = 64;
  const double t_matmul = 4 * d / gpu.tensor_peak(DType::bf16);  // S = QK^T and O += PV: 2d + 2d FLOPs
  const double t_exp = 1 / gpu.exp_per_s;                        // one exp (ex2) per element
  Answer a;
  a.value = t_exp / t_matmul;
  a.unit = "";
  a.rel_tolerance = 0.02;
  a.working = std::string("per element of S: S_ij = Q_i K_j^T costs 2d FLOPs, O_i += P_ij V_j 2d more: 4d = 256 FLOPs\n") +
              "matmul: 256 / " + format_number(gpu.tensor_peak(DType::bf16), 5) + " FLOP/s = " +
              format_number(t_matmul * 1e15, 4) + " fs\n" + "exp: 1 / " + format_number(gpu.exp_per_s, 5) +
              " per s = " + format_number(t_exp * 1e15, 4) + " fs\n" + "exp / matmul = " +
              format_number(a.value, 4) + " (at d = 128 half this: the FA3 paper's 'about half')";
  return a;
}

}  // namespace

Lesson lesson_11() {
  Lesson l;
  l.number = 11;
  l.slug = "fa3-overlaps-memory";
  l.exercises = {
      {"H100 SXM, bf16: dense tensor peak 989.4 TFLOP/s, exponentials (MUFU ex2) 4.183e12 per second\n"
       "(the preset's measured rate). At d = 64, per element of S, how long do the exponentials take\n"
       "as a fraction of the matrix products' time (S = QK^T and O = PV)? (a ratio, e.g. 0.5)",
       exp_over_matmul_d64},
  };
  return l;
}

}  // namespace flashlab::lessons
