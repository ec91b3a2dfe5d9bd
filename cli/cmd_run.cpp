// flashlab run: one implementation on .npy or seeded random inputs, outputs to .npy.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "check.hpp"
#include "commands.hpp"
#include "flashlab/error.hpp"
#include "flashlab/npy.hpp"
#include "problem_flags.hpp"

namespace flashlab::cli {
namespace {

// The process's peak resident set size (VmHWM), in MiB; -1 where /proc is missing.
long peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long kib = 0;
  while (status >> key) {
    if (key == "VmHWM:" && status >> kib) return kib / 1024;
    status.ignore(4096, '\n');
  }
  return -1;
}

}  // namespace

void add_run(CLI::App& app) {
  struct Opts {
    ProblemFlags flags;
    std::string impl = "tiled-fa2", q, k, v, d_o, out = ".";
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "compute O and LSE (and dQ, dK, dV with --pass bwd) with one implementation "
                                        "and write them as .npy");
  cmd->footer("Inputs are (batch, seqlen, heads, head_dim) as flash_attn_func takes them; without --q/--k/--v they are "
              "seeded random.\nExample: flashlab run --impl tiled-fa2 --seqlen 4096 --hdim 64 --causal --out results/");
  opts->flags.add_to(*cmd);
  cmd->add_option("--impl", opts->impl, "implementation: " + harness::implementation_names())->capture_default_str();
  cmd->add_option("--q", opts->q, ".npy file of Q");
  cmd->add_option("--k", opts->k, ".npy file of K");
  cmd->add_option("--v", opts->v, ".npy file of V");
  cmd->add_option("--do", opts->d_o, ".npy file of dO (backward; default: seeded random)");
  cmd->add_option("--out", opts->out, "directory for o.npy, lse.npy (and dq.npy, dk.npy, dv.npy)")->capture_default_str();
  cmd->callback([opts] {
    const harness::Implementation& impl = harness::find_implementation(opts->impl);
    ProblemFlags flags = opts->flags;
    const bool from_files = !opts->q.empty() || !opts->k.empty() || !opts->v.empty();
    Tensor q, k, v;
    if (from_files) {
      if (opts->q.empty() || opts->k.empty() || opts->v.empty()) throw Error("--q, --k and --v go together");
      q = read_npy(opts->q);
      k = read_npy(opts->k);
      v = read_npy(opts->v);
      if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4)
        throw Error("Q, K and V must be 4-D (batch, seqlen, heads, head_dim); got Q " + shape_string(q.shape) +
                    ", K " + shape_string(k.shape) + ", V " + shape_string(v.shape));
      flags.batch = q.shape[0];
      flags.seqlen_q = q.shape[1];
      flags.heads = q.shape[2];
      flags.hdim = q.shape[3];
      flags.seqlen_k = k.shape[1];
      flags.kv_heads = k.shape[2];
    }
    const Problem p = flags.problem();
    if (from_files) {
      if (k.shape != p.k_shape() || v.shape[0] != p.batch || v.shape[1] != p.seqlen_k || v.shape[2] != p.heads_kv ||
          v.shape[3] != p.head_dim)
        throw Error("K " + shape_string(k.shape) + " and V " + shape_string(v.shape) + " do not match Q " +
                    shape_string(q.shape) + ": expected K and V of shape " + shape_string(p.k_shape()));
      for (Tensor* t : {&q, &k, &v})
        for (float& x : t->data) x = round_to(p.dtype, x);
    }
    const std::string why = impl.unsupported(p);
    if (!why.empty()) throw Error(impl.name + " cannot run this problem: " + (why.rfind("skipped: ", 0) == 0 ? why.substr(9) : why));
    harness::Inputs in = from_files ? harness::Inputs{q, k, v, {}} : harness::random_inputs(p, p.seed);
    const harness::Pass pass = flags.parsed_pass();
    if (harness::has_bwd(pass)) {
      if (!opts->d_o.empty()) {
        in.d_o = read_npy(opts->d_o);
        if (in.d_o.shape != p.o_shape())
          throw Error("dO has shape " + shape_string(in.d_o.shape) + ", expected " + shape_string(p.o_shape()));
      } else if (in.d_o.empty()) {
        in.d_o = harness::random_inputs(p, p.seed + 1).d_o;
      }
    }
    std::cerr << "flashlab run: " << impl.name << " on " << p.describe() << "\n";
    // Compute everything first; only then write, so a failure leaves no partial output.
    std::vector<std::pair<std::string, Tensor>> outputs;
    harness::ForwardOut f = impl.forward(p, in.q, in.k, in.v);
    if (harness::has_bwd(pass)) {
      harness::BackwardOut g = impl.backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o);
      outputs.emplace_back("dq.npy", std::move(g.dq));
      outputs.emplace_back("dk.npy", std::move(g.dk));
      outputs.emplace_back("dv.npy", std::move(g.dv));
    }
    outputs.emplace_back("o.npy", std::move(f.o));
    outputs.emplace_back("lse.npy", std::move(f.lse));
    std::error_code ec;
    std::filesystem::create_directories(opts->out, ec);
    if (ec) throw Error("cannot create output directory '" + opts->out + "': " + ec.message());
    std::vector<std::string> written;
    try {
      for (const auto& [name, t] : outputs) {
        const std::string path = (std::filesystem::path(opts->out) / name).string();
        write_npy(path, t, p.dtype == DType::fp16 && name != "lse.npy" ? NpyType::f16 : NpyType::f32);
        written.push_back(path);
      }
    } catch (...) {
      for (const auto& path : written) std::filesystem::remove(path, ec);
      throw;
    }
    for (const auto& path : written) std::cout << path << "\n";
    std::cerr << "flashlab run: peak resident memory " << peak_rss_mib() << " MiB\n";
  });
}

}  // namespace flashlab::cli
