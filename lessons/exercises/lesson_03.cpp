// Lesson 03, "The N x N matrix that never had to exist": the HBM <-> SRAM bytes of FA2's forward
// (Q once, K and V once per Q block, O and LSE once) from the schedule, beside standard attention's.
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "lesson.hpp"
#include "schedule.hpp"

namespace flashlab::lessons {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Answer fa2_forward_bytes() {
  Problem p;
  p.seqlen_q = p.seqlen_k = 8192;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.validate();
  const tiled::Schedule s(p, 0, tiled::Tiling{128, 64}, tiled::Order::fa2);
  const tiled::ByteCounts c = s.closed_form();
  const auto bytes = [&](tiled::TensorId t) {
    return static_cast<double>(c.load[static_cast<int>(t)] + c.store[static_cast<int>(t)]);
  };
  const tiled::NaiveBytes naive = tiled::naive_bytes(p, 0);
  Answer a;
  a.value = static_cast<double>(c.total_load() + c.total_store()) / kMiB;
  a.unit = "MiB";
  a.rel_tolerance = 0.01;
  const std::string mib = " MiB";
  a.working = "N d e = 8192 x 128 x 2 bytes = 2 MiB per tensor; Tr = N / Br = " + std::to_string(s.Tr()) + " Q blocks\n" +
              "  Q read once:                    " + format_number(bytes(tiled::TensorId::Q) / kMiB, 6) + mib + "\n" +
              "  K and V read once per Q block:  " + format_number(bytes(tiled::TensorId::K) / kMiB, 6) + " + " +
              format_number(bytes(tiled::TensorId::V) / kMiB, 6) + mib + "\n" +
              "  O written once:                 " + format_number(bytes(tiled::TensorId::O) / kMiB, 6) + mib + "\n" +
              "  LSE written once (fp32, N x 4): " + format_number(bytes(tiled::TensorId::LSE) / kMiB, 6) + mib + "\n" +
              "  total:                          " + format_number(a.value, 6) + mib +
              "\n(standard attention moves " + format_number((naive.read + naive.write) / kMiB, 6) +
              " MiB: S and P, 128 MiB each, written and read back)";
  return a;
}

}  // namespace

Lesson lesson_03() {
  Lesson l;
  l.number = 3;
  l.slug = "the-matrix-that-never-existed";
  l.exercises = {
      {"FA2's forward, one head, N = 8192, d = 128, bf16, tiles Br = 128, Bc = 64 (FA2's H100 tiles at\n"
       "d = 128): Q_i is loaded once, K_j and V_j once per Q block, O_i and LSE_i (fp32) written once.\n"
       "How many MiB move between HBM and SRAM in all?",
       fa2_forward_bytes},
  };
  l.viz = {"--seqlen", "2048", "--hdim", "64", "--br", "128", "--bc", "64"};
  return l;
}

}  // namespace flashlab::lessons
