// One query row followed through FA2's forward pass by the tiled executor: at each K/V block j, the
// row's scores S_ij (after scale and mask) and its online-softmax state (m, l, alpha). Lessons 06 and 07
// build their prompts and their answers from it, so both come from the same run as `flashlab step`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "events.hpp"
#include "flashlab/problem.hpp"
#include "tiling.hpp"

namespace flashlab::lessons {

struct RowAtTile {
  int64_t j = 0;              // K/V block
  std::vector<float> scores;  // the row of S_ij, Bc numbers (-inf where masked)
  tiled::RowStat stat{};      // m_old, m_new, l_old, l_new, alpha
};

// The inputs are `flashlab step --seed SEED`'s (harness::random_inputs); batch 0, head 0.
std::vector<RowAtTile> walk_row(const Problem& p, tiled::Tiling tiling, int64_t row);

std::string format_scores(const std::vector<float>& scores);  // "[0.1234, -1.5, ...]", 4 significant digits

}  // namespace flashlab::lessons
