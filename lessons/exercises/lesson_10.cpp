// Lesson 10, "FA2 flipped the loop and doubled the speedup": FA2's order makes Q blocks independent, so
// its grid is batch x heads x Tr thread blocks; the exercise counts the waves they make on an A100, from
// the simulator (which launches the kernel's grid on the preset's SMs).
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"
#include "model.hpp"

namespace flashlab::lessons {
namespace {

// Exercise 1: waves of FA2's forward grid, batch 2, 16 heads, N = 4096, d = 128, bf16, A100 80GB.
Answer fa2_waves() {
  Problem p;
  p.batch = 2;
  p.heads_q = p.heads_kv = 16;
  p.seqlen_q = p.seqlen_k = 4096;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.validate();
  const sim::GpuSpec gpu = sim::load_gpu("a100-80gb");
  const sim::Estimate e = sim::estimate(p, gpu, sim::Algo::fa2, Pass::fwd);
  Answer a;
  a.value = e.waves;
  a.unit = "waves";
  a.rel_tolerance = 0.02;
  a.working = std::string("Br = ") + std::to_string(e.block_m) + ", so Tr = 4096 / Br = " +
              std::to_string(4096 / e.block_m) + " Q blocks a head\n" +
              "thread blocks = batch x heads x Tr = 2 x 16 x " + std::to_string(4096 / e.block_m) + " = " +
              format_number(e.ctas, 6) + "\n" + "slots = SMs x blocks per SM = " + format_number(gpu.sm_count, 4) +
              " x " + format_number(e.ctas_per_sm, 3) + " = " + format_number(gpu.sm_count * e.ctas_per_sm, 5) +
              "\nwaves = thread blocks / slots = " + format_number(a.value, 4) +
              " (FA1's kernel, one block per (batch, head), would fill 32 of 108 SMs once)";
  return a;
}

}  // namespace

Lesson lesson_10() {
  Lesson l;
  l.number = 10;
  l.slug = "fa2-flipped-the-loop";
  l.exercises = {
      {"FA2's forward on an A100 80GB (108 SMs): batch 2, 16 heads, N = 4096, d = 128, bf16, Br = 128.\n"
       "Each SM holds 2 of its thread blocks at once. How many waves of thread blocks does the grid make\n"
       "(thread blocks / slots, a fraction allowed)?",
       fa2_waves},
  };
  return l;
}

}  // namespace flashlab::lessons
