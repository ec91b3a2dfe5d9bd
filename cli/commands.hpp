// One function per `flashlab` subcommand; main.cpp wires them to CLI11.
#pragma once
#include <CLI/CLI.hpp>

#include "check.hpp"
#include "problem_flags.hpp"

namespace flashlab::cli {

void add_check(CLI::App& app);
void add_run(CLI::App& app);
void add_step(CLI::App& app);
void add_trace(CLI::App& app);
void add_tour(CLI::App& app);
void add_estimate(CLI::App& app);
void add_viz(CLI::App& app);  // runs flashlab-viz (visualizer/)
void add_shapes(CLI::App& app);  // gpu/shapes.hpp's tile shapes
void add_lesson(CLI::App& app);  // the learning path (lessons/) and its graded exercises

// What `step` and `trace` start from: the problem, the order, the tiles and the seeded random inputs.
struct WalkSetup {
  Problem problem;
  tiled::Order order;
  tiled::Tiling tiling;
  harness::Inputs in;
};
WalkSetup walk_setup(const ProblemFlags& flags, const WalkFlags& walk);

// Prints (table) or dumps (json) the check of every implementation; true when all pass.
bool run_check(const Problem& p, harness::Pass pass, uint64_t seed, double logit_scale, bool json);

}  // namespace flashlab::cli
