// Lesson 12, "Your team turned on FA: which version is running?": the memory signature of standard
// attention. Algorithm 0 writes S and P (N x N each) to HBM and reads them back; a FlashAttention kernel
// never does. The exercise predicts the HBM bytes a profiler would show for the unfused path.
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "lesson.hpp"
#include "schedule.hpp"

namespace flashlab::lessons {
namespace {

// Exercise 1: HBM bytes of standard attention (Algorithm 0), batch 2, 32 heads, N = 8192, d = 64, bf16, in GB.
Answer standard_signature() {
  Problem p;
  p.batch = 2;
  p.heads_q = p.heads_kv = 32;
  p.seqlen_q = p.seqlen_k = 8192;
  p.head_dim = 64;
  p.dtype = DType::bf16;
  p.validate();
  const tiled::NaiveBytes one = tiled::naive_bytes(p, 0);  // one head of batch entry 0
  const double per_head = static_cast<double>(one.read + one.write);
  Answer a;
  a.value = per_head * static_cast<double>(p.batch * p.heads_q) / 1e9;
  a.unit = "GB";
  a.rel_tolerance = 0.02;
  a.working = std::string("per head: read Q, K, V (3 N d e), S and P (2 N^2 e); write S, P (2 N^2 e) and O (N d e)\n") +
              "  = 4 N d e + 4 N^2 e = 4 x 8192 x 64 x 2 + 4 x 8192^2 x 2 = " + format_number(per_head, 10) +
              " bytes\n" + "x batch x heads = 2 x 32: " + format_number(a.value, 5) +
              " GB (the N^2 terms are 99% of it: that is the signature)";
  return a;
}

}  // namespace

Lesson lesson_12() {
  Lesson l;
  l.number = 12;
  l.slug = "which-version-is-running";
  l.exercises = {
      {"A profiler shows one attention forward of batch 2, 32 heads, N = 8192, d = 64, bf16. If it ran\n"
       "standard attention (Algorithm 0: S and P written to HBM and read back, each N x N in bf16), how many\n"
       "GB (1e9 bytes) of HBM traffic would it show, reads and writes?",
       standard_signature},
  };
  return l;
}

}  // namespace flashlab::lessons
