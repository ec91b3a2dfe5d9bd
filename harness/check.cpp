#include "check.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "attention_reference.hpp"
#include "flashlab/error.hpp"

namespace flashlab::harness {

Tensor NormalSource::tensor(std::vector<int64_t> shape, double scale, DType dtype) {
  Tensor t(std::move(shape));
  for (float& x : t.data) x = round_to(dtype, static_cast<float>(scale * normal_(rng_)));
  return t;
}

FieldCheck judge(const std::string& field, const Tensor& out, const TensorD& oracle, double baseline_err,
                 double factor) {
  const double err = max_abs_error(out, oracle), tol = factor * baseline_err + kToleranceAbsolute;
  return {field, err, tol, err <= tol};
}

Inputs random_inputs(const Problem& p, uint64_t seed, double logit_scale) {
  NormalSource source(seed);
  Inputs in;
  in.q = source.tensor(p.q_shape(), logit_scale, p.dtype);
  in.k = source.tensor(p.k_shape(), 1.0, p.dtype);
  in.v = source.tensor(p.v_shape(), 1.0, p.dtype);
  in.d_o = source.tensor(p.o_shape(), 1.0, p.dtype);
  return in;
}

double max_abs_error(const Tensor& out, const TensorD& oracle) {
  if (out.shape != oracle.shape) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double a = out[i], b = oracle[i];
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::infinity();
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::abs(a - b));
  }
  return worst;
}

Baseline compute_baseline(const Problem& p, const Inputs& in, Pass pass) {
  Baseline base;
  auto o64 = reference::forward_fp64(p, in.q, in.k, in.v);
  auto low = reference::forward_lowp(p, in.q, in.k, in.v);
  base.o = std::move(o64.o);
  base.lse = std::move(o64.lse);
  base.err_o = max_abs_error(low.o, base.o);
  base.err_lse = max_abs_error(low.lse, base.lse);
  if (has_bwd(pass)) {
    auto g64 = reference::backward_fp64(p, in.q, in.k, in.v, in.d_o);
    auto glow = reference::backward_lowp(p, in.q, in.k, in.v, in.d_o);
    base.dq = std::move(g64.dq);
    base.dk = std::move(g64.dk);
    base.dv = std::move(g64.dv);
    base.err_dq = max_abs_error(glow.dq, base.dq);
    base.err_dk = max_abs_error(glow.dk, base.dk);
    base.err_dv = max_abs_error(glow.dv, base.dv);
  }
  return base;
}

bool CheckResult::pass() const {
  if (!skipped.empty()) return true;
  for (const auto& f : fields)
    if (!f.pass) return false;
  return !fields.empty();
}

namespace {

// An implementation that rounds its own inputs (Implementation::quantized), judged on the values it
// computes on: the oracle in fp64 on them, the baseline reference::forward_fp8 (the forward only).
CheckResult check_quantized(const Implementation& impl, const Problem& p, const Inputs& in, Pass pass) {
  CheckResult result;
  result.impl = impl.name;
  Inputs x = in;
  x.q = impl.quantized(in.q);
  x.k = impl.quantized(in.k);
  x.v = impl.quantized(in.v);
  const auto oracle = reference::forward_fp64(p, x.q, x.k, x.v);
  const auto low = reference::forward_fp8(p, x.q, x.k, x.v);
  const auto t0 = std::chrono::steady_clock::now();
  ForwardOut f = impl.forward(p, x.q, x.k, x.v);
  result.fwd_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (has_fwd(pass)) {
    result.fields.push_back(judge("O", f.o, oracle.o, max_abs_error(low.o, oracle.o)));
    result.fields.push_back(judge("LSE", f.lse, oracle.lse, max_abs_error(low.lse, oracle.lse)));
  }
  return result;
}

}  // namespace

CheckResult check(const Implementation& impl, const Problem& p, const Inputs& in, const Baseline& base, Pass pass) {
  CheckResult result;
  result.impl = impl.name;
  result.skipped = impl.unsupported(p);
  if (!result.skipped.empty()) return result;
  if (has_bwd(pass) && !impl.has_backward) {
    result.skipped = "skipped: no backward pass";
    return result;
  }
  if (has_bwd(pass) && impl.backward_unsupported) {
    result.skipped = impl.backward_unsupported(p);
    if (!result.skipped.empty()) return result;
  }
  if (impl.quantized) return check_quantized(impl, p, in, pass);
  constexpr double kFactor = kToleranceFactor, kVarlenGradFactor = 3.0;
  auto field = [&](const char* name, const Tensor& out, const TensorD& oracle, double baseline_err, double factor) {
    result.fields.push_back(judge(name, out, oracle, baseline_err, factor));
  };
  using clock = std::chrono::steady_clock;
  // The forward runs for either pass: backward consumes its O and LSE, as a training step would.
  const auto t0 = clock::now();
  ForwardOut f = impl.forward(p, in.q, in.k, in.v);
  result.fwd_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  if (has_fwd(pass)) {
    field("O", f.o, base.o, base.err_o, kFactor);
    field("LSE", f.lse, base.lse, base.err_lse, kFactor);
  }
  if (has_bwd(pass)) {
    const auto t1 = clock::now();
    BackwardOut g = impl.backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o);
    result.bwd_seconds = std::chrono::duration<double>(clock::now() - t1).count();
    const double factor = p.varlen() ? kVarlenGradFactor : kFactor;
    field("dQ", g.dq, base.dq, base.err_dq, factor);
    field("dK", g.dk, base.dk, base.err_dk, factor);
    field("dV", g.dv, base.dv, base.err_dv, factor);
  }
  return result;
}

}  // namespace flashlab::harness
