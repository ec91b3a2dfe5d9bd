// flashlab step: walk the tiles of a small problem in the terminal.
#include <iostream>
#include <memory>

#include "check.hpp"
#include "commands.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "problem_flags.hpp"
#include "render.hpp"

namespace flashlab::cli {

void add_step(CLI::App& app) {
  struct Opts {
    ProblemFlags flags;
    WalkFlags walk{"fa2", 16, 16};
    int64_t non_interactive = -1;
  };
  auto opts = std::make_shared<Opts>();
  opts->flags.default_seqlen = 64;
  opts->flags.hdim = 16;
  auto* cmd = app.add_subcommand("step", "walk through the tiles of a small problem: SRAM contents, S_ij, per-row "
                                         "m, l and alpha, bytes moved. Enter: next tile, b: back, q: quit");
  cmd->footer("Example: flashlab step --seqlen 64 --hdim 16 --causal --order fa1 --non-interactive 3");
  opts->flags.add_to(*cmd, false);
  opts->walk.add_to(*cmd);
  cmd->add_option("--non-interactive", opts->non_interactive, "print this many steps and exit");
  cmd->callback([opts] {
    const auto [p, order, tiling, in] = walk_setup(opts->flags, opts->walk);
    const std::unique_ptr<tiled::Stepper> st = tiled::make_stepper(p, in.q, in.k, in.v, in.d_o, tiling, order);
    const tiled::Schedule& s = st->schedule();
    std::cout << "problem: " << p.describe() << "\n" << tiling.describe() << ": Tr=" << s.Tr() << " Q blocks x Tc="
              << s.Tc() << " K/V blocks, " << s.tiles_skipped() << " of " << s.steps()
              << " tiles skipped by the mask; walking batch 0, head 0\n";
    for (const auto& e : st->prologue_events())
      std::cout << "prologue: " << (e.transfer.store ? "store " : "load ") << tiled::to_string(e.transfer.tensor)
                << " (" << e.transfer.bytes << " B)\n";
    if (opts->non_interactive >= 0) {
      for (int64_t n = 0; n < opts->non_interactive && st->next_tile(); ++n)
        std::cout << "\n" << render_step(p, *st);
      std::cout << "\n" << render_grid(*st);
      return;
    }
    std::cout << "Enter: next tile   b: back   q: quit\n";
    std::string line;
    while (std::cout << "> " << std::flush, std::getline(std::cin, line)) {
      if (line == "q") break;
      const bool moved = line == "b" ? st->prev_tile() : st->next_tile();
      if (!moved) {
        std::cout << (line == "b" ? "at the first step\n" : "done: every tile visited\n");
        continue;
      }
      std::cout << render_grid(*st) << render_step(p, *st);
    }
  });
}

}  // namespace flashlab::cli
