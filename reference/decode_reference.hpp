// The naive decode: what flash_attn_with_kvcache computes, written the plain
// way. Rotary on K_new and Q (in the reference's precision, then rounded to
// the dtype as a kernel storing them would), the append into a copy of the
// cache, the keys of each entry gathered through DecodeProblem::cache_row into
// the lowered varlen problem's K and V, and then the naive attention of
// attention_reference.hpp on DecodeProblem::attention(). Precision as there:
// fp64 is the oracle, input the baseline that sets the tolerance.
#pragma once
#include "attention_reference.hpp"
#include "flashlab/decode_tensors.hpp"

namespace flashlab::reference {

DecodeOutputs<double> decode_fp64(const DecodeProblem& d, const DecodeTensors& in, const Options& options = {});
DecodeOutputs<float> decode_lowp(const DecodeProblem& d, const DecodeTensors& in, const Options& options = {});

// The first two steps on their own: the caches after rotary and append, and the rotated queries.
struct Appended {
  Tensor q;                 // (batch, q_len, heads_q, head_dim), rotated and rounded
  Tensor k_cache, v_cache;  // like the inputs' caches, the new rows written
};
Appended rotate_and_append(const DecodeProblem& d, const DecodeTensors& in, Precision precision);

}  // namespace flashlab::reference
