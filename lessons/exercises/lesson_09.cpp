// Lesson 09, "Causal masking that doesn't waste tiles": which tiles of the Tr x Tc grid a causal mask
// skips, leaves partial or leaves full, from the schedule's classification.
#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "lesson.hpp"
#include "schedule.hpp"

namespace flashlab::lessons {
namespace {

struct Kinds {
  int64_t full = 0, partial = 0, skipped = 0;
};

Kinds classify(int64_t n, tiled::Tiling tiles) {
  Problem p;
  p.seqlen_q = p.seqlen_k = n;
  p.head_dim = 64;
  p.causal = true;
  p.validate();
  const tiled::Schedule s(p, 0, tiles, tiled::Order::fa2);
  Kinds k;
  for (int64_t i = 0; i < s.Tr(); ++i)
    for (int64_t j = 0; j < s.Tc(); ++j) {
      const tiled::TileKind kind = s.classify(i, j);
      (kind == tiled::TileKind::full ? k.full : kind == tiled::TileKind::partial ? k.partial : k.skipped)++;
    }
  return k;
}

Answer visited(int64_t n, tiled::Tiling tiles, const std::string& how) {
  const Kinds k = classify(n, tiles);
  Answer a;
  a.value = static_cast<double>(k.full + k.partial);
  a.unit = "tiles";
  a.abs_tolerance = 0.5;  // a count: exact
  a.working = how + "\nthe schedule: " + std::to_string(k.full) + " full + " + std::to_string(k.partial) +
              " partial (on the diagonal: computed whole, then masked) = " + format_number(a.value, 8) +
              " visited; " + std::to_string(k.skipped) + " skipped, of " +
              std::to_string(k.full + k.partial + k.skipped);
  return a;
}

Answer square() {
  return visited(4096, tiled::Tiling{128, 128},
                 "Tr = Tc = T = 4096 / 128 = 32; Q block i sees K/V blocks 0..i: i + 1 tiles\n"
                 "sum over i of (i + 1) = T (T + 1) / 2, the T diagonal tiles partial");
}

Answer tall() {
  return visited(1024, tiled::Tiling{128, 64},
                 "Tr = 1024 / 128 = 8, Tc = 1024 / 64 = 16; Q block i (rows 128 i .. 128 i + 127) sees keys up to\n"
                 "128 i + 127, that is K/V blocks 0 .. 2 i + 1: 2 i + 2 tiles, the last two partial; sum over i of (2 i + 2)");
}

}  // namespace

Lesson lesson_09() {
  Lesson l;
  l.number = 9;
  l.slug = "causal-masking-without-waste";
  l.exercises = {
      {"Causal attention, one head, N = 4096, Br = Bc = 128. How many tiles S_ij does the forward pass compute\n"
       "(full or partial), skipping the ones the mask hides entirely?",
       square},
      {"Causal attention, one head, N = 1024, Br = 128, Bc = 64 (FA2's H100 tiles at d = 128). How many tiles\n"
       "does the forward pass compute?",
       tall},
  };
  l.viz = {"--seqlen", "512", "--hdim", "32", "--br", "64", "--bc", "64", "--causal"};
  return l;
}

}  // namespace flashlab::lessons
