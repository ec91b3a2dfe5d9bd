#include "decode_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "decode_executor.hpp"
#include "decode_reference.hpp"
#include "host.hpp"

namespace flashlab::harness {
namespace {

TensorD to_double(const Tensor& t) {
  TensorD d(t.shape);
  std::copy(t.data.begin(), t.data.end(), d.data.begin());
  return d;
}

std::vector<DecodeImplementation> build() {
  return {
      {"reference", "naive decode in the input precision: rotary, append, gather, S and P materialized",
       [](const DecodeProblem& d, const DecodeTensors& in) { return reference::decode_lowp(d, in); }},
      {"tiled-decode", "tiled online softmax over the cache in one split (FA2 order, no combine)",
       [](const DecodeProblem& d, const DecodeTensors& in) {
         DecodeProblem one = d;
         one.num_splits = 1;
         return tiled::decode(one, in);
       }},
      {"tiled-split-kv", "flash-decoding: the key blocks cut into num_splits, partial O and LSE, then the combine",
       [](const DecodeProblem& d, const DecodeTensors& in) { return tiled::decode(d, in); }},
      {"gpu-decode", "gpu/decode/: rotary + append in place, split-KV on tensor cores (GQA heads packed), combine",
       [](const DecodeProblem& d, const DecodeTensors& in) { return gpu::run_decode(d, in); },
       [](const DecodeProblem& d) { return gpu::decode_unsupported(d); }},
  };
}

}  // namespace

const std::vector<DecodeImplementation>& decode_implementations() {
  static const std::vector<DecodeImplementation> list = build();
  return list;
}

std::vector<int64_t> shuffled_block_table(int64_t batch, int64_t max_pages, uint64_t seed) {
  std::vector<int64_t> table(static_cast<size_t>(batch * max_pages));
  std::iota(table.begin(), table.end(), int64_t{0});
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::shuffle(table.begin(), table.end(), rng);
  return table;
}

DecodeTensors random_decode_inputs(const DecodeProblem& d, uint64_t seed, double logit_scale) {
  NormalSource source(seed);
  auto fill = [&](std::vector<int64_t> shape, double scale) { return source.tensor(std::move(shape), scale, d.dtype); };
  DecodeTensors in;
  in.q = fill(d.q_shape(), logit_scale);
  in.k_cache = fill(d.cache_shape(), 1.0);
  in.v_cache = fill(d.cache_shape(), 1.0);
  if (d.new_len > 0) {
    in.k_new = fill(d.new_shape(), 1.0);
    in.v_new = fill(d.new_shape(), 1.0);
  }
  if (d.rotary != Rotary::none) {
    // RoPE (Su et al. 2021): theta_k = base^(-2k / rotary_dim), angle = pos * theta_k, base 10000.
    constexpr double kRopeBase = 10000.0;
    in.cos = Tensor(d.rope_shape());
    in.sin = Tensor(d.rope_shape());
    const int64_t half = d.rot_dim() / 2;
    for (int64_t pos = 0; pos < d.rope_rows(); ++pos)
      for (int64_t k = 0; k < half; ++k) {
        const double angle = static_cast<double>(pos) * std::pow(kRopeBase, -2.0 * k / d.rot_dim());
        in.cos[pos * half + k] = round_to(d.dtype, static_cast<float>(std::cos(angle)));
        in.sin[pos * half + k] = round_to(d.dtype, static_cast<float>(std::sin(angle)));
      }
  }
  return in;
}

DecodeBaseline decode_baseline(const DecodeProblem& d, const DecodeTensors& in) {
  DecodeOutputs<double> oracle = reference::decode_fp64(d, in);
  const DecodeOutputs<float> low = reference::decode_lowp(d, in);
  DecodeBaseline base{std::move(oracle.o), std::move(oracle.lse), to_double(oracle.k_cache),
                      to_double(oracle.v_cache)};
  base.err_o = max_abs_error(low.o, base.o);
  base.err_lse = max_abs_error(low.lse, base.lse);
  base.err_k = max_abs_error(low.k_cache, base.k_cache);
  base.err_v = max_abs_error(low.v_cache, base.v_cache);
  return base;
}

CheckResult check_decode(const DecodeImplementation& impl, const DecodeProblem& d, const DecodeTensors& in,
                         const DecodeBaseline& base) {
  CheckResult result;
  result.impl = impl.name;
  if (impl.unsupported) result.skipped = impl.unsupported(d);
  if (!result.skipped.empty()) return result;
  const auto t0 = std::chrono::steady_clock::now();
  const DecodeOutputs<float> out = impl.run(d, in);
  result.fwd_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto field = [&](const char* name, const Tensor& got, const TensorD& oracle, double baseline_err) {
    result.fields.push_back(judge(name, got, oracle, baseline_err));
  };
  field("O", out.o, base.o, base.err_o);
  field("LSE", out.lse, base.lse, base.err_lse);
  if (d.new_len > 0) {
    field("Kcache", out.k_cache, base.k_cache, base.err_k);
    field("Vcache", out.v_cache, base.v_cache, base.err_v);
  }
  return result;
}

}  // namespace flashlab::harness
