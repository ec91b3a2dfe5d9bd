// The oracle itself, checked against independent computations: a scalar
// loop written from the documented formulas, finite differences, and the
// identities GQA, varlen and masks must satisfy.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "attention_reference.hpp"
#include "check.hpp"
#include "flashlab/dropout.hpp"
#include "flashlab/error.hpp"

using namespace flashlab;

namespace {

// O for one (b, h) by the formulas in problem.hpp, in long double, no Eigen.
long double scalar_o(const Problem& p, const harness::Inputs& in, int64_t b, int64_t h, int64_t i, int64_t c,
                     long double* lse) {
  const int64_t sq = p.len_q(b), sk = p.len_k(b), g = p.kv_head(h);
  std::vector<long double> s(sk, -INFINITY);
  long double m = -INFINITY;
  for (int64_t j = 0; j < sk; ++j) {
    const long double diag = i + sk - sq;
    const bool vis = (p.window_left < 0 || j >= diag - p.window_left) &&
                     (!p.causal || j <= diag) && (p.window_right < 0 || j <= diag + p.window_right);
    if (!vis) continue;
    long double dot = 0;
    for (int64_t x = 0; x < p.head_dim; ++x)
      dot += (long double)in.q[p.q_offset(b, i, h) + x] * in.k[p.k_offset(b, j, g) + x];
    long double v = p.softmax_scale() * dot;
    if (p.softcap > 0) v = p.softcap * std::tanh(v / p.softcap);
    if (p.alibi) v -= p.alibi_slope(h) * std::fabs((long double)(i + sk - sq - j));
    s[j] = v;
    m = std::max(m, v);
  }
  if (m == -INFINITY) {
    *lse = -INFINITY;
    return 0;
  }
  long double l = 0, o = 0;
  const uint64_t key = dropout::head_key(p.seed, b, h);
  for (int64_t j = 0; j < sk; ++j) l += std::exp(s[j] - m);
  for (int64_t j = 0; j < sk; ++j) {
    long double pij = std::exp(s[j] - m) / l;
    if (p.dropout_p > 0)
      pij = dropout::keep(key, i, j, dropout::threshold(p.dropout_p)) ? pij / (1 - p.dropout_p) : 0;
    o += pij * in.v[p.v_offset(b, j, g) + c];
  }
  *lse = m + std::log(l);
  return o;
}

Problem small_problem() {
  Problem p;
  p.batch = 2;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.seqlen_q = 9;
  p.seqlen_k = 13;
  p.head_dim = 8;
  return p;
}

}  // namespace

TEST_CASE("the fp64 reference equals a scalar loop written from the formulas, with every option") {
  Problem p = small_problem();
  SUBCASE("plain") {}
  SUBCASE("causal, bottom-right") { p.causal = true; }
  SUBCASE("window (3,1)") { p.window_left = 3; p.window_right = 1; }
  SUBCASE("causal + window 2 + softcap + alibi + dropout") {
    p.causal = true;
    p.window_left = 2;
    p.softcap = 2.5;
    p.alibi = true;
    p.dropout_p = 0.3;
    p.seed = 99;
  }
  SUBCASE("varlen") {
    p.cu_seqlens_q = {0, 3, 12};
    p.cu_seqlens_k = {0, 13, 20};
    p.causal = true;
  }
  CAPTURE(p.describe());
  const auto in = harness::random_inputs(p, 3);
  const auto ref = reference::forward_fp64(p, in.q, in.k, in.v);
  double worst = 0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.len_q(b); ++i) {
        long double lse;
        for (int64_t c = 0; c < p.dv(); ++c)
          worst = std::max<double>(worst, std::fabs(scalar_o(p, in, b, h, i, c, &lse) - ref.o[p.o_offset(b, i, h) + c]));
        const double got = ref.lse[p.lse_offset(b, h, i)];
        if (std::isinf((double)lse)) CHECK(got == -std::numeric_limits<double>::infinity());
        else worst = std::max<double>(worst, std::fabs((double)lse - got));
      }
  CHECK(worst < 1e-12);
}

TEST_CASE("fp64 reference gradients match central finite differences of sum(O * dO)") {
  Problem p = small_problem();
  p.batch = 1;
  p.causal = true;
  p.softcap = 3;
  p.alibi = true;
  SUBCASE("no dropout") {}
  SUBCASE("dropout") { p.dropout_p = 0.25; p.seed = 5; }
  auto in = harness::random_inputs(p, 11);
  const auto grads = reference::backward_fp64(p, in.q, in.k, in.v, in.d_o);
  auto loss = [&](const harness::Inputs& x) {
    const auto f = reference::forward_fp64(p, x.q, x.k, x.v);
    double s = 0;
    for (int64_t i = 0; i < f.o.numel(); ++i) s += f.o[i] * x.d_o[i];
    return s;
  };
  // Inputs are float, so perturb by a float-exact step and compare loosely.
  const float eps = 1.0f / 256;
  double worst = 0;
  auto probe = [&](Tensor harness::Inputs::*t, const TensorD& g, int64_t idx) {
    harness::Inputs plus = in, minus = in;
    (plus.*t)[idx] += eps;
    (minus.*t)[idx] -= eps;
    const double fd = (loss(plus) - loss(minus)) / (2.0 * eps);
    worst = std::max(worst, std::fabs(fd - g[idx]) / (1.0 + std::fabs(fd)));
  };
  for (int64_t idx = 0; idx < in.q.numel(); idx += 7) probe(&harness::Inputs::q, grads.dq, idx);
  for (int64_t idx = 0; idx < in.k.numel(); idx += 5) probe(&harness::Inputs::k, grads.dk, idx);
  for (int64_t idx = 0; idx < in.v.numel(); idx += 5) probe(&harness::Inputs::v, grads.dv, idx);
  CHECK(worst < 2e-4);
}

TEST_CASE("GQA equals MHA with K and V repeated per query head; varlen equals separate calls") {
  Problem gqa = small_problem();
  gqa.causal = true;
  const auto in = harness::random_inputs(gqa, 21);
  const auto out = reference::forward_fp64(gqa, in.q, in.k, in.v);
  Problem mha = gqa;
  mha.heads_kv = mha.heads_q;
  Tensor k(mha.k_shape()), v(mha.v_shape());
  for (int64_t b = 0; b < gqa.batch; ++b)
    for (int64_t j = 0; j < gqa.seqlen_k; ++j)
      for (int64_t h = 0; h < gqa.heads_q; ++h)
        for (int64_t c = 0; c < gqa.head_dim; ++c) {
          k[mha.k_offset(b, j, h) + c] = in.k[gqa.k_offset(b, j, gqa.kv_head(h)) + c];
          v[mha.v_offset(b, j, h) + c] = in.v[gqa.v_offset(b, j, gqa.kv_head(h)) + c];
        }
  const auto out_mha = reference::forward_fp64(mha, in.q, k, v);
  for (int64_t i = 0; i < out.o.numel(); ++i) REQUIRE(out.o[i] == doctest::Approx(out_mha.o[i]).epsilon(1e-12));

  // Varlen: the second sequence alone gives the same rows.
  Problem var = gqa;
  var.batch = 2;
  var.cu_seqlens_q = {0, 4, 13};
  var.cu_seqlens_k = {0, 6, 19};
  const auto vin = harness::random_inputs(var, 22);
  const auto vout = reference::forward_fp64(var, vin.q, vin.k, vin.v);
  Problem one = gqa;
  one.batch = 1;
  one.seqlen_q = 9;
  one.seqlen_k = 13;
  Tensor q1(one.q_shape()), k1(one.k_shape()), v1(one.v_shape());
  std::copy(vin.q.data.begin() + var.q_offset(1, 0, 0), vin.q.data.end(), q1.data.begin());
  std::copy(vin.k.data.begin() + var.k_offset(1, 0, 0), vin.k.data.end(), k1.data.begin());
  std::copy(vin.v.data.begin() + var.v_offset(1, 0, 0), vin.v.data.end(), v1.data.begin());
  const auto oout = reference::forward_fp64(one, q1, k1, v1);
  for (int64_t i = 0; i < oout.o.numel(); ++i)
    REQUIRE(oout.o[i] == doctest::Approx(vout.o[var.o_offset(1, 0, 0) + i]).epsilon(1e-12));
}

TEST_CASE("causal masks are bottom-right aligned when seqlen_q != seqlen_k") {
  Problem p;
  p.seqlen_q = 2;
  p.seqlen_k = 5;
  p.causal = true;
  CHECK(p.col_end(0, 0) == 4);  // row 0 sits at key position 3: sees keys 0..3
  CHECK(p.col_end(0, 1) == 5);
  p.seqlen_q = 5;
  p.seqlen_k = 2;
  CHECK(p.col_end(0, 2) == 0);  // rows 0..2 see nothing
  CHECK(p.col_end(0, 3) == 1);
}

TEST_CASE("fully masked rows give O = 0 and LSE = -inf, never NaN, in every precision") {
  Problem p;
  p.seqlen_q = 8;
  p.seqlen_k = 3;
  p.head_dim = 16;
  p.causal = true;
  p.dtype = DType::bf16;
  const auto in = harness::random_inputs(p, 1);
  const auto hi = reference::forward_fp64(p, in.q, in.k, in.v);
  const auto lo = reference::forward_lowp(p, in.q, in.k, in.v);
  for (int64_t i = 0; i < 5; ++i) {
    CHECK(hi.lse[i] == -std::numeric_limits<double>::infinity());
    CHECK(lo.lse[i] == -std::numeric_limits<float>::infinity());
    for (int64_t c = 0; c < 16; ++c) CHECK(hi.o[i * 16 + c] == 0.0);
  }
  const auto g = reference::backward_fp64(p, in.q, in.k, in.v, in.d_o);
  for (double x : g.dq.data) CHECK_FALSE(std::isnan(x));
}

TEST_CASE("a problem whose S and P exceed the memory budget is refused before allocating, naming the bytes") {
  Problem p;
  p.seqlen_q = p.seqlen_k = 65536;
  Tensor empty;
  try {
    reference::forward_fp64(p, empty, empty, empty);
    FAIL("expected a refusal");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find(std::to_string(reference::matrix_bytes(p, reference::Precision::fp64, false))) != std::string::npos);
    CHECK(msg.find("tiled-fa2") != std::string::npos);
  }
}

TEST_CASE("invalid problems are rejected with a message naming the field") {
  Problem p;
  auto msg = [&]() -> std::string {
    try {
      p.validate();
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  };
  CHECK(msg().empty());
  p.heads_q = 6;
  p.heads_kv = 4;
  CHECK(msg().find("multiple of kv-heads") != std::string::npos);
  p = {};
  p.seqlen_q = -3;
  CHECK(msg().find("seqlen_q must be positive") != std::string::npos);
  p = {};
  p.dropout_p = 1.0;
  CHECK(msg().find("dropout") != std::string::npos);
  p = {};
  p.batch = 2;
  p.cu_seqlens_q = {0, 5, 3};
  p.cu_seqlens_k = {0, 1, 2};
  CHECK(msg().find("non-decreasing") != std::string::npos);
}
