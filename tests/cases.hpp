// The one case list the shared harness runs every implementation over.
#pragma once
#include <memory>
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
// The mask-function cases inside harness_cases(): every kind of flashlab/mask.hpp.
std::vector<Case> mask_cases();
// A deterministic dense mask of shape (sq, sk) or (batch, heads, sq, sk): about 1 in 5 pairs masked,
// keys 48..95 masked everywhere (a hole in every line of 48-key tiles), rows 5 and sq - 1 seeing
// nothing, and rows 64..95 x keys 0..47 all visible (a full tile of 32 x 48).
std::shared_ptr<const DenseMask> patterned_mask(std::vector<int64_t> shape);

// Decoding against a KV cache (flash_attn_with_kvcache): every decode implementation runs these.
struct DecodeCase {
  std::string name;
  DecodeProblem problem;
};
std::vector<DecodeCase> decode_cases();

}  // namespace flashlab::testing
