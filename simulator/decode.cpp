#include "decode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flashlab/error.hpp"
#include "split_schedule.hpp"

namespace flashlab::sim {
namespace {

constexpr int64_t kBlockM = 64;              // flash-attn 2's split-KV kernel: kBlockM = 64
constexpr int64_t kCtaSlotsPerSm = 2;        // flash-attn passes multiProcessorCount x 2 to its heuristic

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// flash-attn 2's block_n for its split-KV kernel by head dim.
int64_t block_n_for(int64_t d) { return d <= 64 ? 256 : d <= 128 ? 128 : 64; }

// The kernel's view of the problem: q_len 1 with GQA packs the group's query heads into one tile's rows.
struct KernelView {
  DecodeProblem d;
  int64_t heads;  // heads the grid runs: kv heads when packed
  bool packed;
};
KernelView kernel_view(const DecodeProblem& d) {
  KernelView v{d, d.heads_q, false};
  if (d.q_len == 1 && d.heads_q > d.heads_kv) {
    v.packed = true;
    v.heads = d.heads_kv;
    v.d.q_len = d.heads_q / d.heads_kv;  // the group's rows, all at the same position
    v.d.heads_q = d.heads_kv;
    v.d.causal = false;                  // one position: causal masks nothing
  }
  return v;
}

struct SplitCounts {
  double cache = 0, q = 0, append = 0, partial = 0, combine_read = 0, out = 0;
  std::vector<double> cta_bytes;  // each CTA's K/V bytes, in launch order
};

SplitCounts count(const KernelView& v, int64_t splits, const tiled::Tiling& tiling) {
  DecodeProblem d = v.d;
  d.num_splits = splits;
  SplitCounts c;
  auto load = [](const tiled::ByteCounts& b, tiled::TensorId t) { return double(b.load[static_cast<int>(t)]); };
  auto store = [](const tiled::ByteCounts& b, tiled::TensorId t) { return double(b.store[static_cast<int>(t)]); };
  using tiled::TensorId;
  for (int64_t b = 0; b < d.batch; ++b) {
    const tiled::SplitSchedule s(d, b, tiling);
    const tiled::ByteCounts bc = s.closed_form();
    c.cache += v.heads * (load(bc, TensorId::K) + load(bc, TensorId::V));
    c.q += v.heads * load(bc, TensorId::Q);
    c.partial += v.heads * (store(bc, TensorId::Oaccum) + store(bc, TensorId::LSEaccum));
    c.combine_read += v.heads * (load(bc, TensorId::Oaccum) + load(bc, TensorId::LSEaccum));
    c.out += v.heads * (store(bc, TensorId::O) + store(bc, TensorId::LSE));
    for (const tiled::Transfer& t : s.prologue()) c.append += d.heads_kv * t.bytes;
    // One CTA per (m block, split) of each head: its K and V blocks.
    const int64_t elem = bytes_per_element(d.dtype), Bc = tiling.Bc, sk = s.tiles().seqlen_k();
    for (int64_t h = 0; h < v.heads; ++h)
      for (int64_t sp = 0; sp < splits; ++sp)
        for (int64_t i = 0; i < s.tiles().Tr(); ++i) {
          const auto r = s.computed(sp, i);
          const int64_t keys = r.begin < r.end ? std::min(r.end * Bc, sk) - r.begin * Bc : 0;
          c.cta_bytes.push_back(2.0 * keys * d.head_dim * elem);
        }
  }
  return c;
}

// The split kernel's time: CTAs in launch order on the free slots, each streaming at `rate`.
double replay(const std::vector<double>& cta_bytes, int64_t slots, double rate) {
  std::vector<double> free_at(static_cast<size_t>(std::min<int64_t>(slots, cta_bytes.size())), 0.0);
  for (double bytes : cta_bytes) {
    auto slot = std::min_element(free_at.begin(), free_at.end());
    *slot += bytes / rate;
  }
  return free_at.empty() ? 0.0 : *std::max_element(free_at.begin(), free_at.end());
}

struct Timing {
  double split = 0, combine = 0, launch = 0, total = 0, cta_rate = 0;
  bool latency_bound = false;
};

Timing time_of(const SplitCounts& c, int64_t splits, int64_t slots, int64_t block_bytes, const GpuSpec& g) {
  Timing t;
  const double hbm = g.hbm_effective();
  const int64_t ctas = static_cast<int64_t>(c.cta_bytes.size());
  const double share = hbm / static_cast<double>(std::max<int64_t>(1, std::min(ctas, slots)));
  t.cta_rate = g.dram_latency_s > 0 ? block_bytes / g.dram_latency_s : 0.0;  // Little's law: one block in flight
  const double rate = t.cta_rate > 0 ? std::min(t.cta_rate, share) : share;
  t.latency_bound = t.cta_rate > 0 && t.cta_rate < share;
  const double streamed = replay(c.cta_bytes, slots, rate);
  t.split = std::max(streamed, (c.cache + c.q + c.append + c.partial + (splits > 1 ? 0 : c.out)) / hbm);
  t.combine = splits > 1 ? (c.combine_read + c.out) / hbm : 0.0;
  t.launch = g.kernel_launch_s * (splits > 1 ? 2 : 1);
  t.total = t.split + t.combine + t.launch;
  return t;
}

// The estimate's counts and times, from the schedule's counts and the kernel's timing.
void fill(DecodeEstimate& e, const SplitCounts& c, const Timing& t) {
  e.ctas = static_cast<int64_t>(c.cta_bytes.size());
  e.cache_bytes = c.cache;
  e.q_bytes = c.q;
  e.append_bytes = c.append;
  e.partial_write_bytes = c.partial;
  e.combine_read_bytes = c.combine_read;
  e.out_write_bytes = c.out;
  e.t_split_s = t.split;
  e.t_combine_s = t.combine;
  e.t_launch_s = t.launch;
  e.time_s = t.total;
  e.cta_bytes_per_s = t.cta_rate;
  e.cache_bandwidth = c.cache / t.total;
}

// ---- flashlab's decode kernel (gpu/decode/decode.cu), `--impl flashlab`.

// The kernel's view: every kv head's query rows (q_len x its group's query heads) packed into chunks of 8 or
// 16 rows (gpu/shapes.hpp decode_row_chunks), one CTA a (chunk, split, kv head, entry). Decode queries sit at the cache's end, so the causal edge masks
// keys inside the last block only: the view reads the blocks a non-causal one does.
KernelView packed_rows(const DecodeProblem& d) {
  KernelView v{d, d.heads_kv, d.heads_q > d.heads_kv};
  v.d.q_len = d.q_len * (d.heads_q / d.heads_kv);
  v.d.heads_q = d.heads_kv;
  v.d.causal = false;
  return v;
}

// The split kernel's CTAs replayed on the SM slots in launch order. A CTA streams its K and V at
// `cta_rate` (its warps' stages in flight) or at its share of the HBM among the CTAs streaming then,
// whichever is lower (a fluid replay: the shares change as CTAs start and finish); once its bytes are in,
// it holds its slot `tail_s` longer, streaming nothing (its warps compute their last blocks and merge). A CTA that
// takes a slot another has freed first waits `start_s` (its Q and first blocks' round trip) streaming
// nothing; the first wave's start is the kernel's stream start, charged outside. Returns the time the
// last CTA finishes.
double fluid_replay(const std::vector<double>& cta_bytes, int64_t slots, double cta_rate, double hbm, double start_s,
                    double tail_s) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  struct Cta { double ready, left, done = kNever; };  // done: when its tail ends (kNever while it streams)
  std::vector<Cta> active;
  size_t next = 0;
  for (; next < cta_bytes.size() && int64_t(next) < slots; ++next) active.push_back({0.0, cta_bytes[next]});
  auto streams = [](const Cta& c, double t) { return c.ready <= t && c.done == kNever; };
  double t = 0;
  while (!active.empty()) {
    int64_t streaming = 0;
    for (const Cta& c : active) streaming += streams(c, t);
    const double rate = streaming > 0 ? std::min(cta_rate, hbm / double(streaming)) : 0.0;
    double step = kNever;  // to the next start, end of a stream, or end of a tail
    for (const Cta& c : active)
      step = std::min(step, c.done != kNever ? c.done - t : c.ready > t ? c.ready - t : c.left / rate);
    for (Cta& c : active)
      if (streams(c, t)) c.left -= rate * step;
    t += step;
    for (size_t i = 0; i < active.size();) {
      Cta& c = active[i];
      if (streams(c, t) && c.left <= 1e-6 * cta_rate * step + 1e-9) c.done = t + tail_s;  // its bytes are in
      if (c.done <= t) {  // its tail is over: the slot frees
        if (next < cta_bytes.size()) c = {t + start_s, cta_bytes[next++]};
        else {
          c = active.back();
          active.pop_back();
          continue;
        }
      }
      ++i;
    }
  }
  return t;
}

DecodeEstimate estimate_flashlab(DecodeProblem d, const GpuSpec& g) {
  const gpu::TileShape shape = gpu::decode_split_shape(int(d.head_dim));
  if (!shape.supported()) throw Error("estimate --decode --impl flashlab: " + std::string(shape.why));
  // CTAs an SM: shared memory binds (decode_split_shape says why; 1 KiB an SM's CTA is the runtime's).
  int64_t per_sm = int64_t(g.smem_per_sm_bytes) / (shape.smem_bytes + 1024);
  per_sm = std::min<int64_t>({per_sm, int64_t(g.max_threads_per_sm) / shape.threads, int64_t(g.max_blocks_per_sm)});
  if (per_sm < 1 || shape.smem_bytes > g.smem_per_block_bytes)
    throw Error("estimate --decode --impl flashlab: the split kernel at head dim " + std::to_string(shape.head_dim) +
                " needs " + std::to_string(shape.smem_bytes) + " bytes of shared memory a CTA, more than " + g.display_name +
                " has");
  const int64_t slots = int64_t(g.sm_count) * per_sm;
  const KernelView v0 = packed_rows(d);
  const int64_t chunks = gpu::decode_row_chunks(int(v0.d.q_len));
  DecodeEstimate e;
  e.impl = "flashlab";
  e.heuristic_splits = gpu::decode_splits_for(shape, d.batch * v0.heads * chunks, slots, d.max_seqlen_k(), g.hbm_bandwidth);
  e.splits_from_heuristic = d.num_splits <= 0;
  d.num_splits = e.splits_from_heuristic ? e.heuristic_splits : d.num_splits;
  d.validate();
  const KernelView v = packed_rows(d);
  e.gpu = g.display_name;
  e.problem = d.describe();
  e.num_splits = d.num_splits;
  e.block_m = shape.block_m;
  e.block_n = shape.block_n;
  e.slots = slots;
  e.gqa_packed = v.packed;
  // The splits cut 32-key blocks (a warp's), as the kernel does; a CTA walks them block_n at a time.
  const tiled::Tiling tiling{shape.block_m, 32};
  // A CTA alone streams at the kernel's rate with the HBM idle (its loads at the preset's latency); the
  // replay shares the HBM among the CTAs streaming at once.
  const double hbm = g.hbm_effective(), cta_rate = gpu::decode_cta_bytes_per_s(shape, g.dram_latency_s);
  auto time_for = [&](int64_t splits, SplitCounts* out) {
    const SplitCounts c = count(v, splits, tiling);
    Timing t;
    t.cta_rate = cta_rate;
    const double streamed =
        fluid_replay(c.cta_bytes, slots, cta_rate, hbm, g.dram_latency_s,
                     gpu::decode_block_compute_s(shape) + gpu::decode_merge_s(shape));
    const double bytes = c.cache + c.q + c.append + c.partial + (splits > 1 ? 0 : c.out);
    t.latency_bound = streamed > 1.02 * bytes / hbm;  // the CTAs' streams and tails, not the HBM, set the pace
    t.split = g.hbm_stream_start_s + std::max(streamed, bytes / hbm);
    // The combine waits for the split kernel to finish and its partials to be visible (as a programmatic
    // dependent, the preset's dependent_launch_s: dependent_launch.cu), then works through its steps of
    // splits, a round trip each, and merges (gpu/shapes.hpp decode_combine_work_s, the kernel's timeline),
    // its bytes streaming meanwhile.
    const bool pdl = g.wgmma_fraction > 0;
    t.combine = splits > 1 ? (pdl ? g.dependent_launch_s : 0.0) +
                                 std::max(gpu::decode_combine_work_s(int(splits), int(d.head_dim)),
                                          (c.combine_read + c.out) / hbm)
                           : 0.0;
    // Calls back to back (a model's layers): a call's launch runs under the previous call's work, so a call
    // takes its kernels' time or the launch interval, whichever is longer (cold_read.cu: a 4.2 MB read took
    // 3.96 us a kernel where empty kernels launched 4.47 us apart, H200). On sm_90 the combine is a
    // programmatic dependent launch whose launch runs under the split kernel; before, a launch of its own.
    t.launch = g.kernel_launch_s * (splits > 1 && !pdl ? 2 : 1);
    t.total = std::max(t.launch, t.split + t.combine + (splits > 1 && !pdl ? g.kernel_launch_s : 0.0));
    if (out) *out = c;
    return t;
  };
  SplitCounts c;
  const Timing t = time_for(d.num_splits, &c);
  fill(e, c, t);
  e.bound = t.total <= t.launch ? "launch" : t.latency_bound ? "latency" : "hbm";
  const Timing one = time_for(1, nullptr);
  e.time_no_split_s = one.total;
  e.speedup_vs_no_split = one.total / t.total;
  return e;
}

DecodeEstimate estimate_upstream(DecodeProblem d, const GpuSpec& g) {
  const KernelView v0 = kernel_view(d);
  const int64_t slots = static_cast<int64_t>(g.sm_count) * kCtaSlotsPerSm;
  const int64_t Bn = block_n_for(d.head_dim);
  const int64_t m_blocks = ceil_div(v0.d.q_len, kBlockM);
  DecodeEstimate e;
  e.heuristic_splits = gpu::split_kv_heuristic(d.batch * v0.heads * m_blocks, slots, ceil_div(d.max_seqlen_k(), Bn));
  e.splits_from_heuristic = d.num_splits <= 0;
  d.num_splits = e.splits_from_heuristic ? e.heuristic_splits : d.num_splits;
  d.validate();
  const KernelView v = kernel_view(d);
  e.impl = "upstream";
  e.gpu = g.display_name;
  e.problem = d.describe();
  e.num_splits = d.num_splits;
  e.block_m = kBlockM;
  e.block_n = Bn;
  e.slots = slots;
  e.gqa_packed = v.packed;
  const int64_t block_bytes = Bn * d.head_dim * bytes_per_element(d.dtype);

  const tiled::Tiling tiling{kBlockM, Bn};
  const SplitCounts c = count(v, d.num_splits, tiling);
  const Timing t = time_of(c, d.num_splits, slots, block_bytes, g);
  fill(e, c, t);
  e.bound = t.latency_bound ? "latency" : "hbm";
  const Timing one = time_of(count(v, 1, tiling), 1, slots, block_bytes, g);
  e.time_no_split_s = one.total;
  e.speedup_vs_no_split = one.total / t.total;
  return e;
}

}  // namespace

DecodeEstimate estimate_decode(DecodeProblem d, const GpuSpec& g, Impl impl) {
  // Both kernels refuse more splits than this (flash-attn 2's flash_api.cpp, gpu/decode/decode.cu).
  if (d.num_splits > gpu::kDecodeMaxSplits)
    throw Error("estimate --decode: num_splits " + std::to_string(d.num_splits) + ": the split-KV kernels take at most " +
                std::to_string(gpu::kDecodeMaxSplits) + " (0: the kernel's own choice)");
  switch (impl) {
    case Impl::upstream: return estimate_upstream(std::move(d), g);
    case Impl::flashlab: return estimate_flashlab(std::move(d), g);
    case Impl::cudnn: break;
  }
  throw Error("estimate --decode: --impl upstream (flash-attn 2's split-KV kernel) or flashlab (gpu/decode/); "
              "cuDNN's decode kernel is not modelled");
}

namespace {
std::vector<std::pair<const char*, nlohmann::json>> fields(const DecodeEstimate& e) {
  return {{"gpu", e.gpu}, {"impl", e.impl}, {"problem", e.problem}, {"num_splits", e.num_splits},
          {"heuristic_splits", e.heuristic_splits}, {"splits_from_heuristic", e.splits_from_heuristic},
          {"block_m", e.block_m}, {"block_n", e.block_n}, {"ctas", e.ctas}, {"cta_slots", e.slots},
          {"gqa_packed", e.gqa_packed}, {"cache_bytes", e.cache_bytes}, {"q_bytes", e.q_bytes},
          {"append_bytes", e.append_bytes}, {"partial_write_bytes", e.partial_write_bytes},
          {"combine_read_bytes", e.combine_read_bytes}, {"out_write_bytes", e.out_write_bytes},
          {"t_split_s", e.t_split_s}, {"t_combine_s", e.t_combine_s}, {"t_launch_s", e.t_launch_s},
          {"time_s", e.time_s}, {"cta_bytes_per_s", e.cta_bytes_per_s}, {"bound", e.bound},
          {"time_no_split_s", e.time_no_split_s}, {"speedup_vs_no_split", e.speedup_vs_no_split},
          {"cache_bytes_per_s", e.cache_bandwidth}};
}
}  // namespace

std::string to_json(const DecodeEstimate& e) {
  nlohmann::json row = nlohmann::json::object();
  for (auto& [k, v] : fields(e)) row[k] = v;
  return row.dump(2) + "\n";
}

std::string to_csv(const DecodeEstimate& e) {
  std::ostringstream head, row;
  bool first = true;
  for (auto& [k, v] : fields(e)) {
    head << (first ? "" : ",") << k;
    row << (first ? "" : ",") << v.dump();  // strings quoted, as CSV wants them (the problem has commas)
    first = false;
  }
  return head.str() + "\n" + row.str() + "\n";
}

std::string to_table(const DecodeEstimate& e) {
  const bool flashlab = e.impl == "flashlab";
  char time_line[256];
  if (flashlab)  // calls back to back: a call's launch runs under the last call's work
    std::snprintf(time_line, sizeof time_line, "the longer of split kernel %.2f + combine %.2f and the launch interval %.2f",
                  e.t_split_s * 1e6, e.t_combine_s * 1e6, e.t_launch_s * 1e6);
  else
    std::snprintf(time_line, sizeof time_line, "split kernel %.2f + combine %.2f + launches %.2f", e.t_split_s * 1e6,
                  e.t_combine_s * 1e6, e.t_launch_s * 1e6);
  char buf[2048];
  auto mb = [](double b) { return b / 1e6; };
  std::snprintf(buf, sizeof buf,
                "%s: %s (%s)\n"
                "splits        %lld (%s; its choice: %lld)\n"
                "grid          %lld CTAs on %lld slots (%s); block %lld x %lld%s\n"
                "cache read    %10.3f MB   (K and V blocks)\n"
                "Q, append     %10.3f MB\n"
                "partials      %10.3f MB written, %10.3f MB read by the combine\n"
                "O, LSE        %10.3f MB written\n"
                "time          %10.2f us = %s  (%s-bound)\n"
                "no split      %10.2f us   speedup of split-KV %.2fx\n"
                "cache stream  %10.1f GB/s  (one CTA: %.1f GB/s %s)\n",
                e.gpu.c_str(), e.problem.c_str(),
                flashlab ? "flashlab's decode kernel, gpu/decode/" : "flash-attn 2's split-KV kernel",
                (long long)e.num_splits,
                !e.splits_from_heuristic ? "given"
                : flashlab                ? "flashlab's rule, gpu/shapes.hpp decode_splits_for"
                                          : "flash-attn's heuristic",
                (long long)e.heuristic_splits, (long long)e.ctas, (long long)e.slots,
                flashlab ? "SMs x the CTAs an SM's shared memory holds" : "SMs x 2", (long long)e.block_m,
                (long long)e.block_n,
                e.gqa_packed ? ", GQA heads packed in the rows" : "", mb(e.cache_bytes), mb(e.q_bytes + e.append_bytes),
                mb(e.partial_write_bytes), mb(e.combine_read_bytes), mb(e.out_write_bytes), e.time_s * 1e6,
                time_line, e.bound.c_str(), e.time_no_split_s * 1e6,
                e.speedup_vs_no_split, e.cache_bandwidth / 1e9, e.cta_bytes_per_s / 1e9,
                flashlab ? "alone, its warps' blocks over the measured block period" : "by latency");
  return buf;
}

}  // namespace flashlab::sim
