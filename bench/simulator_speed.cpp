// How long the simulator takes: one estimate at seqlen 64k (16 heads, d = 128, causal, forward and
// forward + backward), and a 1000-point sweep (seqlen 128 .. 128000, step 128) of FA2's forward and of
// its forward + backward, on one core and on every core (as `flashlab estimate --seqlen A:B:+K` sweeps).
// Prints a table and, with --json FILE, writes the same figures as JSON.
// The targets: one 64k estimate under 50 ms, a 1000-point sweep under 10 s.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "flashlab/parallel.hpp"
#include "flashlab/problem.hpp"
#include "gpu_spec.hpp"
#include "model.hpp"

using namespace flashlab;

namespace {
double seconds_of(const auto& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  const sim::GpuSpec gpu = sim::load_gpu("h100-sxm");
  Problem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 16;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.causal = true;
  struct Row {
    std::string what;
    double seconds, target;
  };
  std::vector<Row> rows;
  for (Pass pass : {Pass::fwd, Pass::fwd_bwd}) {
    p.seqlen_q = p.seqlen_k = 65536;
    double best = 1e9;
    for (int rep = 0; rep < 5; ++rep) best = std::min(best, seconds_of([&] { sim::estimate(p, gpu, sim::Algo::fa2, pass); }));
    rows.push_back({"one fa2 estimate, seqlen 65536, " + to_string(pass) + " (best of 5)", best, 0.05});
  }
  for (Pass pass : {Pass::fwd, Pass::fwd_bwd}) {
    const double s = seconds_of([&] {
      for (int n = 1; n <= 1000; ++n) {
        p.seqlen_q = p.seqlen_k = 128 * n;
        sim::estimate(p, gpu, sim::Algo::fa2, pass);
      }
    });
    rows.push_back({"1000 fa2 estimates, seqlen 128..128000, " + to_string(pass), s, 10.0});
  }
  for (Pass pass : {Pass::fwd, Pass::fwd_bwd}) {
    const double s = seconds_of([&] {
      parallel_for(1000, [&](int64_t n) {
        Problem q = p;
        q.seqlen_q = q.seqlen_k = 128 * (n + 1);
        sim::estimate(q, gpu, sim::Algo::fa2, pass);
      });
    });
    rows.push_back({"the same, " + to_string(pass) + ", on " + std::to_string(parallel_threads()) + " threads", s, 10.0});
  }
  std::printf("%-60s %12s %10s\n", "case (h100-sxm, batch 1, 16 heads, d 128, causal)", "seconds", "target");
  for (const Row& r : rows) std::printf("%-60s %12.4f %9.3gs %s\n", r.what.c_str(), r.seconds, r.target, r.seconds < r.target ? "ok" : "MISSED");
  if (argc == 3 && std::string(argv[1]) == "--json") {
    std::ofstream out(argv[2]);
    out << "[\n";
    for (size_t i = 0; i < rows.size(); ++i)
      out << "  {\"case\": \"" << rows[i].what << "\", \"seconds\": " << rows[i].seconds << ", \"target_s\": " << rows[i].target
          << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
    out << "]\n";
  }
  return 0;
}
