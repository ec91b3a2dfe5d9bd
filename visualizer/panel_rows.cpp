// The row statistics window: m, l, alpha and LSE per query row.
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

void ShowRowStats(Session& s, HeatmapCache& heat) {
  ImGui::Begin("Row statistics");
  const Walk& w = s.primary();
  const TileView v = view_of(*w.stepper);
  if (v.valid && tiled::is_backward(w.order) && v.step.kind != TileKind::skipped) {
    // Backward: the accumulators on chip (the resident K/V block's, or the dQ pass's Q block's) and the
    // rows' inputs from the forward.
    const tiled::Sram& m = w.stepper->sram();
    const bool dq_pass = w.order == Order::dq;
    if (dq_pass)
      ImGui::Text("Q block i=%lld accumulating dQ_i on chip over K/V blocks up to j=%lld; written once, no atomics",
                  (long long)v.step.i, (long long)v.step.j);
    else if (w.order == Order::dkdv)
      ImGui::Text("K/V block j=%lld accumulating on chip; no dQ in this pass (the dQ pass sums it)",
                  (long long)v.step.j);
    else
      ImGui::Text("K/V block j=%lld accumulating on chip; Q block i=%lld adds its dQ_i to HBM", (long long)v.step.j,
                  (long long)v.step.i);
    const float side = std::min((ImGui::GetContentRegionAvail().x - 8) / 2, ImGui::GetContentRegionAvail().y * 0.55f);
    const auto box = [&](const tiled::Tile& t, const char* name, const char* help, int64_t row0) {
      ImGui::BeginGroup();
      ImGui::Text("%s (%lld x %lld)", name, (long long)t.rows(), (long long)t.cols());
      HelpMarker(help);
      Heatmap(name, t, heat, s.version(), ImVec2(side, side * t.rows() / std::max<float>(t.rows(), t.cols())), row0, 0,
              "dim");
      ImGui::EndGroup();
    };
    if (dq_pass) {
      box(m.dQ, "dQ_i", "dQ_i += scale * dS_ij K_j over the K/V blocks so far, in a fixed order; written to HBM once.",
          v.step.row0);
    } else {
      box(m.dK, "dK_j", "dK_j += scale * dS_ij^T Q_i over the Q blocks so far; written to HBM once, after the last one.",
          v.step.col0);
      ImGui::SameLine(0, 8);
      box(m.dV, "dV_j", "dV_j += P_ij^T dO_i over the Q blocks so far; written to HBM once, after the last one.",
          v.step.col0);
    }
    std::string lse, d;
    for (int64_t r = 0; r < std::min<int64_t>(4, m.lse.size()); ++r) lse += num(m.lse[r]) + " ", d += num(m.D[r]) + " ";
    ImGui::TextWrapped("LSE_i (from the forward) %s...   D_i = rowsum(dO o O) %s...", lse.c_str(), d.c_str());
    HelpMarker("P_ij = exp(S_ij - LSE_i) needs no running max; D_i enters dS = P o (dP - D).");
    ImGui::End();
    return;
  }
  if (!v.valid || !v.rows) {
    ImGui::TextWrapped("%s", !v.valid ? "Before the first step." : "A skipped tile changes no statistics.");
    ImGui::End();
    return;
  }
  const tiled::Schedule& sc = w.stepper->schedule();
  const bool last = v.step.j + 1 >= sc.kv_end(v.step.i);
  ImGui::Text("Q block i=%lld, rows %lld..%lld, after K/V block j=%lld%s", (long long)v.step.i, (long long)v.step.row0,
              (long long)(v.step.row0 + v.step.rows - 1), (long long)v.step.j,
              last ? ": the row block's last visible tile, LSE final" : "");
  ImGui::TextUnformatted("m");
  HelpMarker("Running row max of the scores: m_new = max(m_old, rowmax(S_ij)).");
  ImGui::SameLine(0, 16);
  ImGui::TextUnformatted("l");
  HelpMarker("Running softmax denominator: l_new = alpha * l_old + rowsum(exp(S_ij - m_new)).");
  ImGui::SameLine(0, 16);
  ImGui::TextUnformatted("alpha");
  HelpMarker("Rescale factor exp(m_old - m_new) applied to l and O_i; below 1 (highlighted) when this tile raised the max.");
  ImGui::SameLine(0, 16);
  ImGui::TextUnformatted("LSE");
  HelpMarker("Log-sum-exp m_new + log(l_new) so far; stored for the backward pass after the row's last visible tile.");
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingStretchSame;
  if (ImGui::BeginTable("rows", 7, flags)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* h : {"row", "m_old", "m_new", "alpha", "l_old", "l_new", "LSE"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(v.rows->size()));
    while (clip.Step())
      for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
        const tiled::RowStat& x = (*v.rows)[r];
        ImGui::TableNextRow();
        if (x.alpha < 1) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, IM_COL32(120, 80, 20, 110));
        const double lse = x.m_new + std::log(static_cast<double>(x.l_new));
        const double cells[] = {double(x.row), x.m_old, x.m_new, x.alpha, x.l_old, x.l_new, lse};
        for (double c : cells) {
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(num(c).c_str());
        }
      }
    ImGui::EndTable();
  }
  ImGui::End();
}
}  // namespace flashlab::viz
