// The one case list the shared harness runs every implementation over.
#pragma once
#include <string>
#include <vector>

#include "flashlab/decode_problem.hpp"
#include "flashlab/problem.hpp"

namespace flashlab::testing {

struct Case {
  std::string name;
  Problem problem;
  double logit_scale = 1.0;
  bool check_backward = true;
};

std::vector<Case> harness_cases();

// Decoding against a KV cache (flash_attn_with_kvcache): every decode implementation runs these.
struct DecodeCase {
  std::string name;
  DecodeProblem problem;
};
std::vector<DecodeCase> decode_cases();

}  // namespace flashlab::testing
