// Every registered implementation, over the one case list, against the fp64
// oracle with the official rule (harness/check.hpp).
#include <doctest/doctest.h>

#include "cases.hpp"
#include "check.hpp"
#include "device.hpp"
#include "executor.hpp"

using namespace flashlab;
using namespace flashlab::harness;

namespace {
Implementation small_tiles(tiled::Order order) {
  const tiled::Tiling tiling{32, 48};
  Implementation impl = find_implementation(order == tiled::Order::fa1 ? "tiled-fa1" : "tiled-fa2");
  impl.name += " 32x48";
  impl.forward = [=](const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
    auto r = tiled::forward(p, q, k, v, tiling, order);
    return ForwardOut{std::move(r.o), std::move(r.lse)};
  };
  impl.backward = [=](const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                      const Tensor& lse, const Tensor& d_o) {
    auto r = tiled::backward(p, q, k, v, o, lse, d_o, tiling, nullptr,
                             order == tiled::Order::fa1 ? tiled::Order::fa1_backward : tiled::Order::backward);
    return BackwardOut{std::move(r.dq), std::move(r.dk), std::move(r.dv)};
  };
  return impl;
}
}  // namespace

TEST_CASE("every implementation passes every case, forward and backward") {
  uint64_t seed = 1;
  for (const auto& c : testing::harness_cases()) {
    const Inputs in = random_inputs(c.problem, seed++, c.logit_scale);
    const Pass pass = c.check_backward ? Pass::fwd_bwd : Pass::fwd;
    const Baseline base = compute_baseline(c.problem, in, pass);
    for (const auto& impl : implementations()) {
      CAPTURE(c.name);
      CAPTURE(impl.name);
      const CheckResult r = check(impl, c.problem, in, base, pass);
      if (!r.skipped.empty()) {
        MESSAGE(impl.name << " on '" << c.name << "': " << r.skipped);
        continue;
      }
      REQUIRE(r.fields.size() == (c.check_backward ? 5u : 2u));
      for (const auto& f : r.fields) {
        CAPTURE(f.field);
        CAPTURE(f.error);
        CAPTURE(f.tolerance);
        CHECK(f.pass);
      }
    }
  }
}

TEST_CASE("the tiled implementations also pass every case with small, awkward tiles") {
  // The registered tiled implementations use large CPU tiles, which cover many
  // cases with a single Q block; 32 x 48 tiles exercise every block boundary.
  uint64_t seed = 1000;
  for (const auto& c : testing::harness_cases()) {
    const Pass pass = c.check_backward ? Pass::fwd_bwd : Pass::fwd;
    const Inputs in = random_inputs(c.problem, seed++, c.logit_scale);
    const Baseline base = compute_baseline(c.problem, in, pass);
    for (tiled::Order order : {tiled::Order::fa1, tiled::Order::fa2}) {
      Implementation impl = small_tiles(order);
      CAPTURE(c.name);
      CAPTURE(impl.name);
      const CheckResult r = check(impl, c.problem, in, base, pass);
      for (const auto& f : r.fields) {
        CAPTURE(f.field);
        CAPTURE(f.error);
        CAPTURE(f.tolerance);
        CHECK(f.pass);
      }
    }
  }
}

TEST_CASE("the tolerance is derived from the naive low-precision error, and catches a wrong answer") {
  Problem p;
  p.heads_q = p.heads_kv = 2;
  p.seqlen_q = p.seqlen_k = 64;
  p.dtype = DType::bf16;
  const Inputs in = random_inputs(p, 7);
  const Baseline base = compute_baseline(p, in, Pass::fwd);
  CHECK(base.err_o > 1e-4);  // bf16 rounding is visible: the tolerance is not a hand-picked constant
  // An implementation that is off by one bf16 ulp in one element of O must fail.
  Implementation broken = find_implementation("tiled-fa2");
  broken.name = "broken";
  broken.forward = [](const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
    ForwardOut out = find_implementation("tiled-fa2").forward(p, q, k, v);
    out.o[5] += 0.05f;
    return out;
  };
  CHECK_FALSE(check(broken, p, in, base, Pass::fwd).pass());
  CHECK(check(find_implementation("tiled-fa2"), p, in, base, Pass::fwd).pass());
}

TEST_CASE("GPU implementations report themselves skipped where there is no CUDA device") {
  const gpu::DeviceInfo dev = gpu::probe_device();
  if (!dev.available) {
    MESSAGE("skipped: " << dev.reason << " (GPU implementations are not run)");
  } else {
    MESSAGE("CUDA device: " << dev.name << " sm_" << dev.sm_major << dev.sm_minor);
  }
  for (const auto& impl : implementations())
    if (impl.needs_gpu && !dev.available) CHECK(impl.unsupported(Problem{}).rfind("skipped", 0) == 0);
}
