#include "screenshot.hpp"

#include <GLFW/glfw3.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "flashlab/error.hpp"

namespace flashlab::viz {

void write_png(const std::string& path, int width, int height) {
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * 3);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  if (glGetError() != GL_NO_ERROR) throw Error("glReadPixels failed reading a " + std::to_string(width) + "x" +
                                               std::to_string(height) + " frame");
  // OpenGL's rows start at the bottom; PNG's at the top.
  const size_t stride = static_cast<size_t>(width) * 3;
  std::vector<unsigned char> flipped(pixels.size());
  for (int y = 0; y < height; ++y)
    std::copy_n(&pixels[(height - 1 - y) * stride], stride, &flipped[y * stride]);
  const std::string tmp = path + ".tmp";
  if (!stbi_write_png(tmp.c_str(), width, height, 3, flipped.data(), static_cast<int>(stride))) {
    std::remove(tmp.c_str());
    throw Error("cannot write " + path + ": check that its folder exists and is writable");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace flashlab::viz
