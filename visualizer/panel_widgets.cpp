#include "panel_widgets.hpp"

#include <algorithm>

#include "flashlab/format.hpp"

namespace flashlab::viz {

void HelpMarker(const char* desc) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
    ImGui::TextUnformatted(desc);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

// Numbers, bytes and times as people read them: flashlab/format.hpp (binary byte units everywhere).
std::string num(double x) { return format_number(x, 5); }
std::string bytes(double b) { return format_bytes(b); }
std::string seconds(double t) { return format_seconds(t); }

void Heatmap(const char* id, const tiled::Tile& m, HeatmapCache& heat, uint64_t version, ImVec2 size, int64_t row0,
             int64_t col0, const char* what) {
  ImGui::PushID(id);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const int64_t R = m.rows(), C = m.cols();
  if (R == 0 || C == 0) {
    ImGui::Dummy(size);
    ImGui::PopID();
    return;
  }
  HeatmapTexture& tex = heat[id];
  tex.update(m, version);
  tex.pos = p0, tex.size = size;
  ImGui::Image(tex.id(), size);
  ImGui::GetWindowDrawList()->AddRect(p0, ImVec2(p0.x + size.x, p0.y + size.y), IM_COL32(150, 150, 150, 255));
  if (ImGui::IsItemHovered()) {
    const float cw = size.x / C, ch = size.y / R;
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int64_t c = std::clamp<int64_t>(static_cast<int64_t>((mp.x - p0.x) / cw), 0, C - 1);
    const int64_t r = std::clamp<int64_t>(static_cast<int64_t>((mp.y - p0.y) / ch), 0, R - 1);
    ImGui::SetTooltip("%s[%lld, %lld] = %s\n(query row %lld, %s %lld)", id, (long long)r, (long long)c,
                      num(m(r, c)).c_str(), (long long)(row0 + r), what, (long long)(col0 + c));
  }
  ImGui::PopID();
}

}  // namespace flashlab::viz
