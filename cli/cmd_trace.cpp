// flashlab trace: the executor's event stream as JSON lines or CSV.
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "check.hpp"
#include "commands.hpp"
#include "decode_check.hpp"
#include "decode_executor.hpp"
#include "decode_flags.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "problem_flags.hpp"

namespace flashlab::cli {
namespace {

// Writes each event as it happens: nothing is buffered, so traces of big runs stream.
class TraceWriter : public tiled::Observer {
 public:
  TraceWriter(std::ostream& out, bool csv) : out_(out), csv_(csv) {
    if (csv_) out_ << "event,b,h,order,step,i,j,kind,tensor,direction,row0,rows,bytes,row,m_old,m_new,l_old,l_new,alpha\n";
  }
  void on_transfer(const tiled::Where& w, const tiled::Transfer& t) override {
    if (csv_) {
      head("transfer", w);
      out_ << ",,,," << tiled::to_string(t.tensor) << "," << (t.store ? "store" : "load") << "," << t.row0 << ","
           << t.rows << "," << t.bytes << ",,,,,,\n";
    } else {
      emit("transfer", w, {{"tensor", tiled::to_string(t.tensor)}, {"direction", t.store ? "store" : "load"},
                           {"row0", t.row0}, {"rows", t.rows}, {"bytes", t.bytes}});
    }
  }
  void on_tile_begin(const tiled::Where& w, const tiled::TileStep& s) override { tile("tile_begin", w, s); }
  // Split-KV decoding's merge of Q block i: each row's LSE of every split and the merged LSE.
  void on_combine(const tiled::Where& w, const tiled::TileStep& s, const tiled::Tile& lse_splits,
                  const tiled::Tile&) override {
    for (int64_t r = 0; r < lse_splits.rows(); ++r) {
      nlohmann::json lses = nlohmann::json::array();
      for (int64_t c = 0; c < lse_splits.cols(); ++c) lses.push_back(finite(lse_splits(r, c)));
      emit("combine", w, {{"i", s.i}, {"row", s.row0 + r}, {"lse_splits", lses}});
    }
  }
  void on_skip(const tiled::Where& w, const tiled::TileStep& s) override { tile("tile_skipped", w, s); }
  void on_row_stats(const tiled::Where& w, const tiled::TileStep& s, const std::vector<tiled::RowStat>& rows) override {
    for (const auto& r : rows) {
      if (csv_) {
        head("row_stats", w);
        out_ << "," << s.i << "," << s.j << ",,,,,,," << r.row << "," << r.m_old << "," << r.m_new << "," << r.l_old
             << "," << r.l_new << "," << r.alpha << "\n";
      } else {
        emit("row_stats", w, {{"i", s.i}, {"j", s.j}, {"row", r.row}, {"m_old", finite(r.m_old)},
                              {"m_new", finite(r.m_new)}, {"l_old", r.l_old}, {"l_new", r.l_new}, {"alpha", r.alpha}});
      }
    }
  }

 private:
  static nlohmann::json finite(float x) { return std::isinf(x) ? nlohmann::json(x < 0 ? "-inf" : "inf") : nlohmann::json(x); }
  void head(const char* ev, const tiled::Where& w) {
    out_ << ev << "," << w.b << "," << w.h << "," << tiled::to_string(w.order) << "," << w.step;
  }
  void tile(const char* ev, const tiled::Where& w, const tiled::TileStep& s) {
    if (csv_) {
      head(ev, w);
      out_ << "," << s.i << "," << s.j << "," << tiled::to_string(s.kind) << ",,,,,,,,,,,\n";
    } else {
      emit(ev, w, {{"i", s.i}, {"j", s.j}, {"kind", tiled::to_string(s.kind)}});
    }
  }
  void emit(const char* ev, const tiled::Where& w, nlohmann::json fields) {
    fields["event"] = ev;
    fields["b"] = w.b;
    fields["h"] = w.h;
    fields["order"] = tiled::to_string(w.order);
    fields["step"] = w.step;
    if (w.split >= 0) fields["split"] = w.split;
    out_ << fields.dump() << "\n";
  }
  std::ostream& out_;
  bool csv_;
};

}  // namespace

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
      TraceWriter writer(out, opts->format == "csv");
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
