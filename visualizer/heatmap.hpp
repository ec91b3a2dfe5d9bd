// A matrix drawn as one OpenGL texture, one texel per element.
//
// Drawing a 128 x 128 tile as 16384 ImGui rectangles made a software
// rasterizer (Mesa llvmpipe) spend most of every frame on the heatmaps. Here
// the colours are computed and uploaded only when the values change (a new
// step: the Session's version), and each frame draws one textured quad. The
// tooltip still reads the value under the mouse from the matrix itself.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "stepper.hpp"

namespace flashlab::viz {

class HeatmapTexture {
 public:
  HeatmapTexture() = default;
  HeatmapTexture(const HeatmapTexture&) = delete;
  HeatmapTexture& operator=(const HeatmapTexture&) = delete;
  ~HeatmapTexture();  // needs the GL context that created it to be current

  // Recolour and upload m unless this (version, matrix) is the one on the GPU.
  void update(const tiled::Tile& m, uint64_t version);
  ImTextureID id() const { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(tex_)); }
  float vmax() const { return vmax_; }  // |value| that maps to full red or blue
  int64_t uploads() const { return uploads_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Where the panel drew it in the last frame (screen pixels): what --dump writes for the test.
  ImVec2 pos{0, 0}, size{0, 0};

 private:
  unsigned tex_ = 0;                   // GLuint
  int64_t rows_ = 0, cols_ = 0;
  uint64_t version_ = 0;
  const float* data_ = nullptr;
  float vmax_ = 0;
  int64_t uploads_ = 0;
  std::vector<uint32_t> rgba_;         // (rows, cols) ImU32 colours, the upload's staging copy
};

// Every heatmap the panels draw, by name. Owned by the App; cleared before
// the GL context goes away.
using HeatmapCache = std::map<std::string, HeatmapTexture>;

}  // namespace flashlab::viz
