#include "model.hpp"

#include <algorithm>
#include <cmath>

#include "cache_model.hpp"
#include "flashlab/error.hpp"
#include "schedule.hpp"

namespace flashlab::sim {

std::string to_string(Algo algo) {
  switch (algo) {
    case Algo::standard: return "standard";
    case Algo::fa1: return "fa1";
    case Algo::fa2: return "fa2";
    case Algo::fa3: return "fa3";
  }
  return "?";
}

std::vector<Algo> parse_algos(const std::string& name) {
  if (name == "all") return {Algo::standard, Algo::fa1, Algo::fa2, Algo::fa3};
  if (name == "standard") return {Algo::standard};
  if (name == "fa1") return {Algo::fa1};
  if (name == "fa2") return {Algo::fa2};
  if (name == "fa3") return {Algo::fa3};
  throw Error("unknown algorithm '" + name + "': expected standard, fa1, fa2, fa3 or all");
}

namespace {

using tiled::ByteCounts;
using tiled::Order;
using tiled::Schedule;
using tiled::TensorId;
using tiled::Tiling;

// Everything one kernel (or one pass of the standard path) costs.
struct PassCost {
  double flops = 0, exp_ops = 0, other = 0;
  double read = 0, write = 0, l2 = 0;
  double t_tensor = 0, t_exp = 0, t_fp32 = 0, t_hbm = 0, t_l2 = 0, t_launch = 0, time = 0;
  double sram = 0, ctas = 0, ctas_per_sm = 0, waves = 0, occupancy = 0;
  int64_t Br = 0, Bc = 0;
};

// The fused kernels' shapes, as the public implementations choose them.
struct Shape {
  Tiling tiling;
  double threads;
  double path;             // fraction of the tensor peak this instruction path reaches
  bool one_cta_per_head;   // FA1: one CTA walks the whole head
  double smem;             // bytes of shared memory per CTA
};

Shape fused_shape(const Problem& p, const GpuSpec& g, Algo algo, bool backward, const Options& o) {
  const int64_t d = std::max(p.head_dim, p.dv()), e = bytes_per_element(p.dtype);
  Shape s{};
  switch (algo) {
    case Algo::fa1: {
      // Algorithm 1: Bc = ceil(M / 4d), Br = min(Bc, d), M the on-chip SRAM of one SM in elements.
      s.tiling = Tiling::from_sram(static_cast<int64_t>(g.sram_per_sm_bytes) / e, d);
      s.threads = 128;
      s.path = g.mma_sync_fraction;
      s.one_cta_per_head = true;
      break;
    }
    case Algo::fa2:
      // FlashAttention-2's kernel traits: forward 128 x 128 (d <= 64) or 128 x 64, 4 warps (8 for d > 128);
      // backward 64 x 128 (d <= 128) or 64 x 64, 8 warps.
      s.tiling = backward ? Tiling{64, d <= 128 ? 128 : 64} : Tiling{128, d <= 64 ? 128 : 64};
      s.threads = backward || d > 128 ? 256 : 128;
      s.path = g.mma_sync_fraction;
      break;
    case Algo::fa3:
      // FlashAttention-3 (Hopper): 128 x 128 forward tiles (128 x 64 for d > 128), 64 x 128 backward,
      // a producer warpgroup and two consumer warpgroups.
      s.tiling = backward ? Tiling{64, d <= 128 ? 128 : 64} : Tiling{128, d <= 128 ? 128 : 64};
      s.threads = 384;
      s.path = g.wgmma_fraction > 0 ? g.wgmma_fraction : g.mma_sync_fraction;
      break;
    case Algo::standard: break;
  }
  if (!backward && o.block_m > 0) s.tiling.Br = o.block_m;
  if (!backward && o.block_n > 0) s.tiling.Bc = o.block_n;
  const double Br = static_cast<double>(s.tiling.Br), Bc = static_cast<double>(s.tiling.Bc);
  const double stages = algo == Algo::fa3 ? 2 : 1;  // FA3 double-buffers K and V through TMA
  s.smem = backward ? (Br * (p.head_dim + p.dv()) + Bc * (p.head_dim + p.dv())) * e + Br * p.head_dim * 4
                    : (Br * p.head_dim + stages * Bc * (p.head_dim + p.dv())) * e;
  if (algo != Algo::fa1 && s.smem > g.smem_per_block_bytes)
    throw Error(to_string(algo) + (backward ? " backward" : " forward") + ": tiles " + s.tiling.describe() +
                " need " + std::to_string(static_cast<int64_t>(s.smem)) + " bytes of shared memory, more than " +
                g.name + "'s " + std::to_string(static_cast<int64_t>(g.smem_per_block_bytes)) +
                " per block; choose smaller --block-m/--block-n");
  return s;
}

double unique_bytes(const Problem& p, TensorId t, int64_t sq, int64_t sk, bool store) {
  const double e = bytes_per_element(p.dtype);
  switch (t) {
    case TensorId::Q: return sq * p.head_dim * e;
    case TensorId::K: return sk * p.head_dim * e;
    case TensorId::V: return sk * p.dv() * e;
    case TensorId::O: case TensorId::dO: return sq * p.dv() * e;
    case TensorId::dQ: return sq * p.head_dim * (store ? 4 + e : 4);  // fp32 accumulator (+ the final dQ)
    case TensorId::dK: return sk * p.head_dim * e;
    case TensorId::dV: return sk * p.dv() * e;
    default: return sq * 4.0;  // l, m, LSE, D
  }
}

// Roofline with the algorithm's overlap rule; fills the times and returns the bound.
void finish_times(PassCost& c, const GpuSpec& g, Algo algo, double tensor_rate) {
  c.t_tensor = c.flops / tensor_rate;
  c.t_exp = c.exp_ops / g.exp_per_s;
  c.t_fp32 = c.other / g.fp32_flops;
  c.t_hbm = (c.read + c.write) / g.hbm_effective();
  c.t_l2 = c.l2 / g.l2_bandwidth;
  // The last wave runs part-empty: compute stretches by ceil(W) / W.
  const double W = c.ctas / std::max(1.0, c.ctas_per_sm * g.sm_count);
  const double tail = W > 0 ? std::ceil(W) / W : 1.0;
  const double compute = algo == Algo::fa3 ? std::max(c.t_tensor, c.t_exp + c.t_fp32)
                                           : c.t_tensor + c.t_exp + c.t_fp32;
  c.time = std::max({compute * tail, c.t_hbm, c.t_l2}) + c.t_launch;
}

PassCost fused_pass(const Problem& p, const GpuSpec& g, Algo algo, bool backward, const Options& o) {
  const Shape shape = fused_shape(p, g, algo, backward, o);
  const Order order = algo == Algo::fa1 ? (backward ? Order::fa1_backward : Order::fa1)
                                        : (backward ? Order::backward : Order::fa2);
  const int64_t d = p.head_dim, dv = p.dv();
  PassCost c;
  c.Br = shape.tiling.Br;
  c.Bc = shape.tiling.Bc;
  c.sram = shape.smem;
  c.ctas_per_sm = std::max(1.0, std::floor(std::min({g.max_blocks_per_sm, g.smem_per_sm_bytes / shape.smem,
                                                     g.max_threads_per_sm / shape.threads,
                                                     g.registers_per_sm / (shape.threads * 255.0)})));
  const double resident = c.ctas_per_sm * g.sm_count;
  c.occupancy = c.ctas_per_sm * shape.threads / g.max_threads_per_sm;

  // Walk one schedule per distinct batch entry (one for a fixed-length batch).
  double reuse_extra = 0, waves = 0;
  const int64_t distinct = p.varlen() ? p.batch : 1;
  const double weight = p.varlen() ? 1.0 : static_cast<double>(p.batch);
  for (int64_t b = 0; b < distinct; ++b) {
    const Schedule sch(p, b, shape.tiling, order);
    const ByteCounts bytes = sch.closed_form();
    const double elements = static_cast<double>(sch.computed_elements());
    const double heads = weight * p.heads_q;
    const int64_t sq = sch.seqlen_q(), sk = sch.seqlen_k();
    // FLOPs at tile granularity: forward S = QK^T and PV; backward recomputes S and adds dP, dV, dQ, dK.
    c.flops += heads * elements * 2.0 * (backward ? 3.0 * d + 2.0 * dv : d + dv);
    c.exp_ops += heads * elements;
    c.other += heads * elements * (backward ? 4.0 : 5.0);
    c.l2 += heads * static_cast<double>(bytes.total_load() + bytes.total_store());

    // Compulsory HBM traffic: each tensor once; K and V once per kv head (GQA shares them).
    double first_read = 0, first_write = 0, reread = 0, rewrite = 0;
    for (int t = 0; t < tiled::kTensorCount; ++t) {
      const auto id = static_cast<TensorId>(t);
      const double share = (id == TensorId::K || id == TensorId::V) ? 1.0 / p.group() : 1.0;
      const double l = static_cast<double>(bytes.load[t]), s = static_cast<double>(bytes.store[t]);
      const double lu = std::min(l, unique_bytes(p, id, sq, sk, false)), su = std::min(s, unique_bytes(p, id, sq, sk, true));
      first_read += lu * share;
      first_write += su;
      reread += l - lu;
      rewrite += s - su;
    }
    c.read += heads * first_read;
    c.write += heads * first_write;

    ReuseWorkload w;
    w.heads = heads;
    w.resident_ctas = resident;
    w.reuse_bytes = reread + rewrite;
    if (shape.one_cta_per_head) {  // FA1: Q and O (forward), Q, O, dO, dQ (backward), with l and m
      w.ctas_per_head = 1;
      w.within_cta = true;
      w.key_bytes = sq * (backward ? 2 * d + 2 * dv : d + dv) * double(bytes_per_element(p.dtype)) + 8.0 * sq;
    } else if (!backward) {
      w.ctas_per_head = static_cast<double>(sch.Tr());
      w.key_bytes = sk * (d + dv) * double(bytes_per_element(p.dtype));
      w.heads_per_key = static_cast<double>(p.group());
    } else {
      w.ctas_per_head = static_cast<double>(sch.Tc());
      w.key_bytes = sq * ((d + dv) * double(bytes_per_element(p.dtype)) + 8.0 + 4.0 * d);
    }
    const ReuseResult rr = replay_l2(w, g.l2_bytes);
    const double store_share = w.reuse_bytes > 0 ? rewrite / w.reuse_bytes : 0;
    c.read += rr.extra_hbm_bytes * (1 - store_share);
    c.write += rr.extra_hbm_bytes * store_share;
    reuse_extra += rr.extra_hbm_bytes;
    waves += rr.waves;
    c.ctas += w.heads * w.ctas_per_head;
  }
  c.waves = waves;
  c.t_launch = g.kernel_launch_s * (backward ? 3 : 1);  // backward: preprocess (D), main, dQ conversion
  finish_times(c, g, algo, g.tensor_peak(p.dtype) * shape.path);
  return c;
}

// PyTorch's unfused attention: cuBLAS GEMMs write S, elementwise kernels read and
// write the sq x sk matrices, another GEMM reads P. One launch of each kernel
// covers all heads (batched GEMMs).
PassCost standard_pass(const Problem& p, const GpuSpec& g, bool backward, const Options& o) {
  PassCost c;
  const double e = bytes_per_element(p.dtype);
  const double tensor_rate = g.tensor_peak(p.dtype) * std::max(g.mma_sync_fraction, g.wgmma_fraction);
  double gemm_time = 0, elementwise_bytes = 0, launches = 0;
  auto gemm = [&](double flops, double read, double write) {
    c.flops += flops;
    c.read += read;
    c.write += write;
    gemm_time += std::max(flops / tensor_rate, (read + write) / g.hbm_effective());
    launches += 1;
  };
  auto elementwise = [&](double read, double write, double ops) {
    c.read += read;
    c.write += write;
    c.other += ops;
    elementwise_bytes += read + write;
    launches += 1;
  };
  const bool masked = p.has_mask() || p.alibi || p.softcap > 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const double h = p.heads_q, sq = p.len_q(b), sk = p.len_k(b), d = p.head_dim, dv = p.dv();
    const double S = h * sq * sk * e, Q = h * sq * d * e, K = h * sk * d * e, V = h * sk * dv * e, O = h * sq * dv * e;
    const double n = h * sq * sk;
    if (!backward) {
      gemm(2 * n * d, Q + K, S);                                   // S = Q K^T
      if (o.standard_scale_pass) elementwise(S, S, n);             // S = S * scale
      if (masked) elementwise(S, S, n);                            // mask / bias / cap
      elementwise(S, S, 4 * n);                                    // P = softmax(S)
      c.exp_ops += n;
      if (p.dropout_p > 0) elementwise(S, S + n, 2 * n);           // P o Z, and the mask saved for backward
      gemm(2 * n * dv, S + V, O);                                  // O = P V
    } else {
      gemm(2 * n * dv, S + O, V);                                  // dV = P^T dO
      gemm(2 * n * dv, O + V, S);                                  // dP = dO V^T
      if (p.dropout_p > 0) elementwise(S + n, S, n);               // dP o Z
      elementwise(2 * S, S, 3 * n);                                // dS = P o (dP - rowsum(P o dP))
      if (o.standard_scale_pass) elementwise(S, S, n);             // dS * scale
      gemm(2 * n * d, S + K, Q);                                   // dQ = dS K
      gemm(2 * n * d, S + Q, K);                                   // dK = dS^T Q
    }
  }
  if (p.batch > 1) launches /= static_cast<double>(p.batch);       // batched: one launch per kernel
  c.l2 = c.read + c.write;                                         // streaming: every byte passes L2 once
  c.t_tensor = c.flops / tensor_rate;
  c.t_exp = c.exp_ops / g.exp_per_s;
  c.t_fp32 = c.other / g.fp32_flops;
  c.t_hbm = (c.read + c.write) / g.hbm_effective();
  c.t_l2 = c.l2 / g.l2_bandwidth;
  c.t_launch = launches * g.kernel_launch_s;
  c.time = gemm_time + std::max(elementwise_bytes / g.hbm_effective(), (c.t_exp + c.t_fp32)) + c.t_launch;
  c.ctas = c.ctas_per_sm = c.waves = c.occupancy = 0;
  return c;
}

double peak_hbm(const Problem& p, Algo algo, Pass pass) {
  const double e = bytes_per_element(p.dtype);
  const double q = p.total_q() * p.heads_q * p.head_dim * e, k = p.total_k() * p.heads_kv * p.head_dim * e;
  const double v = p.total_k() * p.heads_kv * p.dv() * e, o = p.total_q() * p.heads_q * p.dv() * e;
  const double lse = p.total_q() * p.heads_q * 4.0;
  double peak = q + k + v + o + lse;
  if (has_bwd(pass)) peak += o /* dO */ + q + k + v /* dQ dK dV */ + lse /* D */ + q / e * 4 /* dQ accum */;
  if (algo == Algo::standard) {
    double s = 0;
    for (int64_t b = 0; b < p.batch; ++b) s += double(p.heads_q) * p.len_q(b) * p.len_k(b) * e;
    peak += (has_bwd(pass) ? 3 : 2) * s + (p.dropout_p > 0 ? s / e : 0);  // S, P (dP, dS), dropout mask
  }
  return peak;
}

}  // namespace

Estimate estimate(const Problem& p, const GpuSpec& g, Algo algo, Pass pass, const Options& o) {
  p.validate();
  PassCost total;
  auto add = [&](const PassCost& c) {
    total.flops += c.flops;
    total.exp_ops += c.exp_ops;
    total.other += c.other;
    total.read += c.read;
    total.write += c.write;
    total.l2 += c.l2;
    total.t_tensor += c.t_tensor;
    total.t_exp += c.t_exp;
    total.t_fp32 += c.t_fp32;
    total.t_hbm += c.t_hbm;
    total.t_l2 += c.t_l2;
    total.t_launch += c.t_launch;
    total.time += c.time;
    total.sram = std::max(total.sram, c.sram);
    total.ctas += c.ctas;
    total.waves += c.waves;
    total.ctas_per_sm = std::max(total.ctas_per_sm, c.ctas_per_sm);
    total.occupancy = std::max(total.occupancy, c.occupancy);
    if (total.Br == 0) {
      total.Br = c.Br;
      total.Bc = c.Bc;
    }
  };
  for (bool backward : {false, true}) {
    if (backward ? !has_bwd(pass) : !has_fwd(pass)) continue;
    add(algo == Algo::standard ? standard_pass(p, g, backward, o) : fused_pass(p, g, algo, backward, o));
  }
  Estimate e;
  e.algo = to_string(algo);
  e.gpu = g.name;
  e.pass = to_string(pass);
  e.seqlen_q = p.seqlen_q;
  e.seqlen_k = p.seqlen_k;
  e.head_dim = p.head_dim;
  e.block_m = total.Br;
  e.block_n = total.Bc;
  e.flops = total.flops;
  e.exp_ops = total.exp_ops;
  e.other_flops = total.other;
  e.hbm_read_bytes = total.read;
  e.hbm_write_bytes = total.write;
  e.l2_bytes = total.l2;
  e.sram_bytes = total.sram;
  e.ctas = total.ctas;
  e.ctas_per_sm = total.ctas_per_sm;
  e.waves = total.waves;
  e.occupancy = total.occupancy;
  e.peak_hbm_bytes = peak_hbm(p, algo, pass);
  e.t_tensor = total.t_tensor;
  e.t_exp = total.t_exp;
  e.t_fp32 = total.t_fp32;
  e.t_hbm = total.t_hbm;
  e.t_l2 = total.t_l2;
  e.t_launch = total.t_launch;
  e.time_s = total.time;
  const std::pair<double, const char*> ceilings[] = {{e.t_tensor, "tensor"}, {e.t_exp, "exp"}, {e.t_fp32, "fp32"},
                                                      {e.t_hbm, "hbm"}, {e.t_l2, "l2"}, {e.t_launch, "launch"}};
  e.bound = std::max_element(std::begin(ceilings), std::end(ceilings))->second;
  if (e.peak_hbm_bytes > g.hbm_bytes) e.bound = "out of memory";
  return e;
}

std::vector<Estimate> estimate_all(const Problem& p, const GpuSpec& g, const std::vector<Algo>& algos, Pass pass,
                                   const Options& o) {
  std::vector<Estimate> out;
  for (Algo a : algos) out.push_back(estimate(p, g, a, pass, o));
  // The baseline every speedup is against: reuse it when it was asked for, else estimate it once.
  const auto it = std::find_if(out.begin(), out.end(), [](const Estimate& e) { return e.algo == "standard"; });
  const double standard = it != out.end() ? it->time_s : estimate(p, g, Algo::standard, pass, o).time_s;
  for (Estimate& e : out) e.speedup_vs_standard = standard / e.time_s;
  return out;
}

}  // namespace flashlab::sim
