// Terminal rendering of a stepper's state, shared by `step` and `tour`.
#pragma once
#include <string>

#include "stepper.hpp"

namespace flashlab::cli {

// The tile grid: '#' done, '@' current, '.' pending, ' ' skipped by the mask.
std::string render_grid(const tiled::Stepper& st);
// One tile step: what moved, S_ij, per-row m, l, alpha, and the bytes so far.
std::string render_step(const Problem& p, const tiled::Stepper& st, int max_rows = 6, int max_cols = 8);

}  // namespace flashlab::cli
