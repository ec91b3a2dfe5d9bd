#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

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
  double t_tensor = 0, t_smem = 0, t_exp = 0, t_fp32 = 0, t_hbm = 0, t_l2 = 0, t_launch = 0, time = 0;
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
  // Instruction streams per scheduler that take turns on the tensor core while another runs its
  // softmax: 1 for FA1/FA2 (a warp's softmax waits for its own MMAs, and the CTA's warps meet at a
  // barrier every K/V tile, so they run in phase), 2 for FA3 (two consumer warpgroups ping-pong).
  int streams = 1;
  // FA2's mma.sync reads its operands from shared memory into registers (ldmatrix): every warp
  // reads the whole K_j and V_j tile and its own rows of Q at every step.
  bool ldmatrix_operands = false;
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
      s.threads = 256;  // the backward's 8 warps; the forward's follow Br (below)
      s.path = g.mma_sync_fraction;
      s.ldmatrix_operands = !backward;
      break;
    case Algo::fa3:
      // FlashAttention-3 (Hopper): 128 x 128 forward tiles (128 x 64 for d > 128), 64 x 128 backward,
      // a producer warpgroup and two consumer warpgroups.
      s.tiling = backward ? Tiling{64, d <= 128 ? 128 : 64} : Tiling{128, d <= 128 ? 128 : 64};
      s.threads = 384;
      s.path = g.wgmma_fraction > 0 ? g.wgmma_fraction : g.mma_sync_fraction;
      s.streams = 2;
      break;
    case Algo::standard: break;
  }
  if (!backward && o.block_m > 0) s.tiling.Br = o.block_m;
  if (!backward && o.block_n > 0) s.tiling.Bc = o.block_n;
  // FA2's forward gives a warp 32 query rows up to d = 128 and 16 above (where its O accumulator alone
  // fills half its registers), so the warps follow Br: 64 x 64 tiles at d = 256 are 4 warps, as in
  // SDPA flash's and flashlab's d = 256 kernels on the H100, not the 8 of the 128-row default.
  if (algo == Algo::fa2 && !backward) s.threads = 32.0 * std::max<int64_t>(1, s.tiling.Br / (d <= 128 ? 32 : 16));
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

// ---- time of a fused kernel -------------------------------------------------------------------------
// A fused kernel's compute time is the time its CTAs take on the SMs' CTA slots. Per element of S:
//   tensor  the matmul FLOPs at the instruction path's rate;
//   smem    FA2: the operand bytes ldmatrix reads from shared memory, a separate pipe from the MMAs;
//           FA2 prefetches one k-step ahead, so the two overlap as a closed loop with n = 2 (below);
//   softmax MUFU ex2 and the FP32 pipe, each at its own rate; they are separate pipes fed by
//           independent instructions, so the phase takes max(exp, fp32).
// One instruction stream alternates a tensor phase (a) and a softmax phase (b). With n streams per
// scheduler taking turns (a closed loop of n streams through two servers, service times exponential):
//   time per element = sum_{k=0..n} a^k b^(n-k) / sum_{k=0..n-1} a^k b^(n-1-k)
// n = 1 gives a + b (FA2: serial), n -> infinity gives max(a, b) (perfect overlap).
double overlap(double a, double b, int streams) {
  if (a <= 0 || b <= 0) return a + b;
  double num = 0, den = 0;
  for (int k = 0; k <= streams; ++k) num += std::pow(a, k) * std::pow(b, streams - k);
  for (int k = 0; k < streams; ++k) den += std::pow(a, k) * std::pow(b, streams - 1 - k);
  return num / den;
}

// FP32 instructions per element of S that are not exponentials:
//   forward: scale-and-subtract-max (FFMA), running max (FMNMX), row sum (FADD), half a pack to
//            bf16/fp16 (F2FP packs two) = 3.5, plus rescaling O (Br x dv FMULs per Br x Bc tile);
//   backward: dS = P o (dP - D) and the scale, 4 per element;
//   a partial tile on the mask's edge adds the index compare and select of kMaskOps per element.
constexpr double kSoftmaxOps = 3.5, kBackwardOps = 4.0, kMaskOps = 3.0;

// One head's CTAs in launch order: (elements, elements in partial tiles) per CTA; `heads` repeat it.
struct CtaList {
  std::vector<std::pair<double, double>> ctas;
  double heads = 0;
};

// Greedy list scheduling, as the hardware dispatches CTAs: each CTA in launch order takes the slot
// that frees first; returns the makespan. Only the last kMaxSimulated CTAs are replayed one by one:
// the work before them keeps every slot busy, so it is spread evenly over the slots (the tail, which
// is what the replay is for, comes from the last CTAs).
double makespan(const std::vector<CtaList>& lists, double slots, double full_s, double partial_s, double per_cta_s) {
  constexpr double kMaxSimulated = 1024;
  auto duration = [&](const std::pair<double, double>& cta) {
    return cta.first * full_s + cta.second * (partial_s - full_s) + per_cta_s;
  };
  double count = 0;
  for (const auto& l : lists) count += l.heads * static_cast<double>(l.ctas.size());
  const int64_t n_slots = static_cast<int64_t>(std::max(1.0, std::min(slots, count)));
  // Whole heads from the front are spread evenly until at most kMaxSimulated CTAs remain.
  double skip_work = 0, left = count;
  std::vector<int64_t> skip(lists.size(), 0);
  for (size_t k = 0; k < lists.size() && left > kMaxSimulated; ++k) {
    const double per_head = static_cast<double>(lists[k].ctas.size());
    if (per_head == 0) continue;
    const double heads = std::min(lists[k].heads, std::floor((left - kMaxSimulated) / per_head));
    double head_work = 0;
    for (const auto& cta : lists[k].ctas) head_work += duration(cta);
    skip[k] = static_cast<int64_t>(heads);
    skip_work += heads * head_work;
    left -= heads * per_head;
  }
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int64_t i = 0; i < n_slots; ++i) free_at.push(skip_work / static_cast<double>(n_slots));
  double longest = skip_work / static_cast<double>(n_slots);
  for (size_t k = 0; k < lists.size(); ++k)
    for (int64_t h = skip[k]; h < static_cast<int64_t>(lists[k].heads); ++h)
      for (const auto& cta : lists[k].ctas) {
        const double t = free_at.top() + duration(cta);
        free_at.pop();
        free_at.push(t);
        longest = std::max(longest, t);
      }
  return longest;
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
  double reuse_extra = 0, waves = 0, partial_elements = 0;
  std::vector<CtaList> lists;
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

    // The CTAs of one head in launch order: forward one per Q block (its K/V range), backward one per
    // K/V block (its Q range), FA1 one for the whole head. Partial tiles sit at the ends of each range.
    CtaList list;
    list.heads = heads;
    auto rows_of = [&](int64_t i, int64_t j) { return double(sch.q_rows(i)) * double(sch.kv_rows(j)); };
    auto add_range = [&](std::pair<double, double>& cta, int64_t fixed, int64_t b0, int64_t b1, bool over_kv) {
      auto tile = [&](int64_t x) { return over_kv ? rows_of(fixed, x) : rows_of(x, fixed); };
      auto partial = [&](int64_t x) {
        return sch.classify(over_kv ? fixed : x, over_kv ? x : fixed) == tiled::TileKind::partial;
      };
      if (b0 >= b1) return;
      const int64_t Br = shape.tiling.Br, Bc = shape.tiling.Bc;  // the range's elements, in O(1)
      cta.first += over_kv ? double(sch.q_rows(fixed)) * double(std::min(b1 * Bc, sk) - b0 * Bc)
                           : double(std::min(b1 * Br, sq) - b0 * Br) * double(sch.kv_rows(fixed));
      for (; b0 < b1 && partial(b0); ++b0) cta.second += tile(b0);      // from the front while partial
      for (; b1 > b0 && partial(b1 - 1); --b1) cta.second += tile(b1 - 1);  // from the back
    };
    if (shape.one_cta_per_head) {
      std::pair<double, double> cta{0, 0};
      for (int64_t i = 0; i < sch.Tr(); ++i) add_range(cta, i, sch.kv_begin(i), sch.kv_end(i), true);
      list.ctas.push_back(cta);
    } else if (!backward) {
      for (int64_t i = 0; i < sch.Tr(); ++i) {
        std::pair<double, double> cta{0, 0};
        add_range(cta, i, sch.kv_begin(i), sch.kv_end(i), true);
        list.ctas.push_back(cta);
      }
    } else {
      for (int64_t j = 0; j < sch.Tc(); ++j) {
        std::pair<double, double> cta{0, 0};
        add_range(cta, j, sch.q_begin(j), sch.q_end(j), false);
        list.ctas.push_back(cta);
      }
    }
    double head_partial = 0;
    for (const auto& cta : list.ctas) head_partial += cta.second;
    partial_elements += heads * head_partial;
    const double ops = backward ? kBackwardOps : kSoftmaxOps + double(dv) / double(shape.tiling.Bc);
    c.other += heads * (elements * ops + head_partial * kMaskOps);
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
    w.equal_ctas = std::all_of(list.ctas.begin(), list.ctas.end(),
                               [&](const auto& cta) { return cta.first == list.ctas.front().first; });
    w.resident_ctas = resident;
    w.reuse_bytes = reread + rewrite;
    if (shape.one_cta_per_head) {  // FA1: Q and O (forward), Q, O, dO, dQ (backward), with l and m
      w.ctas_per_head = 1;
      w.within_cta = true;
      w.key_bytes = sq * (backward ? 2 * d + 2 * dv : d + dv) * double(bytes_per_element(p.dtype)) + 8.0 * sq;
    } else if (!backward) {
      w.ctas_per_head = static_cast<double>(sch.Tr());
      w.key_bytes = sk * (d + dv) * double(bytes_per_element(p.dtype));
      w.stream_bytes = double(shape.tiling.Br) * (d + dv) * double(bytes_per_element(p.dtype));
      w.heads_per_key = static_cast<double>(p.group());
    } else {
      w.ctas_per_head = static_cast<double>(sch.Tc());
      w.key_bytes = sq * ((d + dv) * double(bytes_per_element(p.dtype)) + 8.0 + 4.0 * d);
      w.stream_bytes = 2.0 * double(shape.tiling.Bc) * (d + dv) * double(bytes_per_element(p.dtype));  // K,V,dK,dV
    }
    const ReuseResult rr = replay_l2(w, g.l2_bytes);
    const double store_share = w.reuse_bytes > 0 ? rewrite / w.reuse_bytes : 0;
    c.read += rr.extra_hbm_bytes * (1 - store_share);
    c.write += rr.extra_hbm_bytes * store_share;
    reuse_extra += rr.extra_hbm_bytes;
    waves += rr.waves;
    c.ctas += w.heads * w.ctas_per_head;
    lists.push_back(std::move(list));
  }
  c.waves = waves;
  c.t_launch = g.kernel_launch_s * (backward ? 3 : 1);  // backward: preprocess (D), main, dQ conversion

  // Per element of S on one SM (seconds), then per element on one CTA slot (ctas_per_sm share an SM).
  const double e = bytes_per_element(p.dtype), Br = double(shape.tiling.Br), Bc = double(shape.tiling.Bc);
  const double tensor_rate = g.tensor_peak(p.dtype) * shape.path;
  const double sms = g.sm_count;
  const double flops_el = 2.0 * (backward ? 3.0 * d + 2.0 * dv : double(d + dv));
  const double tensor_el = flops_el / (tensor_rate / sms);
  const double warps = shape.threads / 32;
  const double smem_el =
      shape.ldmatrix_operands ? (Br * d + warps * Bc * (d + dv)) * e / (Br * Bc) / (g.smem_bandwidth / sms) : 0.0;
  const double exp_el = 1.0 / (g.exp_per_s / sms);
  const double ops = backward ? kBackwardOps : kSoftmaxOps + double(dv) / Bc;
  const double fp32_el = ops / (g.fp32_ops_per_s() / sms), mask_el = kMaskOps / (g.fp32_ops_per_s() / sms);
  // FA2's gemm loads the fragments of k-step k+1 (ldmatrix) while the MMAs of step k run: two steps
  // in flight between the shared-memory port and the tensor core, the closed loop with n = 2.
  constexpr int kGemmStepsInFlight = 2;
  const double a = smem_el > 0 ? overlap(tensor_el, smem_el, kGemmStepsInFlight) : tensor_el;
  // A grid smaller than the resident capacity is spread over the SMs first: CTAs share an SM only
  // as far as their number requires.
  const double sharing = std::clamp(std::ceil(c.ctas / sms), 1.0, c.ctas_per_sm);
  const double full = overlap(a, std::max(exp_el, fp32_el), shape.streams) * sharing;
  const double partial = overlap(a, std::max(exp_el, fp32_el + mask_el), shape.streams) * sharing;
  // A CTA alone on its SM waits for its first loads (Q_i, K_j, V_j from DRAM) and for its last stores
  // (O_i) to drain before the next CTA can start: two DRAM round trips with nothing else to run. With
  // two or more CTAs per SM the others keep the SM busy meanwhile.
  const double per_cta = sharing == 1 ? 2 * g.dram_latency_s : 0.0;
  const double compute = makespan(lists, sharing * sms, full, partial, per_cta);

  c.t_tensor = c.flops / tensor_rate;
  c.t_smem = c.flops / flops_el * smem_el / sms;
  c.t_exp = c.exp_ops / g.exp_per_s;
  c.t_fp32 = c.other / g.fp32_ops_per_s();
  c.t_hbm = (c.read + c.write) / g.hbm_effective();
  c.t_l2 = c.l2 / g.l2_bandwidth;
  c.time = std::max({compute, c.t_hbm, c.t_l2}) + c.t_launch;
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
  c.t_fp32 = c.other / g.fp32_ops_per_s();
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
    total.t_smem += c.t_smem;
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
  e.t_smem = total.t_smem;
  e.t_exp = total.t_exp;
  e.t_fp32 = total.t_fp32;
  e.t_hbm = total.t_hbm;
  e.t_l2 = total.t_l2;
  e.t_launch = total.t_launch;
  e.time_s = total.time;
  const std::pair<double, const char*> ceilings[] = {{e.t_tensor, "tensor"}, {e.t_smem, "smem"}, {e.t_exp, "exp"}, {e.t_fp32, "fp32"},
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
