// Lesson 05, "Cut the matrix until it fits in your scratchpad": the Tr x Tc grid of tiles of a ragged
// N (ceil, the last block short) and what Br and Bc each buy in FA2's order (Br divides the K/V re-reads,
// Bc changes nothing in bytes), from the schedule.
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "lesson.hpp"
#include "schedule.hpp"

namespace flashlab::lessons {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Problem one_head(int64_t n, int64_t d, DType dtype) {
  Problem p;
  p.seqlen_q = p.seqlen_k = n;
  p.head_dim = d;
  p.dtype = dtype;
  p.validate();
  return p;
}

// Exercise 1: the tiles of N = 1000 with Br = 128, Bc = 64.
Answer ragged_tiles() {
  const tiled::Schedule s(one_head(1000, 64, DType::fp16), 0, tiled::Tiling{128, 64}, tiled::Order::fa2);
  Answer a;
  a.value = static_cast<double>(s.steps());
  a.unit = "tiles";
  a.abs_tolerance = 0.5;  // a count: exact
  a.working = "Tr = ceil(N / Br) = ceil(1000 / 128) = " + std::to_string(s.Tr()) + " (the last Q block has " +
              std::to_string(s.q_rows(s.Tr() - 1)) + " rows)\nTc = ceil(N / Bc) = ceil(1000 / 64) = " +
              std::to_string(s.Tc()) + " (the last K/V block has " + std::to_string(s.kv_rows(s.Tc() - 1)) +
              " rows)\ntiles = Tr x Tc = " + std::to_string(s.steps()) +
              ": a block is never padded away, the short one at the edge is still a tile";
  return a;
}

// Exercise 2: FA2's forward bytes saved by doubling Br from 64 to 128 (Bc = 64), N = 4096, d = 128, bf16.
Answer br_saving() {
  const Problem p = one_head(4096, 128, DType::bf16);
  const auto total = [&](int64_t br) {
    const tiled::ByteCounts c = tiled::Schedule(p, 0, tiled::Tiling{br, 64}, tiled::Order::fa2).closed_form();
    return static_cast<double>(c.total_load() + c.total_store());
  };
  const double b64 = total(64), b128 = total(128);
  Answer a;
  a.value = (b64 - b128) / kMiB;
  a.unit = "MiB";
  a.rel_tolerance = 0.01;
  a.working = "N d e = 4096 x 128 x 2 = 1 MiB per tensor. FA2 reads K and V once per Q block: Tr x 2 MiB\n"
              "  Br = 64:  Tr = 64, total " + format_number(b64 / kMiB, 6) + " MiB (Q, O, LSE once; K, V 64 times)\n"
              "  Br = 128: Tr = 32, total " + format_number(b128 / kMiB, 6) + " MiB\n"
              "saved: " + format_number(a.value, 6) + " MiB, half of the K and V re-reads (Bc does not enter)";
  return a;
}

}  // namespace

Lesson lesson_05() {
  Lesson l;
  l.number = 5;
  l.slug = "cut-the-matrix";
  l.exercises = {
      {"One head, N = 1000 (not a multiple of anything), tiles Br = 128, Bc = 64. How many tiles S_ij does\n"
       "the forward pass compute?",
       ragged_tiles},
      {"FA2's forward (Q_i outer), one head, N = 4096, d = 128, bf16, Bc = 64. How many MiB of HBM <-> SRAM\n"
       "traffic does raising Br from 64 to 128 save? (LSE is fp32)",
       br_saving},
  };
  l.viz = {"--seqlen", "1000", "--hdim", "64", "--br", "128", "--bc", "64"};
  return l;
}

}  // namespace flashlab::lessons
