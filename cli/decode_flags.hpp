// The flags of decoding (`check --decode`, `trace --decode`, `estimate --decode`), read beside the
// shared ProblemFlags (batch, heads, kv-heads, hdim, causal, softcap, dtype, seed), and their
// conversion to a validated DecodeProblem.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "flashlab/decode_problem.hpp"
#include "problem_flags.hpp"

namespace flashlab::cli {

struct DecodeFlags {
  bool decode = false;
  int64_t q_len = 1;
  std::optional<int64_t> cache_len;  // unset: the largest cache_seqlens plus the append
  std::string cache_seqlens;         // "5,900,17"; one per batch entry (sets --batch when that is left at 1)
  int64_t page_size = 0;             // 0: contiguous
  std::optional<int64_t> max_pages;  // unset: ceil(cache_len / page_size)
  std::optional<int64_t> num_pages;  // unset: batch * max_pages
  int64_t num_splits = 4;
  std::string rotary = "none";
  int64_t rotary_dim = 0;
  int64_t append = 0;

  void add_to(CLI::App& app);
  // Throws flashlab::Error (through DecodeProblem::validate) naming what is wrong. With
  // `zero_splits_choose`, --num-splits 0 is kept as 0 (the estimate's heuristic chooses).
  DecodeProblem problem(const ProblemFlags& shared, bool zero_splits_choose = false) const;
};

}  // namespace flashlab::cli
