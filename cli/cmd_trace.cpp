// flashlab trace: the executor's event stream as JSON lines or CSV.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "check.hpp"
#include "commands.hpp"
#include "decode_check.hpp"
#include "decode_executor.hpp"
#include "decode_flags.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "problem_flags.hpp"
#include "trace_writer.hpp"

namespace flashlab::cli {

void add_trace(CLI::App& app) {
  struct Opts {
    ProblemFlags flags;
    DecodeFlags decode;
    std::string format = "jsonl", out;
    WalkFlags walk;
  };
  auto opts = std::make_shared<Opts>();
  opts->flags.default_seqlen = 128;
  auto* cmd = app.add_subcommand("trace", "print the tiled executor's event stream (transfers, tiles, per-row "
                                          "statistics) as JSON lines or CSV");
  cmd->footer("Example: flashlab trace --seqlen 256 --causal --format csv --out trace.csv\n"
              "Decoding: flashlab trace --decode --cache-seqlens 40 --num-splits 3 --bc 16 (each event names its split)");
  opts->flags.add_to(*cmd, false);
  cmd->add_option("--format", opts->format, "jsonl | csv")->capture_default_str()->check(CLI::IsMember({"jsonl", "csv"}));
  opts->walk.add_to(*cmd);
  opts->decode.add_to(*cmd);
  cmd->add_option("--out", opts->out, "file to write (default: standard output)");
  cmd->callback([opts] {
    std::optional<DecodeProblem> decode;
    if (opts->decode.decode) {
      if (opts->format == "csv") throw Error("trace --decode writes JSON lines only (--format jsonl); CSV has no split column");
      decode = opts->decode.problem(opts->flags);
    }
    const auto [p, order, tiling, in] = decode ? WalkSetup{} : walk_setup(opts->flags, opts->walk);
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
      if (decode)  // the split-KV walk: every event carries its split; the combine follows the splits
        tiled::decode(*decode, harness::random_decode_inputs(*decode, opts->flags.seed), opts->walk.tiling(), &writer);
      else
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
