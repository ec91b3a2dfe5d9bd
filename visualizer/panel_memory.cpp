// The memory window: bytes by tensor so far against standard attention, and the SRAM budget.
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

void ShowMemory(Session& s) {
  ImGui::Begin("Memory");
  const tiled::Stepper& st = *s.primary().stepper;
  const tiled::ByteCounts& b = st.bytes();
  const double frac = s.steps() ? double(st.position()) / s.steps() : 0;
  const tiled::NaiveBytes naive = tiled::naive_bytes(s.problem(), 0);
  const tiled::ByteCounts whole = st.schedule().closed_form();
  const double bw = s.gpu().hbm_effective();
  ImGui::Text("HBM <-> SRAM, one head, %s order", tiled::to_string(s.primary().order).c_str());
  HelpMarker("Every load (HBM -> SRAM) and store (SRAM -> HBM) the walk has made, by tensor; on a GPU they pass through L2.");
  if (ImGui::BeginTable("bytes", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchSame)) {
    ImGui::TableSetupColumn("tensor");
    ImGui::TableSetupColumn("read so far");
    ImGui::TableSetupColumn("written so far");
    ImGui::TableHeadersRow();
    for (int t = 0; t < tiled::kTensorCount; ++t) {
      if (!whole.load[t] && !whole.store[t] && !b.load[t] && !b.store[t]) continue;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(tiled::to_string(static_cast<tiled::TensorId>(t)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes(b.load[t]).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes(b.store[t]).c_str());
    }
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("total");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes(b.total_load()).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes(b.total_store()).c_str());
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("standard");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes(naive.read * frac).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes(naive.write * frac).c_str());
    ImGui::EndTable();
  }
  HelpMarker("standard: attention that writes S and P to HBM (Algorithm 0), prorated by the share of steps done.");
  const double so_far = double(b.total_load() + b.total_store());
  ImGui::TextWrapped("whole pass: tiled %s, standard %s (standard / tiled = %.2f)", bytes(whole.total_load() + whole.total_store()).c_str(),
              bytes(naive.read + naive.write).c_str(),
              double(naive.read + naive.write) / std::max<double>(1, whole.total_load() + whole.total_store()));
  ImGui::TextWrapped("at %s's %.2f TB/s: so far %s, standard %s", s.gpu().name.c_str(), bw / 1e12,
              seconds(so_far / bw).c_str(), seconds((naive.read + naive.write) * frac / bw).c_str());
  HelpMarker("Time these bytes take at the preset's achievable HBM bandwidth (one head, no overlap).");

  ImGui::Separator();
  const std::vector<SramItem> items = sram_footprint(st);
  int64_t used = 0;
  for (const SramItem& i : items) used += i.bytes;
  const double budget = s.gpu().smem_per_block_bytes;
  ImGui::TextWrapped("SRAM: %s of %s shared memory per block (%.0f%%)", bytes(used).c_str(), bytes(budget).c_str(),
              100.0 * used / budget);
  HelpMarker("The executor's on-chip tiles (fp32) against the preset's shared memory per thread block; over 100% would not fit.");
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float W = ImGui::GetContentRegionAvail().x, H = 22;
  ImGui::Dummy(ImVec2(W, H));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p, ImVec2(p.x + W, p.y + H), IM_COL32(40, 40, 46, 255));
  const ImU32 colours[] = {IM_COL32(230, 120, 60, 255), IM_COL32(80, 160, 220, 255), IM_COL32(90, 200, 140, 255),
                           IM_COL32(200, 90, 200, 255), IM_COL32(230, 200, 70, 255), IM_COL32(160, 160, 160, 255)};
  float x = p.x;
  for (size_t n = 0; n < items.size(); ++n) {
    const float ww = static_cast<float>(W * items[n].bytes / std::max(budget, double(used)));
    dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + ww, p.y + H), colours[n % 6]);
    if (ww > ImGui::CalcTextSize(items[n].name.c_str()).x + 4)
      dl->AddText(ImVec2(x + 2, p.y + 4), IM_COL32(0, 0, 0, 255), items[n].name.c_str());
    x += ww;
  }
  for (size_t n = 0; n < items.size(); ++n) {
    if (n % 4) ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colours[n % 6]), "%s %s", items[n].name.c_str(),
                       bytes(items[n].bytes).c_str());
  }
  ImGui::End();
}
}  // namespace flashlab::viz
