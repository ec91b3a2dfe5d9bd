// The correctness rule every implementation is held to (ANCHORS.md, the
// official FlashAttention repository's): against the fp64 oracle,
//   max|out - oracle| <= factor * max|naive_in_same_precision - oracle| + 1e-5
// with factor 2 for O, LSE and (3 for varlen) the gradients. The tolerance
// is derived from the naive reference's own error on the same inputs, never
// picked by hand. Inputs are fresh random numbers rounded to the dtype;
// outputs are checked element by element, and NaN or a wrong -inf fails.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "flashlab/pass.hpp"
#include "flashlab/tensor.hpp"
#include "implementations.hpp"

namespace flashlab::harness {

using flashlab::Pass;
using flashlab::parse_pass;
using flashlab::has_fwd;
using flashlab::has_bwd;
using flashlab::to_string;

// Seeded Normal(0, 1) tensors, each value times `scale` and rounded to `dtype`, drawn in order from one
// stream: how every check draws its inputs (random_inputs here, random_decode_inputs in decode_check.hpp).
class NormalSource {
 public:
  explicit NormalSource(uint64_t seed) : rng_(seed) {}
  Tensor tensor(std::vector<int64_t> shape, double scale, DType dtype);

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
};

struct Inputs {
  Tensor q, k, v, d_o;  // d_o: the upstream gradient dO, like O
};
// Normal(0, 1) values rounded to the dtype; q multiplied by logit_scale
// (e.g. 1000 to test that large logits do not overflow).
Inputs random_inputs(const Problem& p, uint64_t seed, double logit_scale = 1.0);

// The oracle's outputs and the naive low-precision reference's errors: the
// tolerances for one problem and one set of inputs.
struct Baseline {
  TensorD o, lse, dq, dk, dv;
  double err_o = 0, err_lse = 0, err_dq = 0, err_dk = 0, err_dv = 0;
};
Baseline compute_baseline(const Problem& p, const Inputs& in, Pass pass);

struct FieldCheck {
  std::string field;  // O, LSE, dQ, dK, dV
  double error = 0;   // max |out - oracle|
  double tolerance = 0;
  bool pass = false;
};

// The official rule for one output: max|out - oracle| <= factor x baseline_err + 1e-5, factor 2 (3 for
// varlen gradients, check()). Every check judges its fields with it.
constexpr double kToleranceFactor = 2.0, kToleranceAbsolute = 1e-5;
FieldCheck judge(const std::string& field, const Tensor& out, const TensorD& oracle, double baseline_err,
                 double factor = kToleranceFactor);

struct CheckResult {
  std::string impl;
  std::string skipped;  // non-empty: why it did not run
  std::vector<FieldCheck> fields;
  double fwd_seconds = 0, bwd_seconds = 0;
  bool pass() const;
};

CheckResult check(const Implementation& impl, const Problem& p, const Inputs& in, const Baseline& base, Pass pass);

// max |a - b| with -inf == -inf counted as 0 and any NaN or inf mismatch as +inf.
double max_abs_error(const Tensor& out, const TensorD& oracle);

}  // namespace flashlab::harness
