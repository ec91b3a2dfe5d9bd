// The tile grid window: pending / in SRAM / done / skipped, drawn as O(Tr + Tc) rectangles.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "flashlab/error.hpp"
#include "panel_widgets.hpp"
#include "panels.hpp"

namespace flashlab::viz {

using tiled::Order;
using tiled::TileKind;

namespace {

// Above this many tiles the grid is drawn line by line only (O(Tr + Tc) rectangles), without the
// per-tile marks of partial tiles.
constexpr int64_t kMaxDetailTiles = 128 * 1024;

// One walk's Tr x Tc grid. The state of tile (i, j) follows from its mask class
// and its place in the order relative to the current step, so each outer line
// (a Q row block for fa2, a K/V column block otherwise) is at most five
// rectangles: O(Tr + Tc) per frame whatever the number of tiles, and no more
// lines than the grid has pixels across.
void DrawGrid(Walk& w, ImVec2 avail) {
  const tiled::Stepper& st = *w.stepper;
  const tiled::Schedule& s = st.schedule();
  const int64_t Tr = s.Tr(), Tc = s.Tc();
  const bool q_outer = s.q_outer();  // which axis the walk's outer loop takes: the Schedule says
  const float margin = 28;  // room for the axis labels
  const float cell = std::max(0.05f, std::min((avail.x - margin) / Tc, (avail.y - margin) / Tr));
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 p0(origin.x + margin, origin.y + margin);
  ImGui::InvisibleButton("grid", ImVec2(margin + cell * Tc, margin + cell * Tr));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  w.grid = {true, p0.x, p0.y, cell, cell};

  const int64_t pos = st.position();
  const bool started = pos > 0;
  const tiled::TileStep cur = started ? s.step(pos - 1) : tiled::TileStep{};
  const int64_t co = started ? (q_outer ? cur.i : cur.j) : -1;  // current outer line
  const int64_t ci = started ? (q_outer ? cur.j : cur.i) : -1;  // current place in it
  const int64_t outer = s.outer_blocks(), inner = s.inner_blocks();

  // Lines [o0, o1) from a to z along the line, in colour c.
  auto rect = [&](int64_t o0, int64_t o1, int64_t a, int64_t z, Rgb c) {
    if (a >= z) return;
    const ImVec2 lo = q_outer ? ImVec2(p0.x + a * cell, p0.y + o0 * cell) : ImVec2(p0.x + o0 * cell, p0.y + a * cell);
    const ImVec2 hi = q_outer ? ImVec2(p0.x + z * cell, p0.y + o1 * cell) : ImVec2(p0.x + o1 * cell, p0.y + z * cell);
    dl->AddRectFilled(lo, hi, col(c));
  };
  // A line is three ranges, visible [b, e) between masked ones, each split where
  // the walk is (before it "done", after it "pending"): (b, e, split) says it all.
  struct Line {
    int64_t b, e, split;
    bool operator==(const Line&) const = default;
  };
  auto line_at = [&](int64_t o) {
    const auto [b, end] = s.visible(o);
    const int64_t e = std::max(b, end);
    return Line{b, e, o < co ? inner : (o == co ? ci + 1 : 0)};
  };
  auto range = [&](int64_t o0, int64_t o1, int64_t a, int64_t z, int64_t split, Rgb done, Rgb pending) {
    rect(o0, o1, a, std::min(z, split), done);
    rect(o0, o1, std::max(a, split), z, pending);
  };
  // A pixel takes the colour of the line holding its centre, so below one pixel
  // per cell only those lines are looked at (at most one per pixel row), and a
  // run of lines that look the same is one set of rectangles: a causal 1024 x
  // 1024 grid is ~3 rectangles per pixel row, a full one 4 in all.
  const float P = q_outer ? p0.y : p0.x;                   // where line 0 starts on screen
  auto next_line = [&](int64_t o) {                        // the first line after o holding a pixel centre
    const float centre = std::ceil(P + (o + 1) * cell - 0.5f) + 0.5f;
    return std::max(o + 1, static_cast<int64_t>(std::floor((centre - P) / cell)));
  };
  for (int64_t o = 0; o < outer;) {
    const Line l = line_at(o);
    int64_t end = next_line(o);
    while (end < outer && line_at(end) == l) end = next_line(end);
    end = std::min(end, outer);
    range(o, end, 0, l.b, l.split, kSkippedDone, kSkipped);
    range(o, end, l.b, l.e, l.split, kDone, kPending);
    range(o, end, l.e, inner, l.split, kSkippedDone, kSkipped);
    o = end;
  }
  // The block mask's detail, tile by tile, where the grid is small enough to afford it: a partial tile
  // (its element mask applied) gets a light triangle in its lower-left corner, and under a dense mask the skipped tiles inside a
  // line's range (holes, block_mask.hpp) are painted as skipped.
  const tiled::BlockMask& bm = s.block_mask();
  if (Tr * Tc <= kMaxDetailTiles && (cell >= 4 || bm.has_holes())) {
    const ImU32 mark = IM_COL32(230, 230, 240, 150);
    for (int64_t i = 0; i < Tr; ++i)
      for (int64_t j = bm.kv_begin(i); j < bm.kv_end(i); ++j) {
        const TileKind kind = bm.kind(i, j);
        const ImVec2 lo(p0.x + j * cell, p0.y + i * cell), hi(p0.x + (j + 1) * cell, p0.y + (i + 1) * cell);
        if (kind == TileKind::skipped)
          dl->AddRectFilled(lo, hi, col(s.step_of(i, j) < pos ? kSkippedDone : kSkipped));
        else if (kind == TileKind::partial && cell >= 4)  // a corner mark, clear of the centre the tile's state colours
          dl->AddTriangleFilled(ImVec2(lo.x, hi.y - cell / 3), ImVec2(lo.x, hi.y), ImVec2(lo.x + cell / 3, hi.y), mark);
      }
  }
  // Tile borders where they are wide enough to see.
  if (cell >= 6) {
    const ImU32 line = IM_COL32(15, 15, 18, 255);
    for (int64_t j = 0; j <= Tc; ++j) dl->AddLine(ImVec2(p0.x + j * cell, p0.y), ImVec2(p0.x + j * cell, p0.y + Tr * cell), line);
    for (int64_t i = 0; i <= Tr; ++i) dl->AddLine(ImVec2(p0.x, p0.y + i * cell), ImVec2(p0.x + Tc * cell, p0.y + i * cell), line);
  }
  // The resident line (Q_i, O_i, m_i, l_i for fa2; K_j, V_j (and dK_j, dV_j) otherwise) and the current tile.
  if (started) {
    const float t = std::max(2.0f, std::min(4.0f, cell / 6));
    if (q_outer)
      dl->AddRect(ImVec2(p0.x - t / 2, p0.y + co * cell - t / 2),
                  ImVec2(p0.x + Tc * cell + t / 2, p0.y + (co + 1) * cell + t / 2), col(kResident), 0, 0, t);
    else
      dl->AddRect(ImVec2(p0.x + co * cell - t / 2, p0.y - t / 2),
                  ImVec2(p0.x + (co + 1) * cell + t / 2, p0.y + Tr * cell + t / 2), col(kResident), 0, 0, t);
    const float grow = std::max(0.0f, (5 - cell) / 2);  // a tile stays at least 5 px wide
    dl->AddRectFilled(ImVec2(p0.x + cur.j * cell - grow, p0.y + cur.i * cell - grow),
                      ImVec2(p0.x + (cur.j + 1) * cell + grow, p0.y + (cur.i + 1) * cell + grow),
                      col(cur.kind == TileKind::skipped ? kCurrentSkipped : kCurrent));
    // Axis marks for the current Q_i (left) and K_j (top).
    dl->AddRectFilled(ImVec2(p0.x - 8, p0.y + cur.i * cell), ImVec2(p0.x - 2, p0.y + (cur.i + 1) * cell + 1), col(kCurrent));
    dl->AddRectFilled(ImVec2(p0.x + cur.j * cell, p0.y - 8), ImVec2(p0.x + (cur.j + 1) * cell + 1, p0.y - 2), col(kCurrent));
  }
  dl->AddText(ImVec2(p0.x, origin.y), IM_COL32(200, 200, 200, 255), "K/V blocks j ->");
  dl->AddText(ImVec2(origin.x, p0.y + 4), IM_COL32(200, 200, 200, 255), "Q");
  dl->AddText(ImVec2(origin.x, p0.y + 18), IM_COL32(200, 200, 200, 255), "i");

  if (hovered) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int64_t j = static_cast<int64_t>((mp.x - p0.x) / cell), i = static_cast<int64_t>((mp.y - p0.y) / cell);
    if (i >= 0 && i < Tr && j >= 0 && j < Tc) {
      const int64_t k = s.step_of(i, j);
      const TileKind kind = s.classify(i, j);
      const char* state = k == pos - 1 ? "current (in SRAM)" : (k < pos - 1 ? "done" : "pending");
      ImGui::SetTooltip("tile (i=%lld, j=%lld): query rows %lld..%lld x keys %lld..%lld\n%s, step %lld of the "
                        "schedule, %s",
                        (long long)i, (long long)j, (long long)s.tiling().q_block(i, s.seqlen_q()).row0,
                        (long long)(s.tiling().q_block(i, s.seqlen_q()).row0 + s.q_rows(i) - 1), (long long)(j * s.tiling().Bc),
                        (long long)(j * s.tiling().Bc + s.kv_rows(j) - 1), tiled::to_string(kind).c_str(),
                        (long long)k, state);
    }
  }
}

void Legend(Rgb c, const char* label, const char* help) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight();
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + h, p.y + h), col(c));
  ImGui::Dummy(ImVec2(h, h));
  ImGui::SameLine();
  ImGui::TextUnformatted(label);
  HelpMarker(help);
  ImGui::SameLine(0, 14);
}

}  // namespace

void ShowTileGrid(Session& s) {
  ImGui::Begin("Tile grid");
  const auto& walks = s.walks();
  const tiled::Schedule& sc = s.primary().stepper->schedule();
  const Problem& prob = s.problem();
  ImGui::TextWrapped("Tr = %lld Q blocks x Tc = %lld K/V blocks (Br = %lld, Bc = %lld), %lld of %lld tiles masked; "
                     "block mask density %.3f%s%s",
              (long long)sc.Tr(), (long long)sc.Tc(), (long long)sc.tiling().Br, (long long)sc.tiling().Bc,
              (long long)sc.tiles_skipped(), (long long)sc.steps(), sc.block_mask().density(),
              prob.mask.kind == MaskKind::none ? "" : ", mask ", prob.mask.kind == MaskKind::none ? "" : prob.mask.describe().c_str());
  Legend(kPending, "pending", "Not visited yet.");
  Legend(kCurrent, "current", "The tile in SRAM now: S_ij = Q_i K_j^T is computed from it.");
  Legend(kResident, "stays in SRAM", "The block kept on chip across the inner loop: Q_i, O_i, m_i, l_i in FA2; K_j, V_j (and dK_j, dV_j) in FA1 and the backward.");
  ImGui::NewLine();
  Legend(kDone, "done", "Visited: its contribution is in O_i (backward: in dK_j, dV_j and dQ_i).");
  Legend(kSkipped, "skipped", "Every element masked (causal, window or the mask function): never loaded, never computed.");
  {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(p, ImVec2(p.x + h, p.y + h), col(kDone));
    dl->AddTriangleFilled(ImVec2(p.x, p.y + h / 2), ImVec2(p.x, p.y + h), ImVec2(p.x + h / 2, p.y + h),
                          IM_COL32(230, 230, 240, 150));
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    ImGui::TextUnformatted("partial");
    HelpMarker("Some elements masked: computed whole, then the element mask sets the masked S_ij to -inf. "
               "Unmarked visible tiles are full: no element mask at all.");
    ImGui::SameLine(0, 14);
  }
  ImGui::NewLine();
  const float gap = 12;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float each = (avail.x - gap * (walks.size() - 1)) / walks.size();
  for (size_t n = 0; n < walks.size(); ++n) {
    Walk& w = s.walks()[n];
    if (n) ImGui::SameLine(0, gap);
    ImGui::PushID(static_cast<int>(n));
    ImGui::BeginChild("walk", ImVec2(each, 0), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    const tiled::Stepper& st = *w.stepper;
    const TileView v = view_of(st);
    ImGui::Text("%s order", tiled::to_string(w.order).c_str());
    if (walks.size() == 1) ImGui::SameLine();
    if (v.valid)
      ImGui::Text("step %lld/%lld, tile (i=%lld, j=%lld) %s", (long long)st.position(),
                  (long long)st.schedule().steps(), (long long)v.step.i, (long long)v.step.j,
                  tiled::to_string(v.step.kind).c_str());
    else
      ImGui::Text(": before the first step");
    ImGui::Text("HBM: read %s, wrote %s", bytes(st.bytes().total_load()).c_str(),
                bytes(st.bytes().total_store()).c_str());
    HelpMarker("Bytes this head has moved between HBM and SRAM up to this step, prologue included.");
    DrawGrid(w, ImGui::GetContentRegionAvail());
    ImGui::EndChild();
    ImGui::PopID();
  }
  ImGui::End();
}
}  // namespace flashlab::viz
