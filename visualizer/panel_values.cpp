// The tile values window: S_ij, O_i before and after the step (backward: P_ij, dS_ij).
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

void ShowTileValues(Session& s, HeatmapCache& heat) {
  ImGui::Begin("Tile values");
  const TileView v = view_of(*s.primary().stepper);
  if (!v.valid) {
    ImGui::TextUnformatted("Press -> (or space to play) to run the first tile.");
    ImGui::End();
    return;
  }
  if (v.step.kind == TileKind::skipped || !v.S) {
    ImGui::Text("Tile (%lld, %lld) is masked everywhere: skipped, nothing loaded.", (long long)v.step.i,
                (long long)v.step.j);
    ImGui::End();
    return;
  }
  const float w = (ImGui::GetContentRegionAvail().x - 16) / 3;
  const float h = std::min(w, ImGui::GetContentRegionAvail().y - 5 * ImGui::GetTextLineHeightWithSpacing());
  const bool bwd = tiled::is_backward(s.primary().order);
  const auto box = [&](const tiled::Tile* m, const char* name, const char* what, int64_t col0, const char* help) {
    ImGui::BeginGroup();
    ImGui::Text("%s (%lld x %lld)", name, m ? (long long)m->rows() : 0LL, m ? (long long)m->cols() : 0LL);
    HelpMarker(help);
    if (m)
      Heatmap(name, *m, heat, s.version(), ImVec2(w, h * m->rows() / std::max<float>(m->rows(), m->cols())),
              v.step.row0, col0, what);
    ImGui::EndGroup();
  };
  box(v.S, "S_ij", "key", v.step.col0,
      "The scores scale * Q_i K_j^T of this tile (after softcap, ALiBi and mask; masked = -inf, dark); hover a cell for its value.");
  ImGui::SameLine(0, 8);
  if (bwd) {
    box(v.P, "P_ij", "key", v.step.col0, "Probabilities recomputed from the forward's LSE: P = exp(S - LSE).");
    ImGui::SameLine(0, 8);
    box(v.dS, "dS_ij", "key", v.step.col0, "Gradient of the scores: dS = P o (dP - D), with dP = dO_i V_j^T and D = rowsum(dO o O).");
  } else {
    box(v.O_before, "O_i before", "dim", 0,
        s.primary().order == Order::fa2 ? "The accumulator before this tile (FA2: unnormalized, divided by l at the end)."
                                        : "O_i as read from HBM before this tile (FA1: kept normalized).");
    ImGui::SameLine(0, 8);
    box(v.O_after, "O_i after", "dim", 0, "O_i after the rescale by alpha and the add of P_ij V_j.");
  }
  std::string moved;
  for (const tiled::Transfer& t : v.transfers)
    moved += std::string(t.store ? "store " : "load ") + tiled::to_string(t.tensor) + " " + bytes(t.bytes) + ", ";
  if (!moved.empty()) moved.resize(moved.size() - 2);
  ImGui::TextWrapped("this step: %s", moved.empty() ? "no transfers (the blocks were already on chip)" : moved.c_str());
  HelpMarker("Loads (HBM -> SRAM) and stores (SRAM -> HBM) this tile step made, one head.");
  ImGui::End();
}
}  // namespace flashlab::viz
