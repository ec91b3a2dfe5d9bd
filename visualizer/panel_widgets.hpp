// The small pieces every panel draws with: the "(?)" help marker, colours, number formatting
// (flashlab/format.hpp, binary byte units) and a matrix heatmap.
#pragma once
#include <imgui.h>

#include <string>

#include "heatmap.hpp"
#include "palette.hpp"
#include "events.hpp"

namespace flashlab::viz {

void HelpMarker(const char* desc);  // the "(?)" of imgui_demo.cpp: a one-sentence explanation on hover
inline ImU32 col(Rgb c, int a = 255) { return IM_COL32(c.r, c.g, c.b, a); }
std::string num(double x);
std::string bytes(double b);
std::string seconds(double t);
// A matrix as one texture inside `size` (heatmap.hpp: uploaded only when the step changes), with its value
// under the mouse read from the matrix itself; row0/col0 name the first row and column in the tooltip.
void Heatmap(const char* id, const tiled::Tile& m, HeatmapCache& heat, uint64_t version, ImVec2 size, int64_t row0,
             int64_t col0, const char* what);

}  // namespace flashlab::viz
