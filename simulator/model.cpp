#include "model.hpp"

#include <algorithm>
#include <cmath>

#include "flashlab/enum_names.hpp"
#include "flashlab/error.hpp"
#include "grids.hpp"
#include "block_mask.hpp"
#include "schedule.hpp"
#include "shapes.hpp"
#include "tile_order.hpp"

namespace flashlab::sim {

static const EnumNames<Algo, 5> kAlgoNames{
    {Algo::standard, "standard"}, {Algo::math, "math"}, {Algo::fa1, "fa1"}, {Algo::fa2, "fa2"}, {Algo::fa3, "fa3"}};

std::string to_string(Algo algo) { return enum_name(kAlgoNames, algo); }

std::vector<Algo> parse_algos(const std::string& name, const GpuSpec* gpu, std::string* note) {
  if (name == "all") {
    std::vector<Algo> all{Algo::standard, Algo::fa1, Algo::fa2};
    if (gpu && !fa3_unavailable(*gpu).empty()) {
      if (note) *note = "fa3 left out: " + fa3_unavailable(*gpu);
    } else {
      all.push_back(Algo::fa3);
    }
    return all;
  }
  for (const auto& [a, text] : kAlgoNames)
    if (name == text) {
      if (a == Algo::fa3 && gpu && !fa3_unavailable(*gpu).empty()) throw Error("--algo fa3: " + fa3_unavailable(*gpu));
      return {a};
    }
  throw Error("unknown algorithm '" + name + "': expected " + enum_choices(kAlgoNames) + ", or all");
}

void leave_out_unbuilt(std::vector<Algo>& algos, const std::string& name, Impl impl, bool backward, int64_t head_dim,
                       std::string* note) {
  if (name != "all" || impl != Impl::flashlab || !backward) return;
  const gpu::TileShape k = gpu::fa3_backward_shape(int(head_dim));
  if (k.supported() || std::find(algos.begin(), algos.end(), Algo::fa3) == algos.end()) return;
  algos.erase(std::remove(algos.begin(), algos.end(), Algo::fa3), algos.end());
  if (!note) return;
  if (!note->empty()) *note += "; ";
  *note += "fa3 left out: flashlab's fa3 backward: ";
  *note += k.why;
}

namespace {

using tiled::Order;
using tiled::Schedule;

// FA3's tile scheduler groups heads into sections whose K and V fit this many bytes of L2
// (hopper/tile_scheduler.hpp: a fixed 32 MiB, not read from the GPU).
constexpr double kFa3SectionBytes = 32.0 * 1024 * 1024;

// How flashlab's kernel deals its tiles (grids.hpp Deal), as the kernel does (gpu/tile_order.hpp; the
// order and the section count as gpu/launch.cpp's DeviceMask makes them): under a mask function fa2's
// forward and dK/dV (without ALiBi or dropout, which run in the grid's order) and fa3's forward, lines
// longest walk first in sections sized by the longest walk; fa3's forward under a causal mask from the last
// Q block, in sections sized by the whole sequence's K/V. Otherwise no deal. Masks run at the kernels'
// padded head dims; the section uses the preset's L2, where the kernels ask the device.
Deal flashlab_deal(const Problem& p, const GpuSpec& g, Algo algo, bool backward, const tiled::Tiling& tiling) {
  const int d = gpu::fa2_padded_head_dim(int(p.head_dim)), group = int(p.heads_q / p.heads_kv);
  const bool mask_function = p.mask.kind != MaskKind::none && !p.varlen();
  if (mask_function && !(algo == Algo::fa2 && (p.alibi || p.dropout_p > 0)) && !(algo == Algo::fa3 && backward)) {
    const std::vector<int64_t> walk = tiled::line_walks(p, tiling, !backward);
    const double variants = p.mask_varies_by_batch() ? double(p.batch) : 1.0;
    const double longest = walk.empty() ? 0.0 : double(*std::max_element(walk.begin(), walk.end())) / variants;
    const double block = backward ? gpu::dkdv_block_bytes(double(tiling.Br), d, group)
                                  : gpu::forward_block_bytes(double(tiling.Bc), d, group);
    // fa2's dK/dV deals (batch, kv head) pairs, a CTA a kv head (grids.cpp BackwardOrder::flashlab).
    const int pairs = int(p.batch * (backward ? p.heads_kv : p.heads_q));
    return {backward ? tiled::longest_first_columns(walk) : tiled::longest_first(walk),
            gpu::l2_sections(g.l2_bytes, longest * block, pairs)};
  }
  if (algo == Algo::fa3 && !backward && p.causal && !mask_function)
    return {{}, gpu::l2_sections(g.l2_bytes, gpu::forward_block_bytes(double(p.seqlen_k), d, group),
                                 int(p.batch * p.heads_q))};
  return {};
}

// The streaming kernels around FA2's backward: preprocess (D = rowsum(dO o O), dQ's fp32
// accumulator zeroed) and the conversion of that accumulator to dQ. Each moves its bytes once.
Cost streaming_kernel(const GpuSpec& g, double read, double write) {
  Cost c;
  c.hbm_read_bytes = read;
  c.hbm_write_bytes = write;
  c.launches = 1;  // its L2 bytes are already the schedule's prologue and epilogue
  c.t_hbm = (read + write) / g.hbm_copy_effective();
  c.t_l2 = (read + write) / g.l2_bandwidth;
  c.t_launch = g.kernel_launch_s;
  c.time_s = std::max(c.t_hbm, c.t_l2) + c.t_launch;
  return c;
}

// What a CTA loads before its first GEMM can start, in bytes: its own block, which no CTA has read before
// (forward: Q_i; backward, and FA1 whose outer loop walks K/V: K_j and V_j), and the first block it
// streams (forward: K_0 and V_0; backward: Q_0 and dO_0; FA1: Q_0 and O_0), which the CTAs of its head
// beside it in launch order read too.
struct FirstLoads {
  double own = 0, streamed = 0;
};

FirstLoads first_loads(const KernelShape& shape, Algo algo, bool backward, double d, double dv, double e,
                       BackwardKernel part) {
  const double br = double(shape.tiling.Br), bc = double(shape.tiling.Bc);
  if (part == BackwardKernel::dq) return {br * (d + dv) * e, bc * (d + dv) * e};  // Q_i and dO_i; K_0 and V_0
  if (backward || algo == Algo::fa1) return {bc * (d + dv) * e, br * (d + dv) * e};
  return {br * d * e, bc * (d + dv) * e};
}

// How long a starting CTA waits for its first loads: the DRAM round trip, then their bytes.
//   later       A CTA that starts while the other SMs compute pulls at one SM's own rates (sm_read.cu:
//               one SM reading alone): its own block from DRAM, the streamed one from L2, where the CTAs
//               of its head put it. Without the preset's measured rates, the round trip alone.
//   first_wave  A persistent kernel's first wave (the replay's bursts share the chip for every other
//               kernel's CTAs that start together): every own block and each head's first streamed block
//               from DRAM, every CTA's bytes through L2, at the chip's rates (what sm_read.cu measures with
//               every SM reading: each SM's share of them).
struct StartWaits {
  double later = 0, first_wave = 0;
};

StartWaits start_waits(const GpuSpec& g, const FirstLoads& f, double ctas, double slots, double ctas_per_head) {
  StartWaits w{g.dram_latency_s, g.dram_latency_s};
  if (g.sm_dram_read_bytes_per_s > 0 && g.sm_l2_read_bytes_per_s > 0)
    w.later += f.own / g.sm_dram_read_bytes_per_s + f.streamed / g.sm_l2_read_bytes_per_s;
  const double wave = std::min(ctas, slots), heads = std::ceil(wave / std::max(1.0, ctas_per_head));
  const double dram = wave * f.own + heads * f.streamed, through_l2 = wave * (f.own + f.streamed);
  w.first_wave += std::max(dram / g.hbm_effective(), through_l2 / g.l2_bandwidth);
  return w;
}

// One fused kernel: its shape, its CTAs replayed, its counts and times. `part` picks flashlab's fa2
// deterministic kernels (dkdv, dq); `dq` how the backward sums dQ (grids.hpp DqSum).
Cost fused_kernel(const Problem& p, const GpuSpec& g, Algo algo, Impl impl, bool backward, const Options& o,
                  BackwardKernel part = BackwardKernel::all, DqSum dq = DqSum::atomics) {
  const bool fp8 = o.fp8 && algo == Algo::fa3 && !backward;  // estimate() refused it anywhere else
  KernelShape shape = kernel_shape(p, g, algo, impl, backward, o.block_m, o.block_n, fp8, part);
  if (impl == Impl::cudnn) shape.persistent = false;
  // fa3's deterministic walks rotate without a mask where a head's K/V blocks (its grid's x, from the
  // largest entry) fit on the device at once (gpu/fa3/fa3_bwd.cu rotate_walks).
  if (dq == DqSum::turns &&
      gpu::rotates_walks(!p.has_mask(), (p.seqlen_k + shape.tiling.Bc - 1) / shape.tiling.Bc,
                         static_cast<long long>(shape.ctas_per_sm * g.sm_count)))
    dq = DqSum::rotated;
  const bool reverse = impl == Impl::upstream;
  // flashlab's fa3 (gpu/fa3/scheduler.cuh) hands its dealt tiles out as CTAs ask, fa2's grid is dealt
  // in blockIdx order as slots free: either way how the replay dispatches a grid's tiles. The
  // deterministic dq kernel takes its Q blocks in blockIdx order, undealt.
  const bool flashlab_grid = impl == Impl::flashlab;  // fa2's and fa3's kernels: (block, head, batch) grids
  const bool dq_kernel = part == BackwardKernel::dq;
  const Deal deal = impl == Impl::flashlab && !dq_kernel ? flashlab_deal(p, g, algo, backward, shape.tiling) : Deal{};
  const ElementCost unit = element_cost(p, g, algo, backward, shape, fp8, part);
  const Order order = algo == Algo::fa1              ? (backward ? Order::fa1_backward : Order::fa1)
                      : part == BackwardKernel::dkdv ? Order::dkdv
                      : dq_kernel                    ? Order::dq
                                                     : (backward ? Order::backward : Order::fa2);
  const double e = bytes_per_element(p.dtype), d = double(p.head_dim), dv = double(p.dv());
  const double e_in = fp8 ? 1.0 : e;  // bytes an element of Q, K, V (FP8: e4m3; O stays in 2 bytes)
  Cost c;
  c.block_m = shape.tiling.Br;
  c.block_n = shape.tiling.Bc;
  c.sram_bytes = shape.smem;
  c.ctas_per_sm = shape.ctas_per_sm;
  c.occupancy = shape.ctas_per_sm * shape.threads / g.max_threads_per_sm;

  // One schedule per distinct batch entry (one for a fixed-length batch with one mask for every entry);
  // SRAM <-> L2 bytes from it.
  std::vector<Schedule> schedules;
  const int64_t distinct = p.varlen() || p.mask_varies_by_batch() ? p.batch : 1;
  for (int64_t b = 0; b < distinct; ++b) schedules.emplace_back(p, b, shape.tiling, order);
  double kv_bytes = 0;  // one pass over K and V of every head, which each FA1 split repeats
  const double heads = double(p.heads_q) * double(p.batch / distinct);  // (batch, head) pairs per schedule
  for (const Schedule& s : schedules) {
    const auto bytes = s.closed_form();  // in the problem's dtype; FP8 loads Q, K, V in one byte an element
    c.l2_bytes += heads * (double(bytes.total_load()) * e_in / e + double(bytes.total_store()));
    kv_bytes += heads * double(s.seqlen_k()) * (d + dv) * e;
  }

  // The grid, in launch order, and how many CTAs share an SM.
  int64_t splits = 1;
  if (algo == Algo::fa1) splits = fa1_splits(double(p.batch * p.heads_q), g.sm_count, shape.ctas_per_sm);
  c.l2_bytes += double(splits - 1) * kv_bytes;
  const ElementTime per{unit.full, unit.partial};
  // The dq kernel is Q-outer, as a forward: Q_i, dO_i, LSE_i, D_i in, dQ_i out in the input dtype.
  const std::unique_ptr<CtaGrid> grid =
      algo == Algo::fa1 ? fa1_grid(p, schedules, per, splits, backward)
      : dq_kernel ? forward_grid(p, schedules, per, TileOrder::flashlab, false, kFa3SectionBytes, e, Deal{},
                                 LineBytes{(d + dv) * e + 8.0, d * e})
      : backward  ? backward_grid(p, schedules, per, reverse,
                                  flashlab_grid ? BackwardOrder::flashlab : BackwardOrder::fa2, deal,
                                  part == BackwardKernel::dkdv ? DqSum::none : dq)
                  : forward_grid(p, schedules, per,
                                 flashlab_grid      ? TileOrder::flashlab
                                 : shape.persistent ? TileOrder::fa3
                                                    : TileOrder::fa2,
                                 reverse, kFa3SectionBytes, e_in, deal);
  const double ctas = double(grid->ctas());
  // A grid smaller than the resident capacity is spread over the SMs first: CTAs share an SM only as far
  // as their number requires, and the slots of one SM share its units.
  const double sharing = std::clamp(std::ceil(ctas / g.sm_count), 1.0, shape.ctas_per_sm);

  ReplaySetup setup;
  setup.time_scale = sharing;
  setup.sms = static_cast<int64_t>(g.sm_count);
  setup.slots = static_cast<int64_t>(sharing * g.sm_count);
  setup.l2_capacity = g.l2_shared_bytes();
  setup.replacement = o.l2_replacement;
  // Every CTA waits for its first loads before its first GEMM: one round trip in which its slot computes
  // nothing (the other CTAs on the SM go on at their shared rate), then their bytes (first_loads_wait). A
  // CTA alone on its SM also waits for its last stores to drain: another round trip. A persistent kernel's
  // producer warp loads the next tile during this one: only the first wave waits.
  const StartWaits waits = start_waits(g, first_loads(shape, algo, backward, d, dv, e_in, part), ctas,
                                       double(setup.slots), ctas / (double(p.batch) * double(p.heads_q)));
  const double drain = sharing == 1 ? g.dram_latency_s : 0.0;
  // CTAs that start together share the chip for their first loads (replay.hpp, bursts; the first wave is
  // the first burst), each waiting at least its own round trip and bytes (cta_start_s).
  setup.cta_start_s = shape.persistent ? 0.0 : waits.later + drain;
  if (!shape.persistent) {
    setup.dram_bytes_per_s = g.hbm_effective();
    setup.l2_bytes_per_s = g.l2_bandwidth;
    setup.latency_s = g.dram_latency_s;
  }
  // Turns: a CTA's poll sees its predecessor's release one L2 round trip after it lands, then its own dQ rows
  // for the step (Br x d floats) land in L2 at the SM's share of the chip's reduction rate (every SM adding
  // a tile a step and waiting for it to land, as the turn's keeper or writer does: l2_reduce.cu's "tile
  // landed"), and L2 acknowledges them, another round trip, before its release is written. The keeper (the
  // writer at d <= 128) takes the CTA's turns one after the other, so a turn also waits for the CTA's own
  // previous release (replay.hpp). At d = 256 the keepers look ahead where the walks do not rotate
  // (gpu/fa3/bwd_dq_writer.cuh keep_dq_turns, v13): a next turn already free is given before the release, and
  // the CTA's adds then go back to back at the SM's share of the rate adds not waited for reach.
  if (dq == DqSum::turns || dq == DqSum::rotated) {
    const double tile = double(shape.tiling.Br) * d * 4.0;
    setup.turn_latency_s = g.l2_latency_s;
    setup.turn_tail_s = tile / (g.l2_reduce_bytes_per_s / g.sm_count);
    setup.turn_look_ahead = dq == DqSum::turns && gpu::fa3_backward_splits_head_dim(p.head_dim);
    setup.turn_stream_s = tile / (g.l2_reduce_stream_bytes_per_s / g.sm_count);
  }
  KernelTimeline* tl = nullptr;
  if (o.timeline) {
    const char* what = part == BackwardKernel::dkdv ? " backward (dK, dV)"
                       : dq_kernel                  ? " backward (dQ)"
                       : backward                   ? " backward"
                                                    : " forward";
    o.timeline->push_back({to_string(algo) + what, setup.slots, setup.sms, 0, {}});
    tl = &o.timeline->back();
  }
  const ReplayResult r = replay(*grid, setup, tl ? &tl->ctas : nullptr, backward ? nullptr : o.residency);
  if (tl) tl->seconds = r.makespan_s;

  const double heads_elements = r.elements;
  c.flops = heads_elements * flops_per_element(d, dv, backward, part);
  c.exp_ops = heads_elements;
  c.other_flops = heads_elements * unit.fp32_ops + r.partial_elements * unit.mask_ops;
  c.hbm_read_bytes = r.dram_read;
  c.hbm_write_bytes = r.dram_write;
  c.l2_hit_bytes = r.l2_hits;
  c.ctas = ctas;
  c.waves = ctas / double(setup.slots);
  c.launches = 1;

  const double tensor_rate =
      (fp8 ? g.tensor_fp8 : g.tensor_peak(p.dtype)) * (algo == Algo::fa3 ? g.wgmma_fraction : g.mma_sync_fraction);
  c.t_tensor = c.flops / tensor_rate;
  c.t_smem = heads_elements * unit.smem / g.sm_count;
  c.t_wait = heads_elements * unit.wait / g.sm_count;
  c.t_exp = c.exp_ops / g.exp_per_s;
  c.t_fp32 = c.other_flops / g.fp32_ops_per_s();
  c.t_hbm = (c.hbm_read_bytes + c.hbm_write_bytes) / g.hbm_effective();
  c.t_l2 = c.l2_bytes / g.l2_bandwidth;
  c.t_launch = g.kernel_launch_s;
  // A persistent kernel's first wave waits for its first loads like any other (the replay charged none).
  const double first_wave = shape.persistent ? waits.first_wave : 0.0;
  // The bandwidth bounds assume every slot streams all along; a slot waiting for its predecessor's dQ turn
  // streams nothing, so where a bandwidth binds it is reached that much later: by the average slot's wait.
  // (A slot waiting for its own rows to land is streaming them: L2's bound counts those bytes.)
  const double turn_wait = (r.turn_wait_s - r.own_turn_wait_s) / double(setup.slots);
  c.time_s = std::max({r.makespan_s + first_wave, c.t_hbm + turn_wait, c.t_l2 + turn_wait}) + c.t_launch;
  return c;
}

Cost fused_pass(const Problem& p, const GpuSpec& g, Algo algo, bool backward, const Options& o) {
  // flashlab's own kernels are an fa2 and an fa3 (forward and backward), cuDNN's an fa3; the other
  // algorithms run their upstream kernels.
  const Impl impl = (o.impl == Impl::flashlab && (algo == Algo::fa2 || algo == Algo::fa3)) ||
                            (o.impl == Impl::cudnn && algo == Algo::fa3)
                        ? o.impl
                        : Impl::upstream;
  const bool fp8 = o.fp8 && algo == Algo::fa3 && !backward;  // estimate() refused it anywhere else
  const bool deterministic = o.deterministic && backward;    // estimate() refused it where it is not modelled
  const double e = bytes_per_element(p.dtype), d = double(p.head_dim), dv = double(p.dv());
  const double rows = double(p.total_q()) * double(p.heads_q);
  // flashlab's fa2 deterministic backward: preprocess, dkdv without dQ, then the Q-outer dq kernel, which
  // writes dQ itself (no accumulator to zero or convert).
  if (deterministic && algo == Algo::fa2) {
    Cost c = fused_kernel(p, g, algo, impl, true, o, BackwardKernel::dkdv);
    c += fused_kernel(p, g, algo, impl, true, o, BackwardKernel::dq);
    // gpu/fa2_bwd.cu's preprocess reads O, dO and LSE and writes D and LSE in log2 units (8 bytes a row).
    c += streaming_kernel(g, rows * (2 * dv * e + 4.0), rows * 8.0);
    return c;
  }
  Cost c = fused_kernel(p, g, algo, impl, backward, o, BackwardKernel::all,
                        deterministic ? DqSum::turns : DqSum::atomics);

  if (fp8) {
    // gpu/fa3/fa3_fwd.cu's fp8_transpose_v before the kernel: V read once, V^T (keys rounded up to 32)
    // written once, a byte an element.
    const double v_bytes = double(p.total_k()) * double(p.heads_kv) * dv;
    c += streaming_kernel(g, v_bytes, v_bytes);
  }
  if (backward && algo != Algo::fa1) {
    // FA2/FA3: preprocess (reads O, dO; writes D; zeroes dQ's fp32 accumulator) and the conversion of the
    // accumulator to dQ in the input precision.
    if (impl == Impl::flashlab) {
      // gpu/fa3/fa3_bwd.cu's and gpu/fa2_bwd.cu's preprocess also read LSE (4 bytes a row) and write LSE
      // log2 e beside D into the scratch (8 bytes a row), and zero the dQ scratch (4 d bytes a row).
      c += streaming_kernel(g, rows * (2 * dv * e + 4.0), rows * (8.0 + 4.0 * d));
    } else {
      c += streaming_kernel(g, rows * 2 * dv * e, rows * (4.0 + 4.0 * d));
    }
    c += streaming_kernel(g, rows * 4.0 * d, rows * d * e);
  }
  return c;
}

// no_accumulator: flashlab's fa2 deterministic backward, whose dq kernel keeps dQ on chip (no fp32 buffer).
double peak_hbm(const Problem& p, Algo algo, Pass pass, bool no_accumulator) {
  const double e = bytes_per_element(p.dtype);
  const double q = p.total_q() * p.heads_q * p.head_dim * e, k = p.total_k() * p.heads_kv * p.head_dim * e;
  const double v = p.total_k() * p.heads_kv * p.dv() * e, o = p.total_q() * p.heads_q * p.dv() * e;
  const double lse = p.total_q() * p.heads_q * 4.0;
  double peak = q + k + v + o + lse;
  if (has_bwd(pass)) peak += o /* dO */ + q + k + v /* dQ dK dV */ + lse /* D */ + (no_accumulator ? 0 : q / e * 4);
  if (algo == Algo::standard || algo == Algo::math) {
    double s = 0;
    for (int64_t b = 0; b < p.batch; ++b) s += double(p.heads_q) * p.len_q(b) * p.len_k(b);
    // standard: S and P (dP, dS) in the input dtype; math: S and P in fp32 and a bool mask
    if (algo == Algo::standard) peak += ((has_bwd(pass) ? 3 : 2) * e + (p.dropout_p > 0 ? 1 : 0)) * s;
    else peak += (has_bwd(pass) ? 3 * 4 : 2 * 4 + 1) * s;
  }
  return peak;
}

}  // namespace

std::string fp8_unavailable(const GpuSpec& g, Algo algo, Pass pass, const Options& o) {
  if (!o.fp8) return "";
  if (algo != Algo::fa3 || o.impl != Impl::flashlab)
    return "--fp8 models flashlab's FP8 forward (gpu/fa3/fa3_fwd.cu): use --algo fa3 --impl flashlab";
  if (has_bwd(pass)) return "--fp8 is a forward (flashlab's FP8 kernel has no backward): use --pass fwd";
  if (const std::string why = fa3_unavailable(g); !why.empty()) return "--fp8: " + why;
  if (g.tensor_fp8 <= 0) return "--fp8: " + g.display_name + "'s preset has no FP8 tensor rate";
  return "";
}

std::string deterministic_unavailable(const GpuSpec& g, Algo algo, Pass pass, const Options& o) {
  if (!o.deterministic || algo == Algo::standard || algo == Algo::math) return "";
  if (!has_bwd(pass)) return "--deterministic is a backward's (dQ summed without atomics): use --pass bwd or fwd+bwd";
  if (o.impl != Impl::flashlab || (algo != Algo::fa2 && algo != Algo::fa3))
    return "--deterministic models flashlab's deterministic backward (fa2: gpu/fa2_bwd.cu's Q-outer dq kernel; fa3: "
           "gpu/fa3/'s dQ added in turns): use --impl flashlab with --algo fa2 or fa3";
  if (algo == Algo::fa3 && g.l2_latency_s <= 0)
    return "--deterministic --algo fa3: flashlab's fa3 hands each Q block's dQ from CTA to CTA through L2, and " +
           g.display_name + "'s preset has no l2_latency_s to time the hand-over (measure it with "
           "simulator/validation/microbench.cu, or give one with --set l2_latency_s=SECONDS)";
  if (algo == Algo::fa3 && (g.l2_reduce_bytes_per_s <= 0 || g.l2_reduce_stream_bytes_per_s <= 0))
    return "--deterministic --algo fa3: a CTA releases a Q block's dQ once its rows have landed in L2, and " +
           g.display_name + "'s preset lacks l2_reduce_bytes_per_s or l2_reduce_stream_bytes_per_s to time "
           "that (measure them with simulator/validation/l2_reduce.cu, or give them with --set NAME=BYTES_PER_S)";
  return "";
}

Estimate estimate(const Problem& p, const GpuSpec& g, Algo algo, Pass pass, const Options& o) {
  p.validate();
  if (const std::string why = fp8_unavailable(g, algo, pass, o); !why.empty()) throw Error(why);
  if (const std::string why = deterministic_unavailable(g, algo, pass, o); !why.empty()) throw Error(why);
  Estimate e;
  for (bool backward : {false, true}) {
    if (backward ? !has_bwd(pass) : !has_fwd(pass)) continue;
    switch (algo) {
      case Algo::standard: e += standard_pass(p, g, backward, o.standard_scale_pass); break;
      case Algo::math: e += math_pass(p, g, backward); break;
      default: e += fused_pass(p, g, algo, backward, o); break;
    }
  }
  e.algo = to_string(algo);
  e.gpu = g.name;
  e.pass = to_string(pass);
  e.seqlen_q = p.seqlen_q;
  e.seqlen_k = p.seqlen_k;
  e.head_dim = p.head_dim;
  e.peak_hbm_bytes = peak_hbm(p, algo, pass, o.deterministic && algo == Algo::fa2);
  const std::pair<double, const char*> ceilings[] = {{e.t_tensor, "tensor"}, {e.t_smem, "smem"}, {e.t_exp, "exp"},
                                                      {e.t_fp32, "fp32"},     {e.t_hbm, "hbm"},   {e.t_l2, "l2"},
                                                      {e.t_launch, "launch"}, {e.t_wait, "latency"}};
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
  Options unfused = o;
  unfused.fp8 = false;  // the baseline in the problem's dtype
  const double standard = it != out.end() ? it->time_s : estimate(p, g, Algo::standard, pass, unfused).time_s;
  for (Estimate& e : out) e.speedup_vs_standard = standard / e.time_s;
  return out;
}

}  // namespace flashlab::sim
