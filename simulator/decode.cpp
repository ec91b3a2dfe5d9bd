#include "decode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

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

SplitCounts count(const KernelView& v, int64_t splits) {
  DecodeProblem d = v.d;
  d.num_splits = splits;
  const tiled::Tiling tiling{kBlockM, block_n_for(d.head_dim)};
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

}  // namespace


DecodeEstimate estimate_decode(DecodeProblem d, const GpuSpec& g) {
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
  e.gpu = g.display_name;
  e.problem = d.describe();
  e.num_splits = d.num_splits;
  e.block_m = kBlockM;
  e.block_n = Bn;
  e.slots = slots;
  e.gqa_packed = v.packed;
  const int64_t block_bytes = Bn * d.head_dim * bytes_per_element(d.dtype);

  const SplitCounts c = count(v, d.num_splits);
  e.ctas = static_cast<int64_t>(c.cta_bytes.size());
  e.cache_bytes = c.cache;
  e.q_bytes = c.q;
  e.append_bytes = c.append;
  e.partial_write_bytes = c.partial;
  e.combine_read_bytes = c.combine_read;
  e.out_write_bytes = c.out;
  const Timing t = time_of(c, d.num_splits, slots, block_bytes, g);
  e.t_split_s = t.split;
  e.t_combine_s = t.combine;
  e.t_launch_s = t.launch;
  e.time_s = t.total;
  e.cta_bytes_per_s = t.cta_rate;
  e.bound = t.latency_bound ? "latency" : "hbm";
  e.cache_bandwidth = c.cache / t.total;
  const Timing one = time_of(count(v, 1), 1, slots, block_bytes, g);
  e.time_no_split_s = one.total;
  e.speedup_vs_no_split = one.total / t.total;
  return e;
}

namespace {
std::vector<std::pair<const char*, nlohmann::json>> fields(const DecodeEstimate& e) {
  return {{"gpu", e.gpu}, {"problem", e.problem}, {"num_splits", e.num_splits},
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
  char buf[2048];
  auto mb = [](double b) { return b / 1e6; };
  std::snprintf(buf, sizeof buf,
                "%s: %s\n"
                "splits        %lld (%s; the heuristic's choice: %lld)\n"
                "grid          %lld CTAs on %lld slots (SMs x 2); block %lld x %lld%s\n"
                "cache read    %10.3f MB   (K and V blocks)\n"
                "Q, append     %10.3f MB\n"
                "partials      %10.3f MB written, %10.3f MB read by the combine\n"
                "O, LSE        %10.3f MB written\n"
                "time          %10.2f us = split kernel %.2f + combine %.2f + launches %.2f  (%s-bound)\n"
                "no split      %10.2f us   speedup of split-KV %.2fx\n"
                "cache stream  %10.1f GB/s  (one CTA: %.1f GB/s by latency)\n",
                e.gpu.c_str(), e.problem.c_str(), (long long)e.num_splits,
                e.splits_from_heuristic ? "flash-attn's heuristic" : "given", (long long)e.heuristic_splits,
                (long long)e.ctas, (long long)e.slots, (long long)e.block_m, (long long)e.block_n,
                e.gqa_packed ? ", GQA heads packed in the rows" : "", mb(e.cache_bytes), mb(e.q_bytes + e.append_bytes),
                mb(e.partial_write_bytes), mb(e.combine_read_bytes), mb(e.out_write_bytes), e.time_s * 1e6,
                e.t_split_s * 1e6, e.t_combine_s * 1e6, e.t_launch_s * 1e6, e.bound.c_str(), e.time_no_split_s * 1e6,
                e.speedup_vs_no_split, e.cache_bandwidth / 1e9, e.cta_bytes_per_s / 1e9);
  return buf;
}

}  // namespace flashlab::sim
