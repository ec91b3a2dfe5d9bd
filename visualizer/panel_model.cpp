// The GPU model window: the simulator's estimates, the L2 strip (panel_l2.cpp), the roofline and the speedup curve.
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

const ImU32 kAlgoColour[] = {IM_COL32(220, 80, 80, 255), IM_COL32(240, 190, 60, 255), IM_COL32(80, 180, 240, 255),
                             IM_COL32(120, 220, 120, 255)};  // standard, fa1, fa2, fa3

// Roofline: achieved FLOP/s against arithmetic intensity (FLOPs per HBM byte), log-log.
void Roofline(const Session& s, ImVec2 size) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const double peak = s.gpu().tensor_peak(s.problem().dtype), bw = s.gpu().hbm_effective();
  const double x_lo = 1, x_hi = 1e5, y_lo = peak / 1e3, y_hi = peak * 2;
  const float L = 44, B = 18;  // axis margins
  auto px = [&](double ai) { return p.x + L + float((std::log10(ai) - std::log10(x_lo)) / (std::log10(x_hi) - std::log10(x_lo))) * (size.x - L - 4); };
  auto py = [&](double f) { return p.y + size.y - B - float((std::log10(f) - std::log10(y_lo)) / (std::log10(y_hi) - std::log10(y_lo))) * (size.y - B - 4); };
  dl->AddRectFilled(p, ImVec2(p.x + size.x, p.y + size.y), IM_COL32(28, 28, 34, 255));
  const double ridge = peak / bw;
  dl->AddLine(ImVec2(px(x_lo), py(std::max(y_lo, x_lo * bw))), ImVec2(px(ridge), py(peak)), IM_COL32(200, 200, 200, 255), 2);
  dl->AddLine(ImVec2(px(ridge), py(peak)), ImVec2(px(x_hi), py(peak)), IM_COL32(200, 200, 200, 255), 2);
  char t[64];
  std::snprintf(t, sizeof t, "%.0f TFLOP/s", peak / 1e12);
  dl->AddText(ImVec2(p.x + 2, py(peak) - 7), IM_COL32(180, 180, 180, 255), t);
  std::snprintf(t, sizeof t, "%.0f", y_lo / 1e12);
  dl->AddText(ImVec2(p.x + 2, py(y_lo) - 14), IM_COL32(180, 180, 180, 255), t);
  for (double ai : {1.0, 10.0, 100.0, 1000.0, 10000.0}) {
    std::snprintf(t, sizeof t, "%g", ai);
    dl->AddText(ImVec2(px(ai) - 4, p.y + size.y - B + 2), IM_COL32(150, 150, 150, 255), t);
  }
  dl->AddText(ImVec2(px(x_lo) + 4, p.y + 4), IM_COL32(150, 150, 150, 255), "FLOP/s vs FLOP per HBM byte");
  const auto& es = s.estimates();
  for (size_t n = 0; n < es.size(); ++n) {
    const sim::Estimate& e = es[n];
    const double hbm = e.hbm_read_bytes + e.hbm_write_bytes;
    if (hbm <= 0 || e.time_s <= 0) continue;
    const double ai = std::clamp(e.flops / hbm, x_lo, x_hi), f = std::clamp(e.flops / e.time_s, y_lo, y_hi);
    dl->AddCircleFilled(ImVec2(px(ai), py(f)), 5, kAlgoColour[n % 4]);
    const ImVec2 offset[] = {{8, -7}, {-30, 2}, {8, -2}, {8, -16}};  // keeps fa2 and fa3 (same bytes) apart
    dl->AddText(ImVec2(px(ai) + offset[n % 4].x, py(f) + offset[n % 4].y), kAlgoColour[n % 4], e.algo.c_str());
  }
}

// Speedup over standard attention against seqlen (log2 axis), one line per algorithm.
void SpeedupCurve(const Session& s, ImVec2 size) {
  const auto& c = s.speedup_curve();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  if (c.size() < 2) return;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  double ymax = 1;
  for (const auto& q : c) ymax = std::max({ymax, q.speedup_fa1, q.speedup_fa2, q.speedup_fa3});
  ymax *= 1.1;
  const float L = 30, B = 18;
  const double x0 = std::log2(double(c.front().seqlen)), x1 = std::log2(double(c.back().seqlen));
  auto px = [&](double n) { return p.x + L + float((std::log2(n) - x0) / (x1 - x0)) * (size.x - L - 6); };
  auto py = [&](double y) { return p.y + size.y - B - float(y / ymax) * (size.y - B - 4); };
  dl->AddRectFilled(p, ImVec2(p.x + size.x, p.y + size.y), IM_COL32(28, 28, 34, 255));
  dl->AddLine(ImVec2(px(double(c.front().seqlen)), py(1)), ImVec2(px(double(c.back().seqlen)), py(1)), IM_COL32(220, 80, 80, 160));
  char t[32];
  for (double y = 0; y <= ymax; y += ymax > 12 ? 5 : (ymax > 6 ? 2 : 1)) {
    std::snprintf(t, sizeof t, "%gx", y);
    dl->AddText(ImVec2(p.x + 2, py(y) - 7), IM_COL32(150, 150, 150, 255), t);
  }
  for (size_t n = 0; n < c.size(); n += 2) {
    std::snprintf(t, sizeof t, c[n].seqlen >= 1024 ? "%lldk" : "%lld",
                  (long long)(c[n].seqlen >= 1024 ? c[n].seqlen / 1024 : c[n].seqlen));
    dl->AddText(ImVec2(std::min(px(double(c[n].seqlen)) - 8, p.x + size.x - ImGui::CalcTextSize(t).x - 2),
                       p.y + size.y - B + 2), IM_COL32(150, 150, 150, 255), t);
  }
  for (int a = 1; a <= 3; ++a) {
    std::vector<ImVec2> pts;
    for (const auto& q : c) {
      const double y = a == 1 ? q.speedup_fa1 : (a == 2 ? q.speedup_fa2 : q.speedup_fa3);
      pts.push_back(ImVec2(px(double(q.seqlen)), py(y)));
    }
    dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), kAlgoColour[a], 0, 2);
  }
  const double n = double(s.problem().seqlen_q);
  if (n >= c.front().seqlen && n <= c.back().seqlen)
    dl->AddLine(ImVec2(px(n), p.y), ImVec2(px(n), p.y + size.y - B), IM_COL32(255, 255, 255, 120));
}

}  // namespace

void ShowModel(Session& s) {
  ImGui::Begin("GPU model");
  const Problem& p = s.problem();
  ImGui::TextWrapped("%s, batch %lld x heads %lld, N=%lld, d=%lld, %s, %s pass", s.gpu().name.c_str(),
                     (long long)s.settings().model_batch, (long long)s.settings().model_heads, (long long)p.seqlen_q,
                     (long long)p.head_dim, std::string(to_string(p.dtype)).c_str(),
                     tiled::is_backward(s.primary().order) ? "backward" : "forward");
  HelpMarker("The simulator's estimate for this problem on the preset GPU (simulator/README.md): FLOPs, HBM bytes after L2, time.");
  if (ImGui::BeginTable("est", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchSame)) {
    for (const char* h : {"algo", "time", "HBM bytes", "bound", "speedup"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (size_t n = 0; n < s.estimates().size(); ++n) {
      const sim::Estimate& e = s.estimates()[n];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kAlgoColour[n % 4]), "%s", e.algo.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(seconds(e.time_s).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes(e.hbm_read_bytes + e.hbm_write_bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(e.bound.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.2fx", e.speedup_vs_standard);
    }
    ImGui::EndTable();
  }
  DrawL2Residency(s);
  const float W = ImGui::GetContentRegionAvail().x;
  const float H = (ImGui::GetContentRegionAvail().y - 2 * ImGui::GetTextLineHeightWithSpacing()) / 2;
  ImGui::TextUnformatted("roofline");
  HelpMarker("Each point is one algorithm; under the slanted roof it is limited by HBM bandwidth, under the flat one by tensor cores.");
  Roofline(s, ImVec2(W, H));
  ImGui::TextUnformatted("speedup over standard vs seqlen:");
  for (int a = 1; a <= 3; ++a) {
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kAlgoColour[a]), "%s", a == 1 ? "fa1" : (a == 2 ? "fa2" : "fa3"));
  }
  HelpMarker("Modelled time of standard attention divided by each algorithm's, for these settings at each sequence length; the vertical line is the current N.");
  SpeedupCurve(s, ImVec2(W, H));
  ImGui::End();
}
}  // namespace flashlab::viz
