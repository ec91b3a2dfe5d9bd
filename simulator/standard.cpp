// The unfused paths: the FlashAttention paper's standard attention and PyTorch SDPA's math backend.
#include <algorithm>

#include "model.hpp"

namespace flashlab::sim {
namespace {

// A sequence of library kernels: GEMMs at the tensor (or FP32) rate or their bytes' time, elementwise
// kernels at the copy bandwidth, one launch each (batched over heads and batch entries).
struct Sequence {
  const GpuSpec& g;
  Cost c;
  double gemm_s = 0, elementwise_bytes = 0;
  void gemm(double flops, double read, double write, double rate) {
    c.flops += flops;
    c.hbm_read_bytes += read;
    c.hbm_write_bytes += write;
    gemm_s += std::max(flops / rate, (read + write) / g.hbm_effective());
    c.launches += 1;
  }
  void elementwise(double read, double write, double ops) {
    c.hbm_read_bytes += read;
    c.hbm_write_bytes += write;
    c.other_flops += ops;
    elementwise_bytes += read + write;
    c.launches += 1;
  }
  Cost finish(double tensor_rate) {
    c.l2_bytes = c.hbm_read_bytes + c.hbm_write_bytes;  // streaming: every byte passes L2 once
    c.t_tensor = c.flops / tensor_rate;
    c.t_exp = c.exp_ops / g.exp_per_s;
    c.t_fp32 = c.other_flops / g.fp32_ops_per_s();
    c.t_hbm = (c.hbm_read_bytes + c.hbm_write_bytes) / g.hbm_effective();
    c.t_l2 = c.l2_bytes / g.l2_bandwidth;
    c.t_launch = c.launches * g.kernel_launch_s;
    c.time_s = gemm_s + std::max(elementwise_bytes / g.hbm_copy_effective(), c.t_exp + c.t_fp32) + c.t_launch;
    return c;
  }
};

}  // namespace

// PyTorch's unfused attention as the FlashAttention paper's baseline: cuBLAS GEMMs write S, elementwise
// kernels read and write the sq x sk matrices, another GEMM reads P.
Cost standard_pass(const Problem& p, const GpuSpec& g, bool backward, bool scale_pass) {
  Sequence q{g, {}};
  const double e = bytes_per_element(p.dtype);
  const double tensor_rate = g.tensor_peak(p.dtype) * std::max(g.mma_sync_fraction, g.wgmma_fraction);
  const bool masked = p.has_mask() || p.alibi || p.softcap > 0;
  double S = 0, Q = 0, K = 0, V = 0, O = 0, n = 0, nd = 0, ndv = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const double h = p.heads_q, sq = p.len_q(b), sk = p.len_k(b);
    S += h * sq * sk * e, Q += h * sq * p.head_dim * e, K += h * sk * p.head_dim * e;
    V += h * sk * p.dv() * e, O += h * sq * p.dv() * e, n += h * sq * sk;
  }
  nd = n * double(p.head_dim), ndv = n * double(p.dv());
  if (!backward) {
    q.gemm(2 * nd, Q + K, S, tensor_rate);                     // S = Q K^T
    if (scale_pass) q.elementwise(S, S, n);                    // S = S * scale
    if (masked) q.elementwise(S, S, n);                        // mask / bias / cap
    q.elementwise(S, S, 4 * n);                                // P = softmax(S)
    q.c.exp_ops += n;
    if (p.dropout_p > 0) q.elementwise(S, S + n, 2 * n);       // P o Z, and the mask saved for backward
    q.gemm(2 * ndv, S + V, O, tensor_rate);                    // O = P V
  } else {
    q.gemm(2 * ndv, S + O, V, tensor_rate);                    // dV = P^T dO
    q.gemm(2 * ndv, O + V, S, tensor_rate);                    // dP = dO V^T
    if (p.dropout_p > 0) q.elementwise(S + n, S, n);           // dP o Z
    q.elementwise(2 * S, S, 3 * n);                            // dS = P o (dP - rowsum(P o dP))
    if (scale_pass) q.elementwise(S, S, n);                    // dS * scale
    q.gemm(2 * nd, S + K, Q, tensor_rate);                     // dQ = dS K
    q.gemm(2 * nd, S + Q, K, tensor_rate);                     // dK = dS^T Q
  }
  return q.finish(tensor_rate);
}

// PyTorch 2.11's SDPA math backend on a 16-bit input (the kernels ncu lists for it in
// simulator/validation/sdpa-*.csv): Q, K, V are copied to fp32 and Q, K scaled by sqrt(scale); S = Q K^T
// is an fp32 GEMM on the FP32 pipe (cuBLAS sm80_xmma_gemm_f32f32, no tensor cores without TF32);
// softmax in fp32; a check for fully masked rows (an isnan/-inf test writing a bool per element, a
// reduction over it, a where() that zeroes such rows); P converted to the input dtype and back; the fp32
// P V GEMM; O converted. A causal mask, or a mask function (given to SDPA as a dense bool attn_mask), adds
// the bool mask and a masked_fill of S.
Cost math_pass(const Problem& p, const GpuSpec& g, bool backward) {
  if (backward) return standard_pass(p, g, true, false);  // not modelled separately: the textbook backward
  Sequence q{g, {}};
  const double e = bytes_per_element(p.dtype), f = 4;  // storage and fp32 bytes
  const double fp32_rate = g.fp32_flops;
  double n = 0, Qn = 0, Kn = 0, Vn = 0, On = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const double h = p.heads_q, sq = p.len_q(b), sk = p.len_k(b);
    n += h * sq * sk, Qn += h * sq * p.head_dim, Kn += double(p.heads_kv) * sk * p.head_dim;
    Vn += double(p.heads_kv) * sk * p.dv(), On += h * sq * p.dv();
  }
  const double nd = n * double(p.head_dim), ndv = n * double(p.dv());
  q.elementwise(Qn * e, Qn * f, 0);                      // Q to fp32
  q.elementwise(Kn * e, Kn * f, 0);                      // K to fp32
  q.elementwise(Vn * e, Vn * f, 0);                      // V to fp32
  q.elementwise(Qn * f, Qn * f, Qn);                     // Q * sqrt(scale)
  q.elementwise(Kn * f, Kn * f, Kn);                     // K * sqrt(scale)
  const bool bool_mask = p.causal || p.mask.kind != MaskKind::none;  // a mask function: SDPA's dense attn_mask
  if (bool_mask) {
    q.elementwise(0, n, 0);                              // the bool mask, filled
    q.elementwise(n, n, n);                              // triu (or the user's mask built)
  }
  q.gemm(2 * nd, (Qn + Kn) * f, n * f, fp32_rate);       // S = Q K^T, fp32
  if (bool_mask) q.elementwise(n * (f + 1), n * f, n);   // masked_fill(S, -inf)
  q.elementwise(n * f, n * f, 4 * n);                    // P = softmax(S)
  q.c.exp_ops += n;
  q.elementwise(n * f, n, n);                            // is the row fully masked? (bool per element)
  q.elementwise(n, 0, n);                                // any(), a reduction
  q.elementwise(n * (f + 1), n * f, n);                  // where(fully masked, 0, P)
  q.elementwise(n * f, n * e, n);                        // P to the input dtype (and the GEMM reads it widened)
  q.gemm(2 * ndv, n * f + Vn * f, On * f, fp32_rate);    // O = P V, fp32
  q.elementwise(On * f, On * e, On);                     // O to the input dtype
  return q.finish(fp32_rate);
}

}  // namespace flashlab::sim
