// What only the GPU kernels promise beyond the shared harness's rule: the
// deterministic backward (fa2's and fa3's) is bit-reproducible, and the atomic one agrees with it;
// the dropout mask is the CPU's, bit for bit; fa3's FP8 forward passes its rule on awkward shapes; fa3's
// packed GQA tiles pass it and agree with unpacked ones. Without a CUDA device every case reports itself
// skipped.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "check.hpp"
#include "device.hpp"
#include "flashlab/dropout.hpp"
#include "host.hpp"

using namespace flashlab;
using namespace flashlab::harness;

namespace {
bool skip_without_gpu() {
  const gpu::DeviceInfo dev = gpu::probe_device();
  if (!dev.available) MESSAGE("skipped: " << dev.reason << " (GPU kernel test not run)");
  return !dev.available;
}
// The largest |a - b| of two outputs (equal infinities, rows that saw no key, count as 0; a NaN as infinite).
double max_diff(const Tensor& a, const Tensor& b) {
  double worst = a.data.size() == b.data.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.data.size(), b.data.size()); ++i)
    if (std::isnan(a.data[i]) || std::isnan(b.data[i])) worst = INFINITY;
    else if (a.data[i] != b.data[i]) worst = std::max(worst, std::abs(double(a.data[i]) - double(b.data[i])));
  return worst;
}
bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.data.size() == b.data.size() && std::memcmp(a.ptr(), b.ptr(), a.data.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("GPU fa2 and fa3: the deterministic backward gives the same bits every run; the atomic one agrees") {
  if (skip_without_gpu()) return;
  Problem causal;
  causal.batch = 2;
  causal.heads_q = 4;
  causal.heads_kv = 2;
  causal.seqlen_q = 700;
  causal.seqlen_k = 900;
  causal.head_dim = 128;
  causal.causal = true;
  causal.dtype = DType::bf16;
  Problem documents = causal;  // a mask function: each Q block's K/V blocks from its rows' intervals
  documents.seqlen_q = documents.seqlen_k = 900;
  documents.head_dim = 64;
  documents.mask.kind = MaskKind::document;
  documents.mask.doc_lengths = {150, 333, 417};
  Problem wide = causal;  // d = 256: fa3's split kernel, each consumer's columns in their own order
  wide.seqlen_q = 333;
  wide.seqlen_k = 450;
  wide.head_dim = 256;
  for (const char* kernel : {"fa2", "fa3"})
    for (const Problem& p : {causal, documents, wide}) {
      const Inputs in = random_inputs(p, 42);
      CAPTURE(kernel);
      CAPTURE(p.describe());
      if (const std::string why = gpu::backward_unsupported(kernel, p); !why.empty()) {
        MESSAGE(kernel << ": " << why << " (its deterministic backward not run)");
        continue;
      }
      const gpu::HostForward f = gpu::run_forward(kernel, p, in.q, in.k, in.v);
      const gpu::HostBackward det1 = gpu::run_backward(kernel, p, in.q, in.k, in.v, f.o, f.lse, in.d_o, true);
      const gpu::HostBackward det2 = gpu::run_backward(kernel, p, in.q, in.k, in.v, f.o, f.lse, in.d_o, true);
      CHECK(bit_equal(det1.dq, det2.dq));
      CHECK(bit_equal(det1.dk, det2.dk));
      CHECK(bit_equal(det1.dv, det2.dv));
      const gpu::HostBackward atomic = gpu::run_backward(kernel, p, in.q, in.k, in.v, f.o, f.lse, in.d_o, false);
      // Summation order and one bf16 rounding apart.
      auto close = [](const Tensor& a, const Tensor& b) {
        double worst = 0, scale = 0;
        for (size_t i = 0; i < b.data.size(); ++i) {
          worst = std::max(worst, double(std::abs(a.data[i] - b.data[i])));
          scale = std::max(scale, double(std::abs(b.data[i])));
        }
        return worst <= 0.02 * scale;
      };
      CHECK(close(atomic.dq, det1.dq));
      if (std::string(kernel) == "fa2") {  // the same kernel computes dK and dV either way
        CHECK(bit_equal(atomic.dk, det1.dk));
        CHECK(bit_equal(atomic.dv, det1.dv));
      } else {  // fa3's deterministic walk takes the Q blocks from the last: dK and dV summed in another order
        CHECK(close(atomic.dk, det1.dk));
        CHECK(close(atomic.dv, det1.dv));
      }
    }
}

TEST_CASE("GPU fa2: its dropout mask is the CPU's, bit for bit, and drops a fraction p of P") {
  if (skip_without_gpu()) return;
  // With V the identity (seqlen_k = head_dim), O_ij = P_ij keep_ij / (1 - p): O is zero exactly where the
  // kernel dropped (i, j), and no P is zero (scores of random inputs are small).
  Problem p;
  p.batch = 2;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.seqlen_q = 300;
  p.seqlen_k = 64;
  p.head_dim = 64;
  p.dropout_p = 0.17;
  p.seed = 1234;
  p.dtype = DType::bf16;
  Inputs in = random_inputs(p, 7);
  std::fill(in.v.data.begin(), in.v.data.end(), 0.f);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t j = 0; j < p.seqlen_k; ++j)
      for (int64_t g = 0; g < p.heads_kv; ++g) in.v.data[size_t(((b * p.seqlen_k + j) * p.heads_kv + g) * 64 + j)] = 1.f;
  const gpu::HostForward f = gpu::run_forward("fa2", p, in.q, in.k, in.v);
  const uint32_t threshold = dropout::threshold(p.dropout_p);
  int64_t differ = 0, dropped = 0, total = 0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const uint64_t key = dropout::head_key(p.seed, uint64_t(b), uint64_t(h));
      for (int64_t i = 0; i < p.seqlen_q; ++i)
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          const bool gpu_kept = f.o.data[size_t(((b * p.seqlen_q + i) * p.heads_q + h) * 64 + j)] != 0.f;
          differ += gpu_kept != dropout::keep(key, uint64_t(i), uint64_t(j), threshold);
          dropped += !gpu_kept;
          ++total;
        }
    }
  MESSAGE("dropout p = 0.17: " << dropped << " of " << total << " dropped, " << differ << " differ from the CPU's mask");
  CHECK(differ == 0);
  CHECK(std::abs(double(dropped) / double(total) - p.dropout_p) <= 0.01);
}

TEST_CASE("GPU fa3 FP8: awkward shapes pass the FP8 rule") {
  if (skip_without_gpu()) return;
  const Implementation& fp8 = find_implementation("gpu-fa3-fp8");
  struct Case {
    int64_t batch, heads_q, heads_kv, sq, sk, d;
    bool causal;
    int64_t left, right;
    double softcap;
  };
  const Case cases[] = {
      {1, 1, 1, 1, 1, 128, false, -1, -1, 0},      {2, 2, 1, 17, 17, 16, true, -1, -1, 0},
      {1, 4, 2, 97, 300, 256, true, -1, -1, 0},    {1, 2, 2, 1025, 1025, 128, false, 100, 20, 0},
      {3, 2, 2, 300, 129, 208, false, -1, -1, 30}, {1, 8, 1, 1025, 97, 256, true, -1, -1, 0},
  };
  for (const Case& c : cases) {
    Problem p;
    p.batch = c.batch;
    p.heads_q = c.heads_q;
    p.heads_kv = c.heads_kv;
    p.seqlen_q = c.sq;
    p.seqlen_k = c.sk;
    p.head_dim = c.d;
    p.causal = c.causal;
    p.window_left = c.left;
    p.window_right = c.right;
    p.softcap = c.softcap;
    p.dtype = DType::bf16;
    CAPTURE(p.describe());
    if (const std::string why = fp8.unsupported(p); !why.empty()) {
      MESSAGE("gpu-fa3-fp8: " << why << " (not run)");
      continue;
    }
    const Inputs in = random_inputs(p, 7);
    const CheckResult r = check(fp8, p, in, Baseline{}, Pass::fwd);
    REQUIRE(r.skipped.empty());
    for (const FieldCheck& f : r.fields) {
      CAPTURE(f.field);
      CHECK(f.pass);
      CHECK(f.error > 0);  // the kernel rounds: an exact answer would mean the rule compared the wrong thing
    }
    // Reported: how far quantizing the inputs moves O from the bf16 inputs' oracle, beside the rule's error
    // (which is measured on the dequantized inputs, the values the kernel computes on).
    const Baseline plain = compute_baseline(p, in, Pass::fwd);
    const gpu::HostForward out = gpu::run_forward("fa3_fp8", p, in.q, in.k, in.v);
    MESSAGE("O error against the bf16 inputs' oracle " << max_abs_error(out.o, plain.o) << ", against the dequantized "
            "inputs' " << r.fields[0].error << " (tolerance " << r.fields[0].tolerance << ")");
  }
}

TEST_CASE("GPU fa3 PackGQA: packed and unpacked tiles both pass the harness's rule, and agree") {
  if (skip_without_gpu()) return;
  // gpu-fa3 with PackGQA asked for, and refused (the library would pack most of these shapes itself).
  auto forced = [](const char* kernel) {
    Implementation impl = find_implementation("gpu-fa3");
    impl.name = kernel;
    impl.forward = [kernel](const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
      auto r = gpu::run_forward(kernel, p, q, k, v);
      return ForwardOut{std::move(r.o), std::move(r.lse)};
    };
    return impl;
  };
  const Implementation packed = forced("fa3-pack-gqa"), unpacked = forced("fa3-no-pack-gqa");
  struct Case {
    int64_t batch, heads_q, heads_kv, sq, sk, d;
    bool causal;
    int64_t left, right;
    double softcap;
  };
  // Groups 2 to 16 (a tile of 128 rows: 64 to 8 positions), positions that end inside a tile, causal
  // (bottom-right: the packed rows' keys end at their position), windows, softcap, every head dim.
  const Case cases[] = {
      {1, 8, 1, 1, 1, 128, false, -1, -1, 0},     {2, 8, 2, 3, 97, 64, true, -1, -1, 0},
      {1, 16, 2, 17, 1025, 128, true, -1, -1, 0}, {3, 4, 2, 97, 300, 256, false, -1, -1, 0},
      {1, 32, 2, 200, 200, 64, true, -1, -1, 0},  {2, 8, 4, 65, 130, 128, false, 40, 3, 0},
      {1, 16, 4, 33, 1025, 80, false, -1, -1, 30}, {1, 16, 1, 9, 520, 256, true, -1, -1, 0},
  };
  for (const Case& c : cases) {
    Problem p;
    p.batch = c.batch;
    p.heads_q = c.heads_q;
    p.heads_kv = c.heads_kv;
    p.seqlen_q = c.sq;
    p.seqlen_k = c.sk;
    p.head_dim = c.d;
    p.causal = c.causal;
    p.window_left = c.left;
    p.window_right = c.right;
    p.softcap = c.softcap;
    p.dtype = DType::bf16;
    CAPTURE(p.describe());
    if (const std::string why = packed.unsupported(p); !why.empty()) {
      MESSAGE("gpu-fa3: " << why << " (not run)");
      continue;
    }
    const Inputs in = random_inputs(p, 11);
    const Baseline base = compute_baseline(p, in, Pass::fwd);
    for (const Implementation* impl : {&packed, &unpacked}) {
      const CheckResult r = check(*impl, p, in, base, Pass::fwd);
      REQUIRE(r.skipped.empty());
      for (const FieldCheck& f : r.fields) {
        CAPTURE(impl->name);
        CAPTURE(f.field);
        CHECK(f.pass);
      }
    }
    // A row's sums are the same whichever heads share its tile; only the walk's length differs (a packed
    // tile of fewer positions can end a block sooner under a causal mask), and a block a row sees nothing
    // of rescales its sum by exp2(m c - m c) as rounded, 1 within an ulp: LSE agrees to float rounding,
    // O (bf16) to a rounding step.
    const gpu::HostForward a = gpu::run_forward("fa3-pack-gqa", p, in.q, in.k, in.v);
    const gpu::HostForward b = gpu::run_forward("fa3-no-pack-gqa", p, in.q, in.k, in.v);
    CHECK(max_diff(a.lse, b.lse) <= 1e-5);
    CHECK(max_diff(a.o, b.o) <= 1e-2);
  }
}
