// flashlab_viz_check PNG DUMP STEPS: checks what flashlab-viz wrote against an
// independent run of the tiled executor's Stepper on the same problem.
//
//   the PNG    is at least 1280 x 720; the current tile's centre pixel, computed
//              here from this run's (i, j) and the grid placement in the dump,
//              has the "current" colour; a few other tiles (corners, first
//              computed tile) have the colour their state here says; 25 cells
//              of each heatmap (S_ij, O_i before/after; backward P_ij, dS_ij,
//              dK_j, dV_j) have the colour of this run's value there;
//   the dump   names the same tile after STEPS computed tiles, and its S_ij,
//              per-row m, l, alpha, O_i before/after (backward: P_ij, dS_ij)
//              and bytes per tensor equal this run's events exactly.
// Exits 1 with the first difference it finds.

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "check.hpp"
#include "check_support.hpp"
#include "flashlab/problem_spec.hpp"
#include "executor.hpp"
#include "palette.hpp"
#include "stepper.hpp"

using namespace flashlab;
using nlohmann::json;
using namespace flashlab::viz::check;

namespace {


void compare_tile(const std::string& name, const json& dumped, const tiled::Tile* t) {
  if (!t) {
    if (!dumped.empty()) fail(name + ": dumped but the Stepper emitted none");
    return;
  }
  if (static_cast<int64_t>(dumped.size()) != t->rows()) return fail(name + ": row count differs");
  int64_t n = 0;
  for (int64_t r = 0; r < t->rows(); ++r)
    for (int64_t c = 0; c < t->cols(); ++c, ++n)
      if (!same(value(dumped[r][c]), (*t)(r, c)))
        return fail(name + "[" + std::to_string(r) + "," + std::to_string(c) + "]: dump " +
                    std::to_string(value(dumped[r][c])) + ", Stepper " + std::to_string((*t)(r, c)));
  std::cout << "  " << name << ": " << t->rows() << "x" << t->cols() << " values equal\n";
}

void expect_colour(const Image& img, int x, int y, viz::Rgb want, const std::string& what, bool say_ok = true) {
  if (x < 0 || y < 0 || x >= img.w || y >= img.h) return fail(what + ": pixel outside the image");
  const viz::Rgb got = img.at(x, y);
  const auto near = [](int a, int b) { return std::abs(a - b) <= 3; };
  char b[200];
  std::snprintf(b, sizeof b, "%s at pixel (%d, %d): rgb(%d,%d,%d), expected rgb(%d,%d,%d)", what.c_str(), x, y, got.r,
                got.g, got.b, want.r, want.g, want.b);
  if (!(near(got.r, want.r) && near(got.g, want.g) && near(got.b, want.b))) fail(b);
  else if (say_ok) std::cout << "  " << b << "\n";
}

// A heatmap's cells (a 5 x 5 sample, corners included) have the colour of
// this run's values under the shared colour map, at the scale this run's
// values give: the texture holds the right numbers in the right places.
void check_heatmap(const Image& img, const json& d, const std::string& name, const tiled::Tile* t) {
  if (!t || t->rows() == 0 || t->cols() == 0) return;
  if (!d.contains("heatmaps") || !d["heatmaps"].contains(name)) return fail(name + ": no heatmap placement in the dump");
  const json& h = d["heatmaps"][name];
  const int64_t R = t->rows(), C = t->cols();
  if (h["rows"] != R || h["cols"] != C) return fail(name + ": heatmap is " + h["rows"].dump() + "x" + h["cols"].dump());
  float vmax = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      if (std::isfinite((*t)(r, c))) vmax = std::max(vmax, std::fabs((*t)(r, c)));
  if (h["vmax"].get<float>() != vmax) return fail(name + ": colour scale " + h["vmax"].dump() + ", expected " + std::to_string(vmax));
  const float x0 = h["x0"], y0 = h["y0"], cw = h["width"].get<float>() / C, ch = h["height"].get<float>() / R;
  if (cw < 3 || ch < 3) return;  // cells too small for a centre clear of the frame
  int checked = 0;
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 5; ++b) {
      const int64_t r = (R - 1) * a / 4, c = (C - 1) * b / 4;
      const int x = static_cast<int>(std::floor(x0 + (c + 0.5f) * cw)), y = static_cast<int>(std::floor(y0 + (r + 0.5f) * ch));
      if (x < 0 || y < 0 || x >= img.w || y >= img.h) return fail(name + ": a cell lies outside the image");
      const viz::Rgb want = viz::diverging((*t)(r, c), vmax), got = img.at(x, y);
      if (std::abs(got.r - want.r) > 3 || std::abs(got.g - want.g) > 3 || std::abs(got.b - want.b) > 3) {
        char b2[200];
        std::snprintf(b2, sizeof b2, "%s[%lld, %lld] at pixel (%d, %d): rgb(%d,%d,%d), expected rgb(%d,%d,%d)",
                      name.c_str(), (long long)r, (long long)c, x, y, got.r, got.g, got.b, want.r, want.g, want.b);
        return fail(b2);
      }
      ++checked;
    }
  std::cout << "  " << name << " heatmap: " << checked << " cells have their value's colour\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: flashlab_viz_check PNG DUMP STEPS\n";
    return 2;
  }
  const Image img(argv[1]);
  if (!img.px) {
    std::cerr << "FAIL: cannot read the PNG " << argv[1] << "\n";
    return 1;
  }
  std::ifstream in(argv[2]);
  if (!in) {
    std::cerr << "FAIL: cannot read the dump " << argv[2] << "\n";
    return 1;
  }
  const json d = json::parse(in);
  const int64_t want_steps = std::stoll(argv[3]);

  std::cout << argv[1] << ": " << img.w << "x" << img.h << "\n";
  if (img.w < 1280 || img.h < 720) fail("the screenshot is smaller than 1280x720");

  // The same problem, built here from the dumped settings, not by the visualizer's code.
  const json& s = d["settings"];
  Problem p;
  p.seqlen_q = p.seqlen_k = s["seqlen"].get<int64_t>();
  p.head_dim = s["hdim"].get<int64_t>();
  p.causal = s["causal"].get<bool>();
  p.window_left = s["window_left"].get<int64_t>();
  p.window_right = s["window_right"].get<int64_t>();
  p.seed = s["seed"].get<uint64_t>();
  p.dtype = parse_dtype(s["dtype"].get<std::string>());
  // The mask function, spelled out here field by field (core's list parser and loader, not the visualizer's).
  p.mask.kind = parse_mask_kind(s.value("mask", std::string("none")));
  if (!s.value("prefix", std::string()).empty()) p.mask.prefix = parse_int_list(s["prefix"], "prefix");
  if (!s.value("doc_lengths", std::string()).empty()) p.mask.doc_lengths = parse_int_list(s["doc_lengths"], "doc_lengths");
  p.mask.chunk = s.value("chunk", int64_t{0});
  if (!s.value("mask_file", std::string()).empty()) p.mask.dense = DenseMask::load(s["mask_file"]);
  p.validate();
  const tiled::Tiling tiling{s["br"].get<int64_t>(), s["bc"].get<int64_t>(), s.value("q_from_end", false)};
  const harness::Inputs inputs = harness::random_inputs(p, s["seed"].get<uint64_t>());

  int64_t position = -1;  // set by the first (primary) walk: the others walk in lock-step
  for (const json& w : d["walks"]) {
    const tiled::Order order = tiled::parse_order(w["order"].get<std::string>());
    std::cout << "walk " << tiled::to_string(order) << ":\n";
    std::unique_ptr<tiled::Stepper> st;
    tiled::ForwardResult f;
    if (tiled::is_backward(order)) {
      f = tiled::forward(p, inputs.q, inputs.k, inputs.v, tiling, tiled::Order::fa2);
      st = std::make_unique<tiled::Stepper>(p, inputs.q, inputs.k, inputs.v, f.o, f.lse, inputs.d_o, tiling, 0, 0, order);
    } else {
      st = std::make_unique<tiled::Stepper>(p, inputs.q, inputs.k, inputs.v, tiling, order);
    }
    if (position < 0) {  // STEPS computed (non-skipped) tiles, as flashlab-viz counts a step
      int64_t computed = 0;
      while (computed < want_steps && st->next_tile())
        if (st->tile_events().front().step.kind != tiled::TileKind::skipped) ++computed;
      position = st->position();
    } else {
      st->seek(position);
    }
    if (w["position"].get<int64_t>() != position)
      fail("position: dump " + w["position"].dump() + ", Stepper " + std::to_string(position));
    const auto& events = st->tile_events();
    const tiled::TileStep& t = events.front().step;
    const json& dt = w["tile"];
    std::cout << "  tile (i=" << t.i << ", j=" << t.j << ") step " << t.index << " " << tiled::to_string(t.kind) << "\n";
    if (dt["i"] != t.i || dt["j"] != t.j || dt["index"] != t.index || dt["kind"] != tiled::to_string(t.kind))
      fail("current tile: dump " + dt.dump());

    const tiled::Tile *S = nullptr, *Ob = nullptr, *Oa = nullptr, *P = nullptr, *dS = nullptr;
    const std::vector<tiled::RowStat>* rows = nullptr;
    for (const tiled::Event& e : events) {
      if (e.kind == tiled::Event::Kind::scores) S = &e.a;
      if (e.kind == tiled::Event::Kind::rescale) Ob = &e.a, Oa = &e.b;
      if (e.kind == tiled::Event::Kind::gradients) P = &e.a, dS = &e.b;
      if (e.kind == tiled::Event::Kind::row_stats) rows = &e.rows;
    }
    if (&w == &d["walks"][0]) {  // the tile values panel shows the first walk: its heatmaps' pixels
      check_heatmap(img, d, "S_ij", S);
      check_heatmap(img, d, "O_i before", Ob);
      check_heatmap(img, d, "O_i after", Oa);
      check_heatmap(img, d, "P_ij", P);
      check_heatmap(img, d, "dS_ij", dS);
      if (tiled::is_backward(order) && t.kind != tiled::TileKind::skipped) {
        check_heatmap(img, d, "dK_j", &st->sram().dK);
        check_heatmap(img, d, "dV_j", &st->sram().dV);
      }
    }
    compare_tile("S_ij", w["S"], S);
    compare_tile("O_i before", w["O_before"], Ob);
    compare_tile("O_i after", w["O_after"], Oa);
    compare_tile("P_ij", w["P"], P);
    compare_tile("dS_ij", w["dS"], dS);
    const json& dr = w["row_stats"];
    if (rows) {
      if (dr.size() != rows->size()) fail("row_stats: " + std::to_string(dr.size()) + " rows dumped, " +
                                          std::to_string(rows->size()) + " from the Stepper");
      size_t rescaled = 0;
      for (size_t r = 0; r < std::min(dr.size(), rows->size()); ++r) {
        const tiled::RowStat& x = (*rows)[r];
        const json& y = dr[r];
        if (y["row"] != x.row || !same(value(y["m_old"]), x.m_old) || !same(value(y["m_new"]), x.m_new) ||
            !same(value(y["l_old"]), x.l_old) || !same(value(y["l_new"]), x.l_new) || !same(value(y["alpha"]), x.alpha))
          fail("row_stats[" + std::to_string(r) + "]: dump " + y.dump());
        rescaled += x.alpha < 1;
      }
      std::cout << "  row stats: " << rows->size() << " rows of m_old, m_new, l_old, l_new, alpha equal (" << rescaled
                << " rows rescaled, alpha < 1)\n";
    } else if (!dr.empty()) {
      fail("row_stats dumped but the Stepper emitted none");
    }
    const tiled::ByteCounts& b = st->bytes();
    for (int k = 0; k < tiled::kTensorCount; ++k) {
      const std::string name = tiled::to_string(static_cast<tiled::TensorId>(k));
      const int64_t dl = w["bytes"]["load"].value(name, int64_t{0}), ds = w["bytes"]["store"].value(name, int64_t{0});
      if (dl != b.load[k] || ds != b.store[k])
        fail("bytes of " + name + ": dump " + std::to_string(dl) + "/" + std::to_string(ds) + ", Stepper " +
             std::to_string(b.load[k]) + "/" + std::to_string(b.store[k]));
    }
    std::cout << "  bytes so far: read " << b.total_load() << ", written " << b.total_store() << " equal per tensor\n";

    // The picture: the current tile where this run says it is, in the current colour.
    if (!w.contains("grid")) {
      fail("the dump has no grid placement");
      continue;
    }
    const json& g = w["grid"];
    const float x0 = g["x0"], y0 = g["y0"], cw = g["cell_w"], ch = g["cell_h"];
    const auto centre = [&](int64_t i, int64_t j) {
      return std::pair<int, int>(static_cast<int>(std::floor(x0 + (j + 0.5f) * cw)),
                                 static_cast<int>(std::floor(y0 + (i + 0.5f) * ch)));
    };
    const auto [cx, cy] = centre(t.i, t.j);
    if (w["current_tile_px"] != json::array({cx, cy}))
      fail("current_tile_px: dump " + w["current_tile_px"].dump() + ", expected [" + std::to_string(cx) + "," +
           std::to_string(cy) + "]");
    expect_colour(img, cx, cy, t.kind == tiled::TileKind::skipped ? viz::kCurrentSkipped : viz::kCurrent,
                  "current tile (" + std::to_string(t.i) + "," + std::to_string(t.j) + ")");
    if (cw >= 10) {  // other tiles' centres are clear of borders and outlines (and of a partial tile's corner mark)
      const tiled::Schedule& sc = st->schedule();
      std::vector<std::pair<int64_t, int64_t>> tiles{{0, 0}, {0, sc.Tc() - 1}, {sc.Tr() - 1, 0}, {sc.Tr() - 1, sc.Tc() - 1}};
      if (p.mask.kind != MaskKind::none)  // a mask function: every tile, the block mask drawn as the schedule has it
        for (int64_t i = 0; i < sc.Tr(); ++i)
          for (int64_t j = 0; j < sc.Tc(); ++j) tiles.emplace_back(i, j);
      int64_t drawn = 0;
      for (auto [i, j] : tiles) {
        const int64_t k = sc.step_of(i, j);
        if (k == t.index) continue;
        ++drawn;
        const bool skipped = sc.classify(i, j) == tiled::TileKind::skipped, before = k < t.index;
        const viz::Rgb want = skipped ? (before ? viz::kSkippedDone : viz::kSkipped) : (before ? viz::kDone : viz::kPending);
        const auto [x, y] = centre(i, j);
        expect_colour(img, x, y, want,
                      "tile (" + std::to_string(i) + "," + std::to_string(j) + ") " + (skipped ? "skipped" : "visible") +
                          (before ? ", passed" : ", ahead"), p.mask.kind == MaskKind::none);
      }
      if (p.mask.kind != MaskKind::none) std::cout << "  block mask: " << drawn << " tile centres in their state's colour\n";
    }
  }
  if (failures) {
    std::cerr << failures << " check(s) failed\n";
    return 1;
  }
  std::cout << "ok: the screenshot and the dump agree with the Stepper\n";
  return 0;
}
