// The tensors of one decode call (shapes in decode_problem.hpp). Every decode
// implementation reads these and returns the outputs plus the caches as the
// append left them.
#pragma once
#include "flashlab/decode_problem.hpp"
#include "flashlab/error.hpp"
#include "flashlab/tensor.hpp"

namespace flashlab {

struct DecodeTensors {
  Tensor q;                 // (batch, q_len, heads_q, head_dim)
  Tensor k_cache, v_cache;  // (batch, cache_len, heads_kv, head_dim) or (num_pages, page_size, heads_kv, head_dim)
  Tensor k_new, v_new;      // (batch, new_len, heads_kv, head_dim); empty when new_len == 0
  Tensor cos, sin;          // (rotary_seqlen, rotary_dim / 2); empty without rotary
};

template <class T>
struct DecodeOutputs {
  BasicTensor<T> o;                  // (batch, q_len, heads_q, head_dim)
  BasicTensor<T> lse;                // (batch, heads_q, q_len)
  Tensor k_cache, v_cache;           // the caches after the append (values rounded to the dtype)
};

// Validates the problem and that each tensor has the shape it needs; throws flashlab::Error naming the tensor.
inline void check_tensors(const DecodeProblem& d, const DecodeTensors& in) {
  d.validate();
  auto same = [](const Tensor& t, const std::vector<int64_t>& shape, const char* name) {
    if (t.shape != shape)
      throw Error(std::string("decode: ") + name + " has shape " + shape_string(t.shape) + ", the problem needs " +
                  shape_string(shape));
  };
  same(in.q, d.q_shape(), "Q");
  same(in.k_cache, d.cache_shape(), "the K cache");
  same(in.v_cache, d.cache_shape(), "the V cache");
  if (d.new_len > 0) {
    same(in.k_new, d.new_shape(), "K new");
    same(in.v_new, d.new_shape(), "V new");
  }
  if (d.rotary != Rotary::none) {
    same(in.cos, d.rope_shape(), "cos");
    same(in.sin, d.rope_shape(), "sin");
  }
}

}  // namespace flashlab
