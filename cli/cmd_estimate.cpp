// flashlab estimate: the simulator's IO and roofline model for a problem on a GPU,
// at one sequence length or over a sweep.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>

#include "commands.hpp"
#include "decode.hpp"
#include "decode_flags.hpp"
#include "flashlab/error.hpp"
#include "flashlab/parallel.hpp"
#include "gpu_spec.hpp"
#include "problem_flags.hpp"
#include "plot.hpp"
#include "report.hpp"
#include "timeline.hpp"

#include <filesystem>
#include <fstream>

namespace flashlab::cli {
namespace {

// "4096", "512:65536:x2" (multiply) or "128:131072:+128" (add).
std::vector<int64_t> parse_seqlens(const std::string& spec) {
  auto number = [&](const std::string& s) {
    try {
      size_t used = 0;
      const long long v = std::stoll(s, &used);
      if (used != s.size() || v <= 0) throw std::invalid_argument("bad");
      return static_cast<int64_t>(v);
    } catch (const std::exception&) {
      throw Error("--seqlen: '" + s + "' is not a positive integer (expected N, A:B:xK or A:B:+K)");
    }
  };
  const auto c1 = spec.find(':');
  if (c1 == std::string::npos) return {number(spec)};
  const auto c2 = spec.find(':', c1 + 1);
  if (c2 == std::string::npos || c2 + 2 > spec.size() || (spec[c2 + 1] != 'x' && spec[c2 + 1] != '+'))
    throw Error("--seqlen range '" + spec + "' must be A:B:xK (multiply) or A:B:+K (add)");
  const int64_t from = number(spec.substr(0, c1)), to = number(spec.substr(c1 + 1, c2 - c1 - 1));
  const int64_t step = number(spec.substr(c2 + 2));
  const bool multiply = spec[c2 + 1] == 'x';
  if (multiply && step < 2) throw Error("--seqlen range: the factor must be at least 2");
  std::vector<int64_t> out;
  for (int64_t s = from; s <= to; s = multiply ? s * step : s + step) {
    out.push_back(s);
    if (out.size() > 100000) throw Error("--seqlen range '" + spec + "' has more than 100000 points");
  }
  if (out.empty()) throw Error("--seqlen range '" + spec + "' is empty");
  return out;
}

// Writes `text` whole to a temporary name and moves it into place; on failure nothing is left behind.
void write_whole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (out) {
      out.close();
      if (out) {
        std::filesystem::rename(tmp, path);
        return;
      }
    }
  }
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);
  throw Error("cannot write '" + path + "'");
}

}  // namespace

void add_estimate(CLI::App& app) {
  struct Opts {
    ProblemFlags flags;
    DecodeFlags decode;
    std::string seqlen = "4096", gpu = "h100-sxm", gpu_file, algo = "all", format = "table", plot, timeline,
                impl = "upstream", l2_replacement = "random";
    std::vector<std::string> overrides;
    int64_t block_m = 0, block_n = 0;
    bool list = false, fused_scale = false, fp8 = false, deterministic = false;
  };
  auto opts = std::make_shared<Opts>();
  opts->flags.dtype = "bf16";
  opts->decode.num_splits = 0;  // estimate --decode: flash-attn's heuristic unless given
  auto* cmd = app.add_subcommand("estimate", "predict FLOPs, HBM/L2/SRAM traffic, time and speedup of standard, FA1, "
                                             "FA2 and FA3 attention on a GPU (IO + roofline + L2 cache model)");
  cmd->footer("Example: flashlab estimate --gpu a100-40gb --batch 64 --heads 16 --seqlen 1024 --hdim 64 --dtype fp16 "
              "--pass fwd+bwd --algo all\n         flashlab estimate --gpu h100-sxm --seqlen 512:65536:x2 --algo fa2 "
              "--format csv\n"
              "Decoding: flashlab estimate --decode --batch 1 --heads 32 --kv-heads 8 --hdim 128 --cache-len 65536 "
              "[--num-splits N | 0: flash-attn's heuristic] [--page-size 256]");
  opts->flags.add_to(*cmd, true, false);
  opts->decode.add_to(*cmd);
  cmd->add_option("--seqlen", opts->seqlen, "N, or a sweep A:B:xK (multiply) / A:B:+K (add)")->capture_default_str();
  cmd->add_option("--gpu", opts->gpu, "preset name (see --list-gpus)")->capture_default_str();
  cmd->add_option("--gpu-file", opts->gpu_file, "a GPU description of your own (JSON, the presets' schema)");
  cmd->add_option("--set", opts->overrides, "override a preset field: field=value (e.g. l2_bytes=4e7)");
  cmd->add_option("--algo", opts->algo, "standard | math | fa1 | fa2 | fa3 | all (all: standard, fa1, fa2 and, where the GPU has wgmma, fa3)")->capture_default_str();
  cmd->add_option("--impl", opts->impl, "whose kernel: upstream (flash-attn 2/3, SDPA flash) | flashlab (fa2: gpu/fa2_fwd.cu; fa3: "
                                        "gpu/fa3/, forward and backward; --decode: gpu/decode/) | cudnn (fa3: cuDNN's "
                                        "Hopper kernel)")
      ->capture_default_str();
  cmd->add_option("--l2-replacement", opts->l2_replacement,
                  "how the simulated L2 evicts: random (the model's, from the H100's measured behaviour) | lru")
      ->capture_default_str()
      ->check(CLI::IsMember({"random", "lru"}));
  cmd->add_option("--block-m", opts->block_m, "Br of the forward kernel (default: the algorithm's)");
  cmd->add_option("--block-n", opts->block_n, "Bc of the forward kernel (default: the algorithm's)");
  cmd->add_option("--format", opts->format, "table | json | csv")->capture_default_str()->check(
      CLI::IsMember({"table", "json", "csv"}));
  cmd->add_flag("--fused-scale", opts->fused_scale, "standard: scale folded into the GEMM (no separate pass over S)");
  cmd->add_flag("--fp8", opts->fp8, "fa3 (--impl flashlab, --pass fwd): flashlab's FP8 forward, e4m3 Q, K, V and bf16 O "
                "at the FP8 tensor rate, its V transpose included (GPUs with wgmma and FP8 tensor cores)");
  cmd->add_flag("--deterministic", opts->deterministic,
                "the backward with dQ summed in a fixed order, no atomics (--impl flashlab: fa2's dK/dV and dQ kernels, "
                "fa3's dQ turns); `all` leaves fa1 out");
  cmd->add_flag("--list-gpus", opts->list, "list the GPU presets and exit");
  cmd->add_option("--plot", opts->plot, "also write an SVG: the roofline with a point per algorithm and the "
                                        "speedup-vs-seqlen curve");
  cmd->add_option("--timeline", opts->timeline, "also write the replayed CTA timeline of each fused kernel: FILE.svg "
                                                "(slots x time, coloured by head, with each CTA's L2 misses) or FILE.json");
  cmd->callback([opts, cmd] {
    if (opts->list) {
      for (const auto& name : sim::list_presets()) {
        const sim::GpuSpec g = sim::load_gpu(name);
        std::printf("%-10s %s\n", name.c_str(), g.display_name.c_str());
      }
      return;
    }
    const sim::GpuSpec gpu = opts->gpu_file.empty() ? sim::load_gpu(opts->gpu, false, opts->overrides)
                                                    : sim::load_gpu(opts->gpu_file, true, opts->overrides);
    if (opts->decode.decode) {  // one decode step (simulator/decode.hpp); the attention flags below do not apply
      const sim::DecodeEstimate e =
          sim::estimate_decode(opts->decode.problem(opts->flags, true), gpu, sim::parse_impl(opts->impl));
      std::cout << (opts->format == "json" ? sim::to_json(e) : opts->format == "csv" ? sim::to_csv(e) : sim::to_table(e));
      return;
    }
    std::string note;  // why `all` left an algorithm out
    auto algos = sim::parse_algos(opts->algo, &gpu, &note);
    const Pass pass = opts->flags.parsed_pass();
    for (const auto& [flag, rows] : {std::pair{"--block-m", opts->block_m}, std::pair{"--block-n", opts->block_n}})
      if (cmd->count(flag) && rows <= 0)
        throw Error(std::string(flag) + ": " + std::to_string(rows) + " is not a positive tile size");
    sim::Options options;
    options.block_m = opts->block_m;
    options.block_n = opts->block_n;
    options.standard_scale_pass = !opts->fused_scale;
    options.impl = sim::parse_impl(opts->impl);
    sim::leave_out_unbuilt(algos, opts->algo, options.impl, pass != Pass::fwd, opts->flags.hdim, &note);
    options.l2_replacement = opts->l2_replacement == "lru" ? sim::Replacement::lru : sim::Replacement::random;
    options.fp8 = opts->fp8;
    options.deterministic = opts->deterministic;
    if (opts->deterministic && opts->algo == "all" && std::erase(algos, sim::Algo::fa1) > 0)
      note += std::string(note.empty() ? "" : "; ") + "fa1 left out: --deterministic models flashlab's fa2 and fa3";
    for (sim::Algo a : algos) {
      if (const std::string why = sim::fp8_unavailable(gpu, a, pass, options); !why.empty()) throw Error(why);
      if (const std::string why = sim::deterministic_unavailable(gpu, a, pass, options); !why.empty()) throw Error(why);
    }
    std::vector<sim::Estimate> all;
    const auto seqlens = parse_seqlens(opts->seqlen);
    std::vector<sim::KernelTimeline> timeline;
    const auto ends_with = [](const std::string& s, const std::string& tail) {
      return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
    };
    if (!opts->timeline.empty()) {
      if (seqlens.size() != 1) throw Error("--timeline draws one problem: give a single --seqlen, not a sweep");
      if (!ends_with(opts->timeline, ".svg") && !ends_with(opts->timeline, ".json"))
        throw Error("--timeline '" + opts->timeline + "': the file must end in .svg or .json");
      options.timeline = &timeline;
    }
    // A sweep's points are independent: estimated on every core, reported in order.
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<sim::Estimate>> points(seqlens.size());
    std::atomic<size_t> done = 0;
    std::mutex progress;
    parallel_for(int64_t(seqlens.size()), [&](int64_t n) {
      ProblemFlags f = opts->flags;
      f.seqlen = seqlens[size_t(n)];
      points[size_t(n)] = sim::estimate_all(f.problem(), gpu, algos, pass, options);
      if (const size_t k = ++done; seqlens.size() > 200 && k % 200 == 0) {
        const std::lock_guard<std::mutex> lock(progress);
        std::cerr << "estimate: " << k << "/" << seqlens.size() << " points\n";
      }
    });
    for (const auto& rows : points) all.insert(all.end(), rows.begin(), rows.end());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!opts->plot.empty()) write_whole(opts->plot, sim::plot_svg(gpu, parse_dtype(opts->flags.dtype), all));
    if (!opts->timeline.empty()) {
      ProblemFlags f = opts->flags;
      f.seqlen = seqlens.front();
      const std::string title = gpu.display_name + ": " + f.problem().describe() + ", pass " + to_string(pass);
      write_whole(opts->timeline, ends_with(opts->timeline, ".svg") ? sim::timeline_svg(timeline, title)
                                                                    : sim::timeline_json(timeline, title));
    }
    if (opts->format == "json") std::cout << sim::to_json(all);
    else if (opts->format == "csv") std::cout << sim::to_csv(all);
    else {
      ProblemFlags first = opts->flags;
      first.seqlen = seqlens.front();
      std::cout << gpu.display_name << ": " << first.problem().describe() << (seqlens.size() > 1 ? " (first point)" : "")
                << ", pass " << to_string(pass) << "\n"
                << sim::to_table(all);
      if (!note.empty()) std::cout << "note: " << note << "\n";
      const Problem p = first.problem();
      if (p.mask.kind != MaskKind::none)  // what the mask saves: the skipped tiles are neither loaded nor computed
        for (const sim::Estimate& e : all)
          if (e.block_m > 0 && e.seqlen_q == p.seqlen_q)
            std::printf("%s: block mask density %.4f at %lldx%lld tiles (batch entry 0): its FLOPs at these tiles are the unmasked "
                        "ones times this\n",
                        e.algo.c_str(), tiled::BlockMask(p, 0, {e.block_m, e.block_n}).density(),
                        static_cast<long long>(e.block_m), static_cast<long long>(e.block_n));
      std::printf("(%zu estimates in %.2f ms on %d threads)\n", all.size(), ms, std::min(parallel_threads(), int(seqlens.size())));
    }
  });
}

}  // namespace flashlab::cli
