// Lesson 07, "Walk one Q tile through every K tile on paper": one row of Q block 1 followed through all
// Tc = 4 K/V tiles by the tiled executor. The prompt gives each tile's local statistics of the row
// (its own max and the sum of exp(S - that max)); the answers are the executor's final LSE = m + log l
// and the product of the row's alphas.
#include <algorithm>
#include <cmath>

#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "lesson.hpp"
#include "row_walk.hpp"

namespace flashlab::lessons {
namespace {

constexpr int64_t kRow = 5;  // row 1 of Q block 1

// N = 16, d = 4, fp32, seed 3: `flashlab step --seqlen 16 --hdim 4 --br 4 --bc 4 --seed 3`'s problem.
Problem problem() {
  Problem p;
  p.seqlen_q = p.seqlen_k = 16;
  p.head_dim = 4;
  p.dtype = DType::fp32;
  p.seed = 3;
  p.validate();
  return p;
}

std::vector<RowAtTile> the_row() { return walk_row(problem(), tiled::Tiling{4, 4}, kRow); }

// A tile's own statistics of the row: max_c S_c and sum_c exp(S_c - max).
std::pair<double, double> local(const RowAtTile& t) {
  const double m = *std::max_element(t.scores.begin(), t.scores.end());
  double l = 0;
  for (float s : t.scores) l += std::exp(static_cast<double>(s) - m);
  return {m, l};
}

std::string walk(const std::vector<RowAtTile>& t) {
  std::string out;
  for (const RowAtTile& r : t)
    out += "  tile (1," + std::to_string(r.j) + "): m " + format_number(r.stat.m_old, 4) + " -> " +
           format_number(r.stat.m_new, 4) + ", alpha " + format_number(r.stat.alpha, 4) + ", l " +
           format_number(r.stat.l_old, 4) + " -> " + format_number(r.stat.l_new, 4) + "\n";
  return out;
}

Answer final_lse() {
  const std::vector<RowAtTile> t = the_row();
  const tiled::RowStat& last = t.back().stat;
  Answer a;
  a.value = last.m_new + std::log(last.l_new);
  a.rel_tolerance = 0.005;
  a.abs_tolerance = 0.002;
  a.working = "the executor's walk of row 5 (m_new = max(m_old, local max); l_new = alpha l_old + local sum x exp(local max - m_new)):\n" +
              walk(t) + "LSE = m + log l = " + format_number(last.m_new, 5) + " + log " + format_number(last.l_new, 5) +
              " = " + format_number(a.value, 5) + "\n(equivalently: M = the largest local max, LSE = M + log sum_j l_j exp(m_j - M))";
  return a;
}

Answer alpha_product() {
  const std::vector<RowAtTile> t = the_row();
  double prod = 1;
  for (size_t k = 1; k < t.size(); ++k) prod *= t[k].stat.alpha;
  Answer a;
  a.value = prod;
  a.rel_tolerance = 0.01;
  a.abs_tolerance = 0.002;
  a.working = walk(t) + "product of alpha over tiles 1..3 = " + format_number(prod, 4) +
              " = exp(m after tile 0 - final m) = exp(" + format_number(t.front().stat.m_new, 4) + " - " +
              format_number(t.back().stat.m_new, 4) + "): the rescales telescope";
  return a;
}

std::string prompt(const char* ask) {
  const std::vector<RowAtTile> t = the_row();
  std::string p = "N = 16, d = 4, fp32, Br = Bc = 4, seed 3, FA2 order: Q block 1 walks K/V tiles j = 0..3. For row 5,\n"
                  "each tile's own max of the row's scores and sum of exp(S - that max):\n";
  for (const RowAtTile& r : t) {
    const auto [m, l] = local(r);
    p += "  j = " + std::to_string(r.j) + ": max " + format_number(m, 4) + ", sum " + format_number(l, 4) + "\n";
  }
  return p + ask;
}

}  // namespace

Lesson lesson_07() {
  Lesson l;
  l.number = 7;
  l.slug = "walk-one-q-tile";
  l.exercises = {
      {prompt("What LSE = m + log l does the walk store for row 5?"), final_lse},
      {prompt("What is the product of row 5's alphas at tiles j = 1, 2, 3?"), alpha_product},
  };
  l.viz = {"--seqlen", "16", "--hdim", "4", "--br", "4", "--bc", "4", "--dtype", "fp32"};
  return l;
}

}  // namespace flashlab::lessons
