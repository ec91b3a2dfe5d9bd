// flashlab tour: the main job. A short guided run a newcomer can follow:
// every implementation checked, the first tiles stepped through with their
// numbers, and the bytes moved against standard attention.
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "executor.hpp"
#include "problem_flags.hpp"
#include "render.hpp"

namespace flashlab::cli {

void add_tour(CLI::App& app) {
  auto flags = std::make_shared<ProblemFlags>();
  flags->heads = 4;
  flags->default_seqlen = 512;
  flags->causal = false;
  flags->dtype = "bf16";
  flags->pass = "fwd+bwd";
  auto* cmd = app.add_subcommand("tour", "a guided run: check every implementation, step through the first tiles, "
                                         "compare the bytes moved with standard attention");
  cmd->footer("Example: flashlab tour            (or with any problem flags: flashlab tour --seqlen 1024 --causal)");
  flags->add_to(*cmd);
  cmd->callback([flags] {
    const Problem p = flags->problem();
    std::cout << "flashlab tour: FlashAttention computes exact attention softmax(Q K^T / sqrt(d)) V without writing\n"
                 "the N x N score matrix to memory. It walks Q, K and V in tiles, keeps a running row max m and sum l\n"
                 "(online softmax), and rescales the partial output by alpha = exp(m_old - m_new) as tiles arrive.\n\n";

    std::cout << "== 1. Same answer: every implementation against an fp64 oracle ==\n";
    const bool ok = run_check(p, flags->parsed_pass(), p.seed, 1.0, false);

    std::cout << "\n== 2. Inside the tiles: FA2 order, first steps of batch 0, head 0 ==\n";
    const tiled::Tiling small{64, 64};
    const harness::Inputs in = harness::random_inputs(p, p.seed);
    tiled::Stepper st(p, in.q, in.k, in.v, small, tiled::Order::fa2);
    std::cout << "Q is cut into Tr = " << st.schedule().Tr() << " blocks of Br = " << small.Br << " rows, K and V into Tc = "
              << st.schedule().Tc() << " blocks of Bc = " << small.Bc << ".\n";
    int64_t rescaled = 0, rows = 0;
    for (int n = 0; n < 2 && st.next_tile(); ++n) std::cout << "\n" << render_step(p, st, 4, 6);
    for (const auto& e : st.tile_events())
      for (const auto& r : e.rows) rows += 1, rescaled += r.alpha < 1.0f;
    std::cout << "\nalpha = 1 where a tile left a row's max unchanged; where it raised the max, alpha < 1 shrinks the\n"
                 "old partial sums to the new scale (in step 2: "
              << rescaled << " of " << rows << " rows), so no second pass over a row is ever needed.\n";

    std::cout << "\n== 3. What tiling buys: HBM traffic of the whole forward pass ==\n";
    std::printf("%-28s %14s %14s %10s\n", "algorithm", "read MiB", "written MiB", "vs standard");
    int64_t naive_total = 0;
    int64_t naive_r = 0, naive_w = 0;
    for (int64_t b = 0; b < p.batch; ++b) {
      const auto nb = tiled::naive_bytes(p, b);
      naive_r += nb.read * p.heads_q;
      naive_w += nb.write * p.heads_q;
    }
    naive_total = naive_r + naive_w;
    std::printf("%-28s %14.2f %14.2f %10s\n", "standard (S, P in HBM)", naive_r / 1048576.0, naive_w / 1048576.0, "1.00x");
    for (tiled::Order order : {tiled::Order::fa1, tiled::Order::fa2}) {
      tiled::ByteCounter counter;
      tiled::forward(p, in.q, in.k, in.v, tiled::kCpuDefault, order, &counter);
      const double total = counter.counts.total_load() + counter.counts.total_store();
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2fx less", naive_total / total);
      std::printf("%-28s %14.2f %14.2f %10s\n", (tiled::to_string(order) + " (" + tiled::kCpuDefault.describe() + ")").c_str(),
                  counter.counts.total_load() / 1048576.0, counter.counts.total_store() / 1048576.0, ratio);
    }
    std::cout << "\nThe tiled counts are the tiled executor's own events for this run; standard is Algorithm 0 of\n"
                 "the FlashAttention paper (S and P written and read back). Next: `flashlab step` to walk tiles\n"
                 "yourself, `flashlab viz` to watch them, `flashlab estimate --gpu h100-sxm` for what this buys on a\n"
                 "real GPU, `flashlab check --help` for any problem, `flashlab trace` for the event stream.\n";
    if (!ok) throw CLI::RuntimeError(2);
  });
}

}  // namespace flashlab::cli
