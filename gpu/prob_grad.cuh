// The backward's one formula a score, shared by fa2's (fa2_bwd.cu) and fa3's (fa3/fa3_bwd.cu) kernels.
#pragma once
#include <cmath>

#include "mma.cuh"
#include "params.hpp"

namespace flashlab::gpu {

// The probability and its gradient for one score, in place (s -> P, dp -> dS / scale), with the softcap
// if on:
//   P = exp2(s' log2e - LSE2),  dS = P (dP - D) ds'/ds,  s' = s scale or cap tanh(s scale / cap).
// ds'/ds's factor `scale` is left out, as FA2 leaves it: dK and dQ, sums of dS times K or Q, take it
// once at the end instead of every score.
// With kExtras, ALiBi's bias (bias2 = slope |i + sk - sq - j| log2e) comes off s' before the exp, and
// dropout's scale z = keep / (1 - p) enters twice: dS = P (z dP - D), and s -> z P, the P~ of dV += P~^T dO.
// The probability alone, without softcap: P = exp2(s scale log2e - LSE2) (prob_grad's first half, for a
// kernel that computes P before dP is in; dS is then P (dP - D)).
__device__ __forceinline__ float probability(float s, float lse2, const BackwardParams& p) {
  return mma::exp2_fast(fmaf(s, p.scale * mma::kLog2e, -lse2));
}

template <bool kSoftcap, bool kExtras = false>
__device__ __forceinline__ void prob_grad(float& s, float& dp, float lse2, float dsum, const BackwardParams& p,
                                          float bias2 = 0.f, float z = 1.f) {
  if constexpr (kExtras) dp *= z;
  if constexpr (kSoftcap) {
    const float t = tanhf(s * (p.scale / p.softcap));
    s = mma::exp2_fast(p.softcap * mma::kLog2e * t - (kExtras ? bias2 + lse2 : lse2));
    dp = s * (dp - dsum) * (1.f - t * t);
  } else {
    s = probability(s, kExtras ? bias2 + lse2 : lse2, p);
    dp = s * (dp - dsum);
  }
  if constexpr (kExtras) s *= z;
}

}  // namespace flashlab::gpu
