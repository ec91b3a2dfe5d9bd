// flashlab trace: the executor's event stream as JSON lines or CSV.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "check.hpp"
#include "commands.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "problem_flags.hpp"
#include "trace_writer.hpp"

namespace flashlab::cli {

void add_trace(CLI::App& app) {
  struct Opts {
    ProblemFlags flags;
    std::string format = "jsonl", out;
    WalkFlags walk;
  };
  auto opts = std::make_shared<Opts>();
  opts->flags.default_seqlen = 128;
  auto* cmd = app.add_subcommand("trace", "print the tiled executor's event stream (transfers, tiles, per-row "
                                          "statistics) as JSON lines or CSV");
  cmd->footer("Example: flashlab trace --seqlen 256 --causal --format csv --out trace.csv");
  opts->flags.add_to(*cmd, false);
  cmd->add_option("--format", opts->format, "jsonl | csv")->capture_default_str()->check(CLI::IsMember({"jsonl", "csv"}));
  opts->walk.add_to(*cmd);
  cmd->add_option("--out", opts->out, "file to write (default: standard output)");
  cmd->callback([opts] {
    const auto [p, order, tiling, in] = walk_setup(opts->flags, opts->walk);
    const std::string tmp = opts->out + ".tmp";
    std::ofstream file;
    if (!opts->out.empty()) {
      file.open(tmp);
      if (!file) throw Error("cannot write '" + opts->out + "'");
    }
    std::ostream& out = opts->out.empty() ? std::cout : file;
    try {
      tiled::TraceWriter writer(out, opts->format == "csv" ? tiled::TraceWriter::Format::csv
                                                                  : tiled::TraceWriter::Format::jsonl);
      tiled::run_order(p, in.q, in.k, in.v, in.d_o, tiling, order, &writer);
    } catch (...) {
      if (!opts->out.empty()) std::filesystem::remove(tmp);
      throw;
    }
    if (!opts->out.empty()) {
      file.close();
      std::filesystem::rename(tmp, opts->out);
    }
  });
}

}  // namespace flashlab::cli
