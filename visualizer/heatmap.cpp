#include "heatmap.hpp"

#include <GLFW/glfw3.h>  // GL 1.1 texture calls, exported by libGL: no loader needed

#include <algorithm>
#include <cmath>

#include "palette.hpp"

namespace flashlab::viz {

HeatmapTexture::~HeatmapTexture() {
  if (tex_) glDeleteTextures(1, &tex_);
}

void HeatmapTexture::update(const tiled::Tile& m, uint64_t version) {
  const int64_t R = m.rows(), C = m.cols();
  if (tex_ && version == version_ && m.data() == data_ && R == rows_ && C == cols_) return;
  version_ = version, data_ = m.data();
  vmax_ = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      if (std::isfinite(m(r, c))) vmax_ = std::max(vmax_, std::fabs(m(r, c)));
  rgba_.resize(static_cast<size_t>(R * C));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const Rgb x = diverging(m(r, c), vmax_);
      rgba_[r * C + c] = IM_COL32(x.r, x.g, x.b, 255);  // ImU32 is R, G, B, A in memory
    }
  if (!tex_) {
    glGenTextures(1, &tex_);
    glBindTexture(GL_TEXTURE_2D, tex_);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);  // one sharp cell per element
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  } else {
    glBindTexture(GL_TEXTURE_2D, tex_);
  }
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  if (R == rows_ && C == cols_ && uploads_ > 0)
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, static_cast<int>(C), static_cast<int>(R), GL_RGBA, GL_UNSIGNED_BYTE,
                    rgba_.data());
  else
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, static_cast<int>(C), static_cast<int>(R), 0, GL_RGBA, GL_UNSIGNED_BYTE,
                 rgba_.data());
  rows_ = R, cols_ = C;
  ++uploads_;
}

}  // namespace flashlab::viz
