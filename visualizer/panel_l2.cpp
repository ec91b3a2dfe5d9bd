// The GPU model window's L2 strip: which of this head's K/V blocks the simulated L2 holds when the
// current tile's CTA loads its K/V block. The simulator replays FA2's forward kernel (flash-attn 2's
// order: each Q block's K/V blocks from the diagonal down) on the chosen GPU at the model's batch x
// heads and the walk's tiles; the walk shows (batch 0, head 0).
#include <imgui.h>

#include "palette.hpp"
#include "panels.hpp"

namespace flashlab::viz {

void DrawL2Residency(const Session& s) {
  const sim::Residency& r = s.l2_residency();
  ImGui::TextUnformatted("L2 (simulated) when this tile's K/V block is loaded:");
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("The simulator replays FA2's forward on %s: every Q-block CTA of every head at the model's "
                      "batch x heads, their K/V loads through the L2 model (random replacement, the capacity the preset gives), in time "
                      "order. Green: the block is in L2 (a hit); grey: it must come from DRAM. Under a causal "
                      "mask at long sequences the CTAs of a head reach block j at different times, and the heads "
                      "between can evict it.",
                      s.gpu().name.c_str());
  if (r.steps.empty()) {
    ImGui::TextDisabled("shown for forward walks whose tiles fit this GPU's shared memory");
    return;
  }
  const TileView v = view_of(*s.primary().stepper);
  const bool fa2_walk = s.primary().order == tiled::Order::fa2;
  if (!v.valid || !fa2_walk) {
    ImGui::TextDisabled(fa2_walk ? "step to the first tile" : "shown for the fa2 order");
    return;
  }
  const int64_t chunk = v.step.j / r.chunk_blocks;
  const sim::Residency::Step* at = nullptr;
  int64_t hits = 0, loads = 0;
  for (const auto& st : r.steps) {
    if (st.chunk < 0) continue;
    ++loads;
    hits += st.resident[st.chunk];
    if (st.block == v.step.i && st.chunk == chunk) at = &st;
  }
  if (!at) {
    ImGui::TextDisabled("tile (%lld, %lld) is skipped: nothing is loaded", (long long)v.step.i, (long long)v.step.j);
    return;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float width = ImGui::GetContentRegionAvail().x, n = float(at->resident.size());
  const float cell = std::min(18.0f, width / n), h = 14;
  for (size_t c = 0; c < at->resident.size(); ++c) {
    const Rgb colour = at->resident[c] ? kResident : kPending;
    const ImVec2 lo(p.x + c * cell, p.y), hi(p.x + (c + 1) * cell - (cell > 4 ? 1 : 0), p.y + h);
    dl->AddRectFilled(lo, hi, IM_COL32(colour.r, colour.g, colour.b, 255));
    if (int64_t(c) == chunk) dl->AddRect(ImVec2(lo.x - 1, lo.y - 1), ImVec2(hi.x + 1, hi.y + 1), IM_COL32(255, 255, 255, 255), 0, 0, 2);
  }
  ImGui::Dummy(ImVec2(width, h + 2));
  ImGui::TextWrapped("Q block %lld loads K/V block %lld: %s; this head's K/V loads hit L2 %.0f%% of the time",
              (long long)v.step.i, (long long)v.step.j, at->resident[chunk] ? "an L2 hit" : "from DRAM",
              loads ? 100.0 * double(hits) / double(loads) : 0.0);
  if (r.chunk_blocks > 1) ImGui::TextDisabled("(a cell is %lld blocks: the replay coarsens long walks)", (long long)r.chunk_blocks);
}

}  // namespace flashlab::viz
