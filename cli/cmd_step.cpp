// flashlab step: walk the tiles of a small problem in the terminal.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "check.hpp"
#include "commands.hpp"
#include "decode_check.hpp"
#include "decode_executor.hpp"
#include "decode_flags.hpp"
#include "flashlab/format.hpp"
#include "stepper.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "problem_flags.hpp"
#include "render.hpp"

namespace flashlab::cli {
namespace {

// Keeps the events of (batch 0, head 0): the walk `step --decode` shows.
class FirstHead : public tiled::Recorder {
 public:
  void on_transfer(const tiled::Where& w, const tiled::Transfer& t) override { if (mine(w)) Recorder::on_transfer(w, t); }
  void on_tile_begin(const tiled::Where& w, const tiled::TileStep& s) override { if (mine(w)) Recorder::on_tile_begin(w, s); }
  void on_skip(const tiled::Where& w, const tiled::TileStep& s) override { if (mine(w)) Recorder::on_skip(w, s); }
  void on_row_stats(const tiled::Where& w, const tiled::TileStep& s, const std::vector<tiled::RowStat>& r) override {
    if (mine(w)) Recorder::on_row_stats(w, s, r);
  }
  void on_combine(const tiled::Where& w, const tiled::TileStep& s, const tiled::Tile& l, const tiled::Tile& o) override {
    if (mine(w)) Recorder::on_combine(w, s, l, o);
  }
 private:
  static bool mine(const tiled::Where& w) { return w.b == 0 && w.h == 0; }
};

std::string num(float x) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

// One step of the split-KV walk, from its recorded events, as text.
std::string render_decode_step(const DecodeProblem& d, const std::vector<const tiled::Event*>& events) {
  std::ostringstream out;
  const tiled::Event& first = *events.front();
  const tiled::TileStep& t = first.step;
  if (t.j < 0) {
    out << "step " << first.where.step << "  combine of Q block " << t.i << " (rows " << t.row0 << ".."
        << t.row0 + t.rows - 1 << "): LSE_i = log sum_s exp(LSE_i^(s)), O_i = sum_s exp(LSE_i^(s) - LSE_i) O_i^(s)\n";
  } else {
    out << "step " << first.where.step << "  split " << first.where.split << "  Q block " << t.i << " x K/V block "
        << t.j << " (" << tiled::to_string(t.kind) << "), keys " << t.col0 << ".." << t.col0 + t.cols - 1;
    if (d.paged() && t.cols > 0) {  // the physical pages those keys live in, through the block table
      out << " in pages";
      for (int64_t j = t.col0; j < t.col0 + t.cols; j += d.page_size - j % d.page_size)
        out << " " << d.cache_row(0, j) / d.page_size;
    }
    out << "\n";
  }
  for (const tiled::Event* e : events) {
    switch (e->kind) {
      case tiled::Event::Kind::transfer:
        out << "  " << (e->transfer.store ? "store " : "load  ") << tiled::to_string(e->transfer.tensor) << " rows "
            << e->transfer.row0 << ".." << e->transfer.row0 + e->transfer.rows - 1 << " (" << e->transfer.bytes
            << " B)\n";
        break;
      case tiled::Event::Kind::skip: out << "  nothing visible in this split: O^(s) = 0, LSE^(s) = -inf\n"; break;
      case tiled::Event::Kind::row_stats:
        for (const auto& r : e->rows)
          out << "  row " << r.row << ": m " << num(r.m_old) << " -> " << num(r.m_new) << ", l " << num(r.l_old)
              << " -> " << num(r.l_new) << ", alpha " << num(r.alpha) << "\n";
        break;
      case tiled::Event::Kind::combine:
        for (int64_t r = 0; r < e->a.rows(); ++r) {
          out << "  row " << t.row0 + r << ": LSE per split [";
          for (int64_t c = 0; c < e->a.cols(); ++c) out << (c ? ", " : "") << num(e->a(r, c));
          out << "]\n";
        }
        break;
      default: break;
    }
  }
  return out.str();
}

// step --decode: the split-KV walk of (batch 0, head 0), recorded once, then shown a step at a time.
void step_decode(const DecodeProblem& d, const tiled::Tiling& tiling, uint64_t seed, int64_t non_interactive) {
  FirstHead rec;
  tiled::decode(d, harness::random_decode_inputs(d, seed), tiling, &rec);
  const tiled::SplitSchedule sched(d, 0, tiling);
  std::cout << "problem: " << d.describe() << "\n" << tiling.describe() << ": " << sched.tiles().Tc()
            << " K/V blocks in " << sched.splits() << " splits of " << sched.blocks_per_split() << ", "
            << sched.steps() << " steps" << (sched.combines() ? " (the last Tr combine the splits)" : "")
            << "; walking batch 0, head 0\n";
  std::vector<std::vector<const tiled::Event*>> steps;
  for (const auto& e : rec.events) {
    if (e.where.step < 0) {
      std::cout << "prologue (append): " << (e.transfer.store ? "store " : "load ") << tiled::to_string(e.transfer.tensor)
                << " rows " << e.transfer.row0 << ".." << e.transfer.row0 + e.transfer.rows - 1 << "\n";
      continue;
    }
    if (steps.empty() || steps.back().front()->where.step != e.where.step) steps.emplace_back();
    steps.back().push_back(&e);
  }
  if (non_interactive >= 0) {
    for (int64_t n = 0; n < non_interactive && n < static_cast<int64_t>(steps.size()); ++n)
      std::cout << "\n" << render_decode_step(d, steps[n]);
    return;
  }
  std::cout << "Enter: next step   b: back   q: quit\n";
  int64_t at = -1;
  std::string line;
  while (std::cout << "> " << std::flush, std::getline(std::cin, line)) {
    if (line == "q") break;
    const int64_t next = line == "b" ? at - 1 : at + 1;
    if (next < 0 || next >= static_cast<int64_t>(steps.size())) {
      std::cout << (line == "b" ? "at the first step\n" : "done: every step visited\n");
      continue;
    }
    at = next;
    std::cout << render_decode_step(d, steps[at]);
  }
}

}  // namespace

void add_step(CLI::App& app) {
  struct Opts {
    ProblemFlags flags;
    WalkFlags walk{"fa2", 16, 16};
    DecodeFlags decode;
    int64_t non_interactive = -1;
  };
  auto opts = std::make_shared<Opts>();
  opts->flags.default_seqlen = 64;
  opts->flags.hdim = 16;
  auto* cmd = app.add_subcommand("step", "walk through the tiles of a small problem: SRAM contents, S_ij, per-row "
                                         "m, l and alpha, bytes moved. Enter: next tile, b: back, q: quit");
  cmd->footer("Example: flashlab step --seqlen 64 --hdim 16 --causal --order fa1 --non-interactive 3\n"
              "Decoding: flashlab step --decode --cache-seqlens 40 --append 1 --num-splits 3 --non-interactive 5");
  opts->flags.add_to(*cmd, false);
  opts->walk.add_to(*cmd);
  opts->decode.add_to(*cmd);
  cmd->add_option("--non-interactive", opts->non_interactive, "print this many steps and exit");
  cmd->callback([opts] {
    if (opts->decode.decode) {
      step_decode(opts->decode.problem(opts->flags), opts->walk.tiling(), opts->flags.seed, opts->non_interactive);
      return;
    }
    const auto [p, order, tiling, in] = walk_setup(opts->flags, opts->walk);
    const std::unique_ptr<tiled::Stepper> st = tiled::make_stepper(p, in.q, in.k, in.v, in.d_o, tiling, order);
    const tiled::Schedule& s = st->schedule();
    std::cout << "problem: " << p.describe() << "\n" << tiling.describe() << ": Tr=" << s.Tr() << " Q blocks x Tc="
              << s.Tc() << " K/V blocks, " << s.tiles_skipped() << " of " << s.steps()
              << " tiles skipped by the mask (block mask density " << format_number(s.block_mask().density(), 3)
              << "); walking batch 0, head 0\n";
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
