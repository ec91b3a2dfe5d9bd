// The score function every CPU implementation shares: from the raw dot
// product q_i . k_j to the logit the softmax sees (see problem.hpp for the
// order of scale, softcap, ALiBi and mask), and its derivative for backward.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "flashlab/problem.hpp"

namespace flashlab {

// Per-(batch, head) constants, computed once so the inner loops stay plain.
template <class Real>
struct ScoreFn {
  Real scale;        // softmax scale
  Real softcap;      // 0: off
  Real alibi_slope;  // 0: off
  int64_t diag;      // seqlen_k - seqlen_q of this batch entry: row i sits at key position i + diag

  ScoreFn(const Problem& p, int64_t b, int64_t h)
      : scale(static_cast<Real>(p.softmax_scale())),
        softcap(static_cast<Real>(p.softcap)),
        alibi_slope(static_cast<Real>(p.alibi_slope(h))),
        diag(p.len_k(b) - p.len_q(b)) {}

  // s = softcap * tanh(scale * x / softcap) - slope * |i + diag - j|
  Real operator()(Real dot, int64_t i, int64_t j) const {
    Real s = scale * dot;
    if (softcap > 0) s = softcap * std::tanh(s / softcap);
    if (alibi_slope != 0) s -= alibi_slope * static_cast<Real>(std::llabs(i + diag - j));
    return s;
  }

  // d s / d dot = scale * (1 - tanh^2(scale * dot / softcap)); ALiBi and the mask are constants.
  Real dscore(Real dot) const {
    if (softcap <= 0) return scale;
    const Real t = std::tanh(scale * dot / softcap);
    return scale * (1 - t * t);
  }
};

}  // namespace flashlab
