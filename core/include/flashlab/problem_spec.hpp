// ProblemSpec: a problem as the command line and the visualizer's settings spell it, and the one place
// that turns those fields into a validated Problem (equal lengths unless given apart, kv heads
// defaulting to the query heads, the window written "L,R", the dtype by name).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flashlab/problem.hpp"

namespace flashlab {

struct ProblemSpec {
  int64_t batch = 1, heads = 1;
  std::optional<int64_t> kv_heads;  // unset: the same as heads
  int64_t seqlen_q = 256, seqlen_k = 256;
  int64_t hdim = 64;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;  // -1: unbounded side
  double softcap = 0, dropout = 0;
  bool alibi = false;
  uint64_t seed = 0;
  std::string dtype = "fp32";
  // The mask function (mask.hpp): "none" | "causal" (the same as causal = true) | "prefix-lm" | "document" |
  // "chunked" | "dense", with its one parameter.
  std::string mask = "none";
  std::vector<int64_t> prefix{};     // prefix-lm: one length, or one per batch entry
  std::vector<int64_t> doc_lengths{};  // document
  int64_t chunk = 0;                 // chunked
  std::string mask_file{};           // dense: a .npy of bool or uint8

  Problem build() const;  // validated; throws flashlab::Error naming the bad field
};

// "L,R" (e.g. "128,0"; -1 for an unbounded side) -> (L, R); throws flashlab::Error on anything else.
std::pair<int64_t, int64_t> parse_window(const std::string& text);
// "300,700,24" -> {300, 700, 24}; throws flashlab::Error naming `flag` on anything else.
std::vector<int64_t> parse_int_list(const std::string& text, const char* flag);

}  // namespace flashlab
