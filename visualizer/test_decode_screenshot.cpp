// flashlab_viz_decode_check PNG DUMP -- FLAGS: checks what `flashlab-viz --decode FLAGS` wrote against an
// independent run of the tiled decode (tiled::decode with this file's own Observer) on the problem the
// same flags describe (cli/decode_flags, the parser check --decode uses).
//
//   the dump   names the schedule step SplitSchedule gives after --steps steps; every split's m^(s), l^(s)
//              of every packed query row equal the last on_row_stats of that split so far; once combined,
//              each row's LSE^(s) equal on_combine's, LSE the executor's output, and the weights
//              exp(LSE^(s) - LSE) sum to 1; every page's owner is the block table's;
//   the PNG    is at least 1280 x 720; the current key block's centre pixel has the "current" colour; every
//              page whose first row is cached has its entry's colour at its top; the pages holding the current
//              block's keys (DecodeProblem::cache_row, computed here) have the orange outline.
// Exits 1 with the first differences it finds.

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "check_support.hpp"
#include "decode_check.hpp"
#include "decode_executor.hpp"
#include "decode_flags.hpp"
#include "decode_palette.hpp"
#include "problem_flags.hpp"

using namespace flashlab;
using nlohmann::json;
using namespace flashlab::viz::check;

namespace {


void expect_same(double dumped, double here, const std::string& what) {
  if (!same(dumped, static_cast<float>(here)))
    fail(what + ": dump " + std::to_string(dumped) + ", this run " + std::to_string(here));
}

// This run's record: per (split, packed row) the last RowStat in steps < position; on_combine's LSE^(s).
class Record : public tiled::Observer {
 public:
  Record(int64_t b, int64_t g, int64_t group, int64_t q_len, int64_t position)
      : b_(b), g_(g), group_(group), q_len_(q_len), position_(position) {}
  std::map<std::pair<int64_t, int64_t>, tiled::RowStat> last;  // (split, packed row)
  std::set<std::pair<int64_t, int64_t>> empty;                 // (split, Q block) with nothing visible
  std::map<int64_t, std::vector<float>> lse_splits;            // packed row -> LSE^(s)

  void on_skip(const tiled::Where& at, const tiled::TileStep& t) override {
    if (mine(at)) empty.insert({at.split, t.i});
  }
  void on_row_stats(const tiled::Where& at, const tiled::TileStep&, const std::vector<tiled::RowStat>& st) override {
    if (mine(at))
      for (const auto& r : st) last[{at.split, packed(at.h, r.row)}] = r;
  }
  void on_combine(const tiled::Where& at, const tiled::TileStep& t, const tiled::Tile& lse, const tiled::Tile&) override {
    if (!mine(at)) return;
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t s = 0; s < lse.cols(); ++s) lse_splits[packed(at.h, t.row0 + r)].push_back(lse(r, s));
  }

 private:
  bool mine(const tiled::Where& at) const {
    return at.b == b_ && at.h / group_ == g_ && at.step >= 0 && at.step < position_;
  }
  int64_t packed(int64_t h, int64_t i) const { return (h - g_ * group_) * q_len_ + i; }
  int64_t b_, g_, group_, q_len_, position_;
};

void expect_colour(const Image& img, double fx, double fy, viz::Rgb want, const std::string& what) {
  const int x = static_cast<int>(fx), y = static_cast<int>(fy);
  if (x < 0 || y < 0 || x >= img.w || y >= img.h) return fail(what + ": pixel outside the image");
  const viz::Rgb got = img.at(x, y);
  const auto near = [](int a, int b) { return std::abs(a - b) <= 3; };
  char b[240];
  std::snprintf(b, sizeof b, "%s at pixel (%d, %d): rgb(%d,%d,%d), expected rgb(%d,%d,%d)", what.c_str(), x, y, got.r,
                got.g, got.b, want.r, want.g, want.b);
  if (near(got.r, want.r) && near(got.g, want.g) && near(got.b, want.b)) std::cout << "  " << b << "\n";
  else fail(b);
}

}  // namespace

int main(int argc, char** argv) {
  std::string png, dump;
  cli::ProblemFlags flags;
  cli::DecodeFlags decode;
  tiled::Tiling tiling = tiled::kDecodeDefault;
  int64_t b = 0, g = 0, steps = 0;
  CLI::App app{"checks flashlab-viz --decode's PNG and dump"};
  app.allow_extras();
  app.add_option("png", png)->required();
  app.add_option("dump", dump)->required();
  flags.add_to(app, false, false);
  decode.add_to(app);
  app.add_option("--br", tiling.Br);
  app.add_option("--bc", tiling.Bc);
  app.add_option("--walk-batch", b);
  app.add_option("--walk-kv-head", g);
  app.add_option("--steps", steps);
  CLI11_PARSE(app, argc, argv);

  const DecodeProblem d = decode.problem(flags);
  const json j = json::parse(std::ifstream(dump));
  const tiled::SplitSchedule sched(d, b, tiling);
  const int64_t group = d.heads_q / d.heads_kv, rows = group * d.q_len, S = sched.splits();
  const int64_t position = std::clamp<int64_t>(steps, 0, sched.steps());
  std::cout << d.describe() << "; entry " << b << ", kv head " << g << ", after " << position << " of "
            << sched.steps() << " steps\n";

  // 1. The step.
  if (j.at("position").get<int64_t>() != position) fail("position " + j.at("position").dump() + ", expected " + std::to_string(position));
  if (j.at("steps").get<int64_t>() != sched.steps()) fail("steps differ");
  const bool has = position > 0;
  const tiled::SplitSchedule::Step cur = has ? sched.step(position - 1) : tiled::SplitSchedule::Step{};
  if (has && (j.at("current").at("split").get<int64_t>() != cur.split || j["current"]["j"].get<int64_t>() != cur.tile.j ||
              j["current"]["i"].get<int64_t>() != cur.tile.i))
    fail("current step differs from SplitSchedule::step(" + std::to_string(position - 1) + ")");

  // 2. The numbers, against this run's events.
  Record rec(b, g, group, d.q_len, position);
  const DecodeOutputs<float> out = tiled::decode(d, harness::random_decode_inputs(d, flags.seed), tiling, &rec);
  int64_t compared = 0;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t r = 0; r < rows; ++r) {
      const json& x = j.at("split_state")[s].at("rows")[r];
      const std::string at = "split " + std::to_string(s) + " row " + std::to_string(r);
      const auto it = rec.last.find({s, r});
      const bool empty = rec.empty.count({s, tiling.q_block_of(r % d.q_len, d.q_len)}) > 0;
      if (x.at("empty").get<bool>() != empty) fail(at + ": empty differs");
      if (it == rec.last.end()) {
        if (x.at("started").get<bool>() && !empty) fail(at + ": dumped as started, no event here");
        continue;
      }
      if (!x.at("started").get<bool>()) fail(at + ": not started in the dump, this run has its row stats");
      expect_same(value(x["m"]), it->second.m_new, at + " m");
      expect_same(value(x["l"]), it->second.l_new, at + " l");
      ++compared;
    }
  std::cout << "  " << compared << " (split, row) states: m, l equal this run's row stats\n";
  int64_t combined = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const json& c = j.at("combine")[r];
    const auto it = rec.lse_splits.find(r);
    if (c.at("combined").get<bool>() != (it != rec.lse_splits.end())) {
      fail("row " + std::to_string(r) + ": combined differs");
      continue;
    }
    if (it == rec.lse_splits.end()) continue;
    const int64_t h = g * group + r / d.q_len, i = r % d.q_len;
    const float lse = out.lse[d.lse_offset(b, h, i)];
    expect_same(value(c["lse"]), lse, "row " + std::to_string(r) + " LSE");
    double sum = 0;
    for (int64_t s = 0; s < S; ++s) {
      expect_same(value(c["lse_splits"][s]), it->second[s], "row " + std::to_string(r) + " LSE^(" + std::to_string(s) + ")");
      sum += value(c["weights"][s]);
    }
    if (std::abs(sum - 1) > 1e-5) fail("row " + std::to_string(r) + ": the weights sum to " + std::to_string(sum));
    ++combined;
  }
  std::cout << "  " << combined << " combined rows: LSE^(s), LSE equal this run's; weights sum to 1\n";

  // Pages: each dumped page's owner through the block table (paged), or the entry itself (contiguous).
  std::map<int64_t, int64_t> owner;
  for (int64_t e = 0; e < d.batch; ++e)
    for (int64_t p = 0; p < (d.paged() ? d.max_pages : 1); ++p)
      owner[d.paged() ? d.block_table[e * d.max_pages + p] : e] = e;
  for (const json& p : j.at("placement").at("pages"))
    if (owner.at(p.at("page").get<int64_t>()) != p.at("entry").get<int64_t>())
      fail("page " + p["page"].dump() + ": dumped entry " + p["entry"].dump() + ", block table says " +
           std::to_string(owner.at(p["page"].get<int64_t>())));

  // 3. The picture.
  const Image img(png);
  if (!img.px) {
    std::cerr << "FAIL: cannot read " << png << "\n";
    return 1;
  }
  if (img.w < 1280 || img.h < 720) fail("the PNG is " + std::to_string(img.w) + "x" + std::to_string(img.h));
  std::set<int64_t> reading;  // the pages (contiguous: the entry) the current K_j, V_j come from
  if (has && cur.kind == tiled::SplitSchedule::Kind::tile) {
    const json& blk = j.at("placement").at("current_block");
    if (blk.at("j").get<int64_t>() != cur.tile.j) fail("the drawn current block is not K_" + std::to_string(cur.tile.j));
    expect_colour(img, (value(blk["x0"]) + value(blk["x1"])) / 2, (value(blk["y0"]) + value(blk["y1"])) / 2,
                  viz::kCurrent, "current block K_" + std::to_string(cur.tile.j));
    for (int64_t c = cur.tile.col0; c < cur.tile.col0 + cur.tile.cols; ++c)
      reading.insert(d.paged() ? d.cache_row(b, c) / d.page_size : b);
  }
  for (const json& p : j.at("placement").at("pages")) {
    const int64_t page = p.at("page").get<int64_t>(), e = p.at("entry").get<int64_t>();
    int64_t logical = 0;
    for (int64_t q = 0; d.paged() && q < d.max_pages; ++q)
      if (d.block_table[e * d.max_pages + q] == page) logical = q;
    const double x0 = value(p["x0"]), x1 = value(p["x1"]), y0 = value(p["y0"]), y1 = value(p["y1"]);
    if (logical * std::max<int64_t>(d.page_size, 1) < d.cache_seqlens[e])
      expect_colour(img, (x0 + x1) / 2, y0 + 4, viz::entry_colour(e), "page " + std::to_string(page) + " of entry " + std::to_string(e));
    if (reading.count(page))
      expect_colour(img, x0 + 1, (y0 + y1) / 2, viz::kCurrent, "outline of page " + std::to_string(page) + " (read now)");
  }
  if (failures) {
    std::cerr << failures << " check(s) failed\n";
    return 1;
  }
  std::cout << "ok\n";
  return 0;
}
