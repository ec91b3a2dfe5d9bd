// Decoding through the same rule as every other check (check.hpp): each decode
// implementation against the fp64 oracle (reference/decode_reference.hpp),
//   max|out - oracle| <= 2 x max|naive_in_same_precision - oracle| + 1e-5
// for O, LSE and, when keys are appended, the K and V caches the append left.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "check.hpp"
#include "flashlab/decode_tensors.hpp"

namespace flashlab::harness {

struct DecodeImplementation {
  std::string name;         // reference, tiled-decode, tiled-split-kv
  std::string description;  // one line
  std::function<DecodeOutputs<float>(const DecodeProblem&, const DecodeTensors&)> run;
  std::function<std::string(const DecodeProblem&)> unsupported = {};  // empty, or "" when it runs: else why not
};
const std::vector<DecodeImplementation>& decode_implementations();

// Normal(0, 1) values rounded to the dtype for Q, the whole caches (unused rows too: reading one is
// an error the check sees) and K/V new; q times logit_scale; cos/sin of RoPE's angles
// pos * 10000^(-2k / rotary_dim), rounded to the dtype.
DecodeTensors random_decode_inputs(const DecodeProblem& d, uint64_t seed, double logit_scale = 1.0);

// A paged problem's block table: logical page p of entry b -> a seeded shuffle of 0 .. batch * max_pages - 1,
// so that logical order and physical order differ.
std::vector<int64_t> shuffled_block_table(int64_t batch, int64_t max_pages, uint64_t seed);

struct DecodeBaseline {
  TensorD o, lse, k_cache, v_cache;
  double err_o = 0, err_lse = 0, err_k = 0, err_v = 0;
};
DecodeBaseline decode_baseline(const DecodeProblem& d, const DecodeTensors& in);

CheckResult check_decode(const DecodeImplementation& impl, const DecodeProblem& d, const DecodeTensors& in,
                         const DecodeBaseline& base);

}  // namespace flashlab::harness
