#include "kernels.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "flashlab/enum_names.hpp"
#include "flashlab/error.hpp"
#include "shapes.hpp"

namespace flashlab::sim {
namespace {

// A closed loop of n instruction streams alternating between two pipes with busy times a and b per
// element (service times taken as exponential): time per element
//   sum_{k=0..n} a^k b^(n-k) / sum_{k=0..n-1} a^k b^(n-1-k);
// n = 1 gives a + b (each waits for the other), n -> infinity gives max(a, b).
double overlap(double a, double b, int n) {
  if (a <= 0 || b <= 0) return a + b;
  double num = 0, den = 0;
  for (int k = 0; k <= n; ++k) num += std::pow(a, k) * std::pow(b, n - k);
  for (int k = 0; k < n; ++k) den += std::pow(a, k) * std::pow(b, n - 1 - k);
  return num / den;
}

// mma.sync kernels load the fragments of k-step k+1 (ldmatrix) while the MMAs of step k run: two
// steps in flight between the shared-memory port and the tensor core.
constexpr int kGemmStepsInFlight = 2;
// FP32 lane instructions per element of S that are not exponentials:
//   forward: scale-and-subtract-max (FFMA), running max (FMNMX), row sum (FADD), half a bf16/fp16
//            pack (F2FP packs two) = 3.5, plus the O rescale (dv per row per K/V block, below);
//   backward: P = exp(S - LSE) scale (FFMA), dS = P o (dP - D) (FADD, FMUL), two half packs = 4;
//   a tile on the mask's edge adds the index compare and select, 3.
//   the deterministic dQ kernel: the scale, the two of dS, one half pack (dS alone: P feeds no GEMM) = 3.5;
constexpr double kSoftmaxOps = 3.5, kBackwardOps = 4.0, kDqKernelOps = 3.5, kMaskOps = 3.0;
// FA1 rescales O_i by l_i e^(m_i - m_new) / l_new and adds e^(m~ - m_new) P V at every K/V block
// (Algorithm 1 line 12): FMUL, FFMA, FMUL by the reciprocal, and the conversion of the O it read: 4.
constexpr double kFa1RescaleOps = 4.0;
// FA1's kernel walks a Q block 16 rows at a time, and its warps, which split the K/V block, exchange
// through shared memory three times a step: the row maxima, the row sums, and the partial O they add up
// (flash-attn 1.0.x fmha_fprop_kernel_1xN.h: kRows = 16 per step, Smem_tile_o's reduction). A CTA alone
// on its SM waits out each exchange (gpu_spec barrier_round_trip_s).
constexpr double kFa1StepRows = 16, kFa1Exchanges = 3;
// FA2's backward hands data between its warps through shared memory three times per (Q block, K/V block)
// tile, each behind a __syncthreads (flash-attn 2 flash_bwd_kernel.h, compute_dq_dk_dv_1colblock's m_block
// loop): the Q_i, dO_i tiles its cp.async loads wrote, P and dS written for the transposed GEMMs (dV, dK,
// dQ), and sdO's reuse before the next dO_i load. flashlab's gpu/fa2_bwd.cu has two (the step's tiles;
// P^T and dS^T): it double-buffers dO_i as well.
constexpr double kFa2BackwardExchanges = 3, kFlashlabBackwardExchanges = 2;
// flashlab's fa3 backward (gpu/fa3/bwd_consumer.cuh) hands data between its two consumer warpgroups twice a
// step, each behind a named barrier: kDsFull (both halves of dS^T in shared memory before either dQ GEMM
// reads all 128 keys of it) and kDqEmpty (the dQ writer's bulk reduction has read the step's dQ buffer
// before the consumers overwrite it). Its CTA is alone on its SM (198 KB of shared memory) and waits them out.
constexpr double kFlashlabFa3BackwardExchanges = 2;
// A CTA alone on its SM (FA1's forward: 4 warps, one per scheduler; the backward's 8 warps of 255 registers)
// has no other CTA's warps to issue while its own wait, and its warps meet at a barrier every step, so they
// cross the step's phases together: every phase boundary's dependent result is waited out in full, at the
// latencies microbench.cu measures (gpu_spec `latency_s`). A phase boundary is
//   a GEMM      its first fragments' ldmatrix before the first mma.sync, its last mma.sync before the
//               result is read;
//   a row reduction across the four threads that share a row (quad): two shfl.bfly, each followed by the
//               FP32 op that combines (the thread-local chains interleave a thread's rows and are counted
//               as FP32 issue in the softmax's rate);
//   the exp     ex2's latency before P is packed for the next GEMM.
// With two or more CTAs per SM the other CTA's warps, in another phase, issue meanwhile: nothing is charged.
struct Phases {
  double gemms = 0, quad_reductions = 0, exps = 0;
};
double exposed_latency_s(const GpuSpec& g, const Phases& p) {
  const GpuSpec::Latencies& l = g.latency;
  return p.gemms * (l.ldmatrix + l.mma_sync) + p.quad_reductions * 2 * (l.shfl + l.fp32) + p.exps * l.ex2;
}
// Per step of each kernel: FA1's forward (16 rows x Bc): S, P V; the row max and the row sum; one exp.
// FA2's forward (a tile): S, P V; the row max (FA2 keeps its row sums inside the thread until the end);
// one exp. The backward (a tile): five GEMMs, one exp (P from the stored LSE, no reduction); FA1's adds the
// row sum D_i = rowsum(dO_i o O_i) it computes on chip at every step.
constexpr Phases kFa1ForwardStep{2, 2, 1}, kFa2ForwardTile{2, 1, 1}, kFa2BackwardTile{5, 0, 1},
    kFa1BackwardTile{5, 1, 1}, kDkdvTile{4, 0, 1}, kDqTile{3, 0, 1};

// FA3's forward and cuDNN's double-buffer K and V through TMA.
constexpr double kFa3Stages = 2;
// The FA3 warpgroups: a producer and two consumers.
constexpr double kFa3Threads = 384;

// Shared-memory bytes a warp grid reads for one GEMM C[M x N] += A[M x K] B[K x N] with Wm x Wn warps
// each computing an (M / Wm) x (N / Wn) block: every warp reads its rows of A and its columns of B; an A
// already in registers (a previous GEMM's result, as dS for the dq kernel's dQ = dS K) is not read.
double gemm_operand_bytes(double M, double N, double K, double Wm, double Wn, double e, bool a_in_registers = false) {
  return e * K * ((a_in_registers ? 0.0 : M * Wn) + N * Wm);
}

// A backward kernel's GEMMs for a Br x Bc tile: C[M x N] += A[M x K] B[K x N] on Wm x Wn warps.
struct Gemm {
  double M, N, K, Wm, Wn;
  bool a_in_registers = false;
};
std::vector<Gemm> backward_gemms(BackwardKernel part, double Br, double Bc, double d, double dv) {
  switch (part) {
    case BackwardKernel::all:  // FA2's 8 warps: 2 x 4 for S, dP and dQ, 4 x 2 for dV and dK
      return {{Br, Bc, d, 2, 4}, {Br, Bc, dv, 2, 4}, {Bc, dv, Br, 4, 2}, {Bc, d, Br, 4, 2}, {Br, d, Bc, 2, 4}};
    case BackwardKernel::dkdv:  // the same kernel without dQ's GEMM
      return {{Br, Bc, d, 2, 4}, {Br, Bc, dv, 2, 4}, {Bc, dv, Br, 4, 2}, {Bc, d, Br, 4, 2}};
    case BackwardKernel::dq:  // 4 warps of 16 query rows (gpu/fa2_bwd.cu dq_kernel); dS stays in registers
      return {{Br, Bc, d, 4, 1}, {Br, Bc, dv, 4, 1}, {Br, d, Bc, 4, 1, true}};
  }
  return {};
}

}  // namespace

// The backward's from its GEMMs (backward_gemms at Br = Bc = 1: each C[M x N] += A[M x K] B[K x N] costs
// 2 M N K an element): five 2 (3 d + 2 dv), dkdv 2 (2 d + 2 dv), dq 2 (2 d + dv).
double flops_per_element(double d, double dv, bool backward, BackwardKernel part) {
  if (!backward) return 2.0 * (d + dv);
  double flops = 0;
  for (const Gemm& m : backward_gemms(part, 1, 1, d, dv)) flops += 2.0 * m.M * m.N * m.K;
  return flops;
}

static const EnumNames<Impl, 3> kImplNames{{Impl::upstream, "upstream"}, {Impl::flashlab, "flashlab"}, {Impl::cudnn, "cudnn"}};

std::string to_string(Impl impl) { return enum_name(kImplNames, impl); }
Impl parse_impl(const std::string& name) { return enum_parse(kImplNames, name, "kernel"); }

std::string fa3_unavailable(const GpuSpec& g) {
  if (g.wgmma_fraction > 0) return "";
  return "FlashAttention-3 needs Hopper's wgmma and TMA instructions, which " + g.display_name + " (" +
         g.architecture + ") does not have (its preset has no tensor_paths.wgmma rate); FA2 is the fastest "
         "FlashAttention that runs on it";
}

int64_t fa1_splits(double batch_heads, double sms, double ctas_per_sm) {
  constexpr int kMaxSplits = 30;  // flash-attn 1.0.x: min(30, ...), where the second term is always larger
  double best = 0, eff[kMaxSplits];
  for (int s = 1; s <= kMaxSplits; ++s) {
    const double waves = batch_heads * s / (sms * ctas_per_sm);
    eff[s - 1] = waves / std::ceil(waves);
    best = std::max(best, eff[s - 1]);
  }
  for (int s = 1; s <= kMaxSplits; ++s)
    if (eff[s - 1] > 0.95 * best) return s;
  return 1;
}

KernelShape kernel_shape(const Problem& p, const GpuSpec& g, Algo algo, Impl impl, bool backward, int64_t block_m,
                         int64_t block_n, bool fp8, BackwardKernel part) {
  const int64_t d = std::max(p.head_dim, p.dv()), e = bytes_per_element(p.dtype);
  KernelShape s;
  double stages = 1;
  gpu::TileShape launcher;  // the launcher's shape: flashlab's fa3 backward and FP8 forward, fa2's dq kernel
  switch (algo) {
    case Algo::fa1:
      // Algorithm 1: Bc = ceil(M / 4d), Br = min(Bc, d), M the on-chip SRAM of one SM in elements.
      // flash-attn 1.0.x runs 4 warps forward, 8 backward.
      s.tiling = tiled::Tiling::from_sram(static_cast<int64_t>(g.sram_per_sm_bytes) / e, d);
      s.threads = backward ? 256 : 128;
      break;
    case Algo::fa2:
      // FlashAttention-2's kernel traits: forward 128 x 128 (d <= 64) or 128 x 64; backward 64 x 128
      // (d <= 128) or 64 x 64, 8 warps. The forward gives a warp 32 query rows up to d = 128 and 16
      // above (where the O accumulator alone fills half its registers), so its warps follow Br.
      s.tiling = backward ? tiled::Tiling{64, d <= 128 ? 128 : 64} : tiled::Tiling{128, d <= 64 ? 128 : 64};
      if (impl == Impl::flashlab) {  // flashlab's own kernels: gpu/shapes.hpp, as their launchers pick them
        const gpu::TileShape k = part == BackwardKernel::dq ? gpu::fa2_backward_dq_shape(int(d))
                                 : backward ? gpu::fa2_backward_shape(int(d), int(g.smem_per_block_bytes))
                                            : gpu::fa2_forward_shape(int(d));
        if (k.supported()) s.tiling = tiled::Tiling{k.block_m, k.block_n};
        if (part == BackwardKernel::dq) {  // its launcher's shared memory and its 4 warps
          if (!k.supported()) throw Error(std::string("fa2's deterministic dQ kernel: ") + k.why);
          launcher = k;
        }
      }
      if (!backward && block_m > 0) s.tiling.Br = block_m;
      if (!backward && block_n > 0) s.tiling.Bc = block_n;
      // (flashlab's shapes.hpp gives the same warps: 4 for its forward tiles, 8 for its backward.)
      // (The dq kernel's warps own their query rows: nothing handed between them but the K/V stages.)
      if (backward && part != BackwardKernel::dq)
        s.exchanges_per_tile = impl == Impl::flashlab ? kFlashlabBackwardExchanges : kFa2BackwardExchanges;
      s.threads = backward ? 256 : 32.0 * std::max<int64_t>(1, s.tiling.Br / (d <= 128 ? 32 : 16));
      break;
    case Algo::fa3: {
      if (const std::string why = fa3_unavailable(g); !why.empty()) throw Error(why);
      // FlashAttention-3: 128 x 128 forward tiles (128 x 64 for d > 128), 64 x 128 backward.
      s.tiling = backward ? tiled::Tiling{64, d <= 128 ? 128 : 64} : tiled::Tiling{128, d <= 128 ? 128 : 64};
      if (impl == Impl::flashlab) {  // gpu/fa3/: gpu/shapes.hpp's fa3_forward_shape / fa3_backward_shape
        const gpu::TileShape k = backward ? gpu::fa3_backward_shape(int(d))
                                 : fp8    ? gpu::fa3_fp8_forward_shape(int(d))
                                          : gpu::fa3_forward_shape(int(d));
        if (!k.supported())
          throw Error(std::string("--algo fa3 --impl flashlab") + (backward ? " --pass bwd" : "") + ": head dim " +
                      std::to_string(d) + " is not compiled: " + k.why + "; use --impl upstream to model "
                      "FlashAttention-3's kernel instead");
        s.tiling = tiled::Tiling{k.block_m, k.block_n};
        s.tiling.q_from_end =
            !backward && gpu::fa3_forward_q_blocks_from_end(p.mask.kind != MaskKind::none, k.block_m, k.block_n);
        if (backward || fp8) {  // the launcher's shared memory and threads
          launcher = k;
        }
        if (backward) {
          s.consumers_meet_each_tile = true;
          s.exchanges_per_tile = kFlashlabFa3BackwardExchanges;
        }
      }
      if (!backward && block_m > 0) s.tiling.Br = block_m;
      if (!backward && block_n > 0) s.tiling.Bc = block_n;
      s.threads = kFa3Threads;
      s.persistent = !backward;
      stages = kFa3Stages;
      break;
    }
    case Algo::standard:
    case Algo::math: return s;
  }
  const double Br = double(s.tiling.Br), Bc = double(s.tiling.Bc);
  // flashlab's fa3 backward keeps more on chip than the generic backward below (both Q/dO stages, dS^T twice,
  // the step's fp32 dQ): its shared memory is the launcher's (gpu/shapes.hpp), as are its threads.
  if (launcher.supported()) {
    s.smem = launcher.smem_bytes;
    s.threads = launcher.threads;
  } else {
    s.smem = backward ? (Br * (p.head_dim + p.dv()) + Bc * (p.head_dim + p.dv())) * e + Br * p.head_dim * 4
                      : (Br * p.head_dim + stages * Bc * (p.head_dim + p.dv())) * e;
  }
  if (algo == Algo::fa1) s.smem = std::min(s.smem, g.smem_per_block_bytes);  // Algorithm 1 sizes tiles to fit
  if (s.smem > g.smem_per_block_bytes)
    throw Error(std::string(algo == Algo::fa2 ? "fa2" : "fa3") + (backward ? " backward" : " forward") + ": tiles " +
                s.tiling.describe() + " need " + std::to_string(static_cast<int64_t>(s.smem)) +
                " bytes of shared memory, more than " + g.name + "'s " +
                std::to_string(static_cast<int64_t>(g.smem_per_block_bytes)) + " per block; choose smaller --block-m/--block-n");
  s.ctas_per_sm = std::max(1.0, std::floor(std::min({g.max_blocks_per_sm, g.smem_per_sm_bytes / s.smem,
                                                     g.max_threads_per_sm / s.threads,
                                                     g.registers_per_sm / (s.threads * g.max_registers_per_thread)})));
  return s;
}

ElementCost element_cost(const Problem& p, const GpuSpec& g, Algo algo, bool backward, const KernelShape& shape,
                         bool fp8, BackwardKernel part) {
  ElementCost c;
  const double sms = g.sm_count, e = bytes_per_element(p.dtype);
  const double d = double(p.head_dim), dv = double(p.dv());
  const double Br = double(shape.tiling.Br), Bc = double(shape.tiling.Bc), warps = shape.threads / 32;
  const double path = algo == Algo::fa3 ? g.wgmma_fraction : g.mma_sync_fraction;
  // FP8: the e4m3 rate (QGMMA) at the fraction bf16's wgmma reaches (no FP8 microbenchmark yet).
  const double tensor_per_sm = (fp8 ? g.tensor_fp8 : g.tensor_peak(p.dtype)) * path / sms;  // FLOP/s
  const double smem_per_sm = g.smem_bandwidth / sms;                  // bytes/s
  const double fp32_per_sm = g.fp32_ops_per_s() / sms;                // lane instructions/s
  c.mask_ops = kMaskOps;
  const double mask = c.mask_ops / fp32_per_sm;
  c.exp = 1.0 / (g.exp_per_s / sms);

  if (backward) {
    // Five GEMMs per tile: S = Q K^T, dP = dO V^T (Br x Bc), dV += P^T dO, dK += dS^T Q (Bc x d), dQ = dS K
    // (Br x d); the deterministic fa2's kernels split them (backward_gemms). Each GEMM overlaps its
    // ldmatrix reads with its MMAs (two k-steps in flight), one after the other.
    // FA3 takes its operands from shared memory inside wgmma: only the tensor time.
    double tensor_phase = 0;
    for (const Gemm& m : backward_gemms(part, Br, Bc, d, dv)) {
      const double t = 2.0 * m.M * m.N * m.K / (Br * Bc) / tensor_per_sm;
      c.tensor += t;
      if (algo == Algo::fa3) {
        tensor_phase += t;
        continue;
      }
      const double s = gemm_operand_bytes(m.M, m.N, m.K, m.Wm, m.Wn, e, m.a_in_registers) / (Br * Bc) / smem_per_sm;
      c.smem += s;
      tensor_phase += overlap(t, s, kGemmStepsInFlight);
    }
    // P and dS are written to shared memory for the GEMMs that read them transposed (dV, dK, dQ).
    // flashlab's fa3 backward keeps P^T in registers (the dV GEMM's A operand) and writes dS^T (e bytes an
    // element, for the dQ GEMM) and the step's fp32 dQ (Br x d floats, d 4 / Bc bytes an element, for the
    // dQ writer's bulk reduction) from its consumers' registers, between its GEMMs.
    // The deterministic dq kernel writes neither: dS is its dQ GEMM's A operand, in registers.
    const double p_ds_writes = shape.consumers_meet_each_tile ? (e + 4.0 * d / Bc) / smem_per_sm
                               : algo == Algo::fa3 || part == BackwardKernel::dq ? 0.0
                                                                                 : 2.0 * e / smem_per_sm;
    c.smem += p_ds_writes;
    // A CTA alone on its SM (as FA2's is at d <= 128: 8 warps and 255 registers a thread) waits out, with no
    // other CTA to run meanwhile, its exchanges between warps (FA1: every 16 rows; FA2: three hand-offs
    // through shared memory a tile, each behind a __syncthreads) and its phase boundaries.
    if (shape.consumers_meet_each_tile && shape.ctas_per_sm == 1)
      c.wait = shape.exchanges_per_tile * g.barrier_round_trip_s / (Br * Bc);
    if (algo != Algo::fa3 && shape.ctas_per_sm == 1) {
      c.wait = algo == Algo::fa1 ? kFa1Exchanges * g.barrier_round_trip_s / (kFa1StepRows * Bc)
                                 : shape.exchanges_per_tile * g.barrier_round_trip_s / (Br * Bc);
      const Phases tile = algo == Algo::fa1                ? kFa1BackwardTile
                          : part == BackwardKernel::dkdv ? kDkdvTile
                          : part == BackwardKernel::dq   ? kDqTile
                                                         : kFa2BackwardTile;
      c.wait += exposed_latency_s(g, tile) / (Br * Bc);
    }
    c.fp32_ops = part == BackwardKernel::dq ? kDqKernelOps : kBackwardOps;
    c.fp32 = c.fp32_ops / fp32_per_sm;
    // FA3's two consumer warpgroups ping-pong (one's softmax under the other's GEMMs); flashlab's meet every
    // step at kDsFull, so they cross a step's phases together: one stream, as FA2's warps. (Since its v15, at
    // d <= 128, a step's dQ GEMM is one consumer's, in turns, and the other runs ahead into the next step, so
    // their softmaxes no longer coincide. Modelled as two streams, its H200 rows came out 10-26% fast; as
    // one, 0-14% fast, and v14's rows, without the turns, 7-19% fast: the model lacks something that costs
    // about 10% on both, and until that is found the turns' share stays unmodelled. simulator/README.md.)
    const int streams = algo == Algo::fa3 && !shape.consumers_meet_each_tile ? 2 : 1;
    c.full = overlap(tensor_phase + p_ds_writes + c.wait, std::max(c.exp, c.fp32), streams);
    c.partial = overlap(tensor_phase + p_ds_writes + c.wait, std::max(c.exp, c.fp32 + mask), streams);
    return c;
  }

  c.tensor = 2.0 * (d + dv) / tensor_per_sm;
  double tensor_phase = c.tensor, serial = 0, cvt = 0;
  int streams = 1;
  switch (algo) {
    case Algo::fa2:
      // mma.sync takes its operands from registers: every warp ldmatrix-reads the whole K_j and V_j
      // tile and its own rows of Q at every step.
      c.smem = (Br * d + warps * Bc * (d + dv)) * e / (Br * Bc) / smem_per_sm;
      tensor_phase = overlap(c.tensor, c.smem, kGemmStepsInFlight);
      c.fp32_ops = kSoftmaxOps + dv / Bc;
      if (shape.ctas_per_sm == 1) c.wait = exposed_latency_s(g, kFa2ForwardTile) / (Br * Bc);
      break;
    case Algo::fa1: {
      // Sliced K: each warp takes Bc / warps columns of the K/V block and all Br rows of Q_i, so every
      // warp reads Q_i and its own slice of K_j, V_j; its P V is a partial O over its slice, which the
      // warps write to shared memory in fp32 and add up after a barrier (FA2 paper, section 3.3).
      c.smem = (warps * Br * d + Bc * (d + dv)) * e / (Br * Bc) / smem_per_sm;
      tensor_phase = overlap(c.tensor, c.smem, kGemmStepsInFlight);
      const double combine = 2.0 * warps * dv * 4.0 / Bc / smem_per_sm;  // write all partials, read them back
      c.smem += combine;
      serial = combine;
      if (shape.ctas_per_sm == 1)
        c.wait = (kFa1Exchanges * g.barrier_round_trip_s + exposed_latency_s(g, kFa1ForwardStep)) / (kFa1StepRows * Bc);
      c.fp32_ops = kSoftmaxOps + kFa1RescaleOps * dv / Bc;
      break;
    }
    case Algo::fa3:
      // wgmma reads its operands from shared memory itself; two consumer warpgroups ping-pong, one's
      // softmax under the other's GEMMs (FA3 paper, section 3.1).
      c.fp32_ops = kSoftmaxOps + dv / Bc;
      streams = 2;
      // FP8: P~ goes to e4m3 before O += P~ V, one cvt.rn.satfinite.e4m3x2 a pair of elements (consumer.cuh
      // e4m3x4). Measured beside ex2 it takes its own pipe (cvt-e4m3-h100-2026-11-24.json: the mix ran in the
      // time of the exponentials alone), so it joins the softmax's units as a third, in parallel.
      if (fp8 && g.fp8_convert_pairs_per_s > 0) cvt = 0.5 / (g.fp8_convert_pairs_per_s / sms);
      break;
    default: break;
  }
  c.fp32 = c.fp32_ops / fp32_per_sm;
  serial += c.wait;
  c.full = overlap(tensor_phase, std::max({c.exp, c.fp32, cvt}), streams) + serial;
  c.partial = overlap(tensor_phase, std::max({c.exp, c.fp32 + mask, cvt}), streams) + serial;
  return c;
}

}  // namespace flashlab::sim
