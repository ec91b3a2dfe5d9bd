// Lesson 02, "SRAM is the scratchpad nobody used": FlashAttention's Algorithm 1 sizes its tiles from
// the SRAM of one SM, M elements: Bc = ceil(M / 4d), Br = min(Bc, d) (tiled_cpu/tiling.hpp).
#include "flashlab/dtype.hpp"
#include "flashlab/format.hpp"
#include "gpu_spec.hpp"
#include "lesson.hpp"
#include "tiling.hpp"

namespace flashlab::lessons {
namespace {

// Bc of Algorithm 1 on an H100 SXM at d = 128 in bf16, with M from the preset.
Answer h100_bc() {
  const sim::GpuSpec g = sim::load_gpu("h100-sxm");
  const int64_t d = 128, e = bytes_per_element(DType::bf16);
  const int64_t M = static_cast<int64_t>(g.sram_per_sm_bytes) / e;
  const tiled::Tiling t = tiled::Tiling::from_sram(M, d);
  Answer a;
  a.value = static_cast<double>(t.Bc);
  a.unit = "rows";
  a.abs_tolerance = 0.5;  // a count: exact
  a.working = "M = SRAM per SM / bytes per element = " + format_number(g.sram_per_sm_bytes, 7) + " / " +
              std::to_string(e) + " = " + std::to_string(M) + " elements (presets/h100-sxm.json, sram_per_sm_bytes)\n" +
              "Bc = ceil(M / 4d) = ceil(" + std::to_string(M) + " / " + std::to_string(4 * d) + ") = " +
              std::to_string(t.Bc) + ", and Br = min(Bc, d) = " + std::to_string(t.Br) +
              ":\nK_j and V_j (Bc x d each), Q_i and O_i (Br x d each) then fill at most M elements together.";
  return a;
}

}  // namespace

Lesson lesson_02() {
  Lesson l;
  l.number = 2;
  l.slug = "sram-scratchpad";
  l.exercises = {
      {"An H100 SXM has 256 KiB of SRAM (shared memory + L1) per SM. FlashAttention's Algorithm 1 takes M as\n"
       "that SRAM in elements and sets Bc = ceil(M / 4d), Br = min(Bc, d). For d = 128 in bf16 (2 bytes an\n"
       "element), what is Bc?",
       h100_bc},
  };
  l.viz = {"--seqlen", "256", "--hdim", "32", "--br", "64", "--bc", "64"};
  return l;
}

}  // namespace flashlab::lessons
