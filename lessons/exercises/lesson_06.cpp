// Lesson 06, "The running-max trick that streams softmax exactly": one row of a seeded problem met
// at its second K/V tile. The prompt gives the row's m and l after tile (0, 0) and its scores in
// tile (0, 1), from the tiled executor; the answers are the executor's alpha and l for that step.
#include <algorithm>
#include <cmath>

#include "flashlab/format.hpp"
#include "flashlab/problem.hpp"
#include "lesson.hpp"
#include "row_walk.hpp"

namespace flashlab::lessons {
namespace {

constexpr int64_t kRow = 1;  // the row the exercises follow

// N = 8, d = 4, fp32, seed 7: `flashlab step --seqlen 8 --hdim 4 --br 4 --bc 4 --seed 7`'s problem.
Problem problem() {
  Problem p;
  p.seqlen_q = p.seqlen_k = 8;
  p.head_dim = 4;
  p.dtype = DType::fp32;
  p.seed = 7;
  p.validate();
  return p;
}
const tiled::Tiling kTiles{4, 4};

std::vector<RowAtTile> the_row() { return walk_row(problem(), kTiles, kRow); }

std::string working(const std::vector<RowAtTile>& t) {
  const tiled::RowStat& s = t[1].stat;
  return "after tile (0,0): m_old = " + format_number(s.m_old, 4) + ", l_old = " + format_number(s.l_old, 4) +
         "\ntile (0,1) scores " + format_scores(t[1].scores) + ": rowmax = " +
         format_number(*std::max_element(t[1].scores.begin(), t[1].scores.end()), 4) +
         "\nm_new = max(m_old, rowmax) = " + format_number(s.m_new, 4) + "\nalpha = exp(m_old - m_new) = " +
         format_number(s.alpha, 4) + "\nl_new = alpha l_old + sum_c exp(S_c - m_new) = " + format_number(s.l_new, 4) +
         " (the executor's numbers: flashlab step --seqlen 8 --hdim 4 --br 4 --bc 4 --seed 7 --non-interactive 2, row 1)";
}

Answer alpha() {
  const std::vector<RowAtTile> t = the_row();
  Answer a;
  a.value = t.at(1).stat.alpha;
  a.rel_tolerance = 0.01;
  a.abs_tolerance = 0.002;
  a.working = working(t);
  return a;
}

Answer l_new() {
  const std::vector<RowAtTile> t = the_row();
  Answer a;
  a.value = t.at(1).stat.l_new;
  a.rel_tolerance = 0.01;
  a.working = working(t);
  return a;
}

std::string prompt(const char* ask) {
  const std::vector<RowAtTile> t = the_row();
  const tiled::RowStat& s = t.at(1).stat;
  return "N = 8, d = 4, fp32, Br = Bc = 4, seed 7, FA2 order. After tile (0,0), row 1 has m = " + format_number(s.m_old, 4) +
         " and l = " + format_number(s.l_old, 4) + ".\nIn tile (0,1) its scores S are " + format_scores(t[1].scores) +
         ".\n" + ask;
}

}  // namespace

Lesson lesson_06() {
  Lesson l;
  l.number = 6;
  l.slug = "running-max-trick";
  l.exercises = {
      {prompt("What is alpha, the factor that rescales row 1's l and O at this tile?"), alpha},
      {prompt("What is row 1's running sum l after this tile (relative to its new running max)?"), l_new},
  };
  return l;
}

}  // namespace flashlab::lessons
