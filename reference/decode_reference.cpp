// Naive decode = rotary + append + gather + naive attention (decode_reference.hpp).
#include "decode_reference.hpp"

#include <type_traits>
#include <vector>

#include "flashlab/rotary.hpp"

namespace flashlab::reference {
namespace {

// One row through rotary in Real arithmetic, rounded to the dtype into dst.
template <class Real>
void rotate_into(const DecodeProblem& d, const DecodeTensors& in, const float* x, int64_t pos, float* dst) {
  std::vector<Real> out(static_cast<size_t>(d.head_dim));
  const int64_t half = d.rot_dim() / 2;
  const float* cos = d.rotary == Rotary::none ? nullptr : in.cos.ptr() + pos * half;
  const float* sin = d.rotary == Rotary::none ? nullptr : in.sin.ptr() + pos * half;
  rotate_row<Real>(d.rotary, d.head_dim, d.rot_dim(), x, cos, sin, out.data());
  for (int64_t c = 0; c < d.head_dim; ++c) dst[c] = round_to(d.dtype, static_cast<float>(out[c]));
}

template <class Real>
Appended rotate_and_append_impl(const DecodeProblem& d, const DecodeTensors& in) {
  check_tensors(d, in);
  Appended a{Tensor(d.q_shape()), in.k_cache, in.v_cache};
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t t = 0; t < d.new_len; ++t)            // K_new[b, t] -> cache row cache_seqlens[b] + t
      for (int64_t g = 0; g < d.heads_kv; ++g) {
        const int64_t dst = d.cache_offset(b, d.new_pos(b, t), g), src = d.new_offset(b, t, g);
        rotate_into<Real>(d, in, in.k_new.ptr() + src, d.new_pos(b, t), a.k_cache.ptr() + dst);
        std::copy(in.v_new.ptr() + src, in.v_new.ptr() + src + d.head_dim, a.v_cache.ptr() + dst);
      }
    for (int64_t i = 0; i < d.q_len; ++i)
      for (int64_t h = 0; h < d.heads_q; ++h)
        rotate_into<Real>(d, in, in.q.ptr() + d.q_offset(b, i, h), d.q_pos(b, i), a.q.ptr() + d.q_offset(b, i, h));
  }
  return a;
}

template <class Real>
DecodeOutputs<Real> decode_impl(const DecodeProblem& d, const DecodeTensors& in, const Options& options) {
  Appended a = rotate_and_append_impl<Real>(d, in);   // fp64: the oracle's rotary; float: the input precision's
  // Gather each entry's keys, in logical order, into the lowered problem's varlen K and V.
  const Problem p = d.attention();
  Tensor k(p.k_shape()), v(p.v_shape());                                // (total_k, heads_kv, head_dim)
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t j = 0; j < d.seqlen_k(b); ++j)
      for (int64_t g = 0; g < d.heads_kv; ++g) {
        const int64_t src = d.cache_offset(b, j, g), dst = p.k_offset(b, j, g);
        std::copy(a.k_cache.ptr() + src, a.k_cache.ptr() + src + d.head_dim, k.ptr() + dst);
        std::copy(a.v_cache.ptr() + src, a.v_cache.ptr() + src + d.head_dim, v.ptr() + dst);
      }
  Forward<Real> f;
  if constexpr (std::is_same_v<Real, double>) f = forward_fp64(p, a.q, k, v, options);
  else f = forward_lowp(p, a.q, k, v, options);
  // The varlen LSE is (heads_q, total_q); decoding returns (batch, heads_q, q_len).
  DecodeOutputs<Real> out{std::move(f.o), BasicTensor<Real>(d.lse_shape()), std::move(a.k_cache),
                          std::move(a.v_cache)};
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads_q; ++h)
      for (int64_t i = 0; i < d.q_len; ++i) out.lse[d.lse_offset(b, h, i)] = f.lse[p.lse_offset(b, h, i)];
  out.o.shape = d.o_shape();  // (total_q, heads, d) and (batch, q_len, heads, d) are the same bytes
  return out;
}

}  // namespace

Appended rotate_and_append(const DecodeProblem& d, const DecodeTensors& in, Precision precision) {
  return precision == Precision::fp64 ? rotate_and_append_impl<double>(d, in) : rotate_and_append_impl<float>(d, in);
}

DecodeOutputs<double> decode_fp64(const DecodeProblem& d, const DecodeTensors& in, const Options& options) {
  return decode_impl<double>(d, in, options);
}
DecodeOutputs<float> decode_lowp(const DecodeProblem& d, const DecodeTensors& in, const Options& options) {
  return decode_impl<float>(d, in, options);
}

}  // namespace flashlab::reference
