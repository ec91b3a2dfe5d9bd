// The problem flags every subcommand shares, bound to a CLI11 (sub)command,
// and their conversion to a validated Problem.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "flashlab/pass.hpp"
#include "flashlab/problem.hpp"
#include "schedule.hpp"

namespace flashlab::cli {

struct ProblemFlags {
  int64_t batch = 1, heads = 1;
  // Unset: the defaults (kv_heads: heads; the lengths: default_seqlen). A value given is the user's, 0 included,
  // and validated as such.
  std::optional<int64_t> kv_heads;
  std::optional<int64_t> seqlen, seqlen_q, seqlen_k;
  int64_t hdim = 64;
  bool causal = false;
  std::string window;  // "L,R"
  double softcap = 0, dropout = 0;
  bool alibi = false;
  uint64_t seed = 0;
  std::string dtype = "fp32";
  std::string pass = "fwd";
  std::string mask = "none";    // mask function (flashlab/mask.hpp)
  std::string prefix;           // prefix-lm: "128" or one per batch entry "128,64"
  std::string doc_lengths;      // document: "300,700,24"
  int64_t chunk = 0;            // chunked
  std::string mask_file;        // dense
  int64_t default_seqlen = 256;

  void add_to(CLI::App& app, bool with_pass = true, bool with_seqlen = true);
  Problem problem() const;  // through ProblemSpec (flashlab/problem_spec.hpp); throws flashlab::Error
  Pass parsed_pass() const { return parse_pass(pass); }
};

// The walk flags of the commands that step through tiles (step, trace): the order and the tile sizes.
struct WalkFlags {
  std::string order = "fa2";
  int64_t br = 64, bc = 64;
  bool q_from_end = false;

  void add_to(CLI::App& app);
  tiled::Order parsed_order() const { return tiled::parse_order(order); }
  tiled::Tiling tiling() const { return {br, bc, q_from_end}; }
};

}  // namespace flashlab::cli
