// What the visualizer's two screenshot checks (test_screenshot.cpp, test_decode_screenshot.cpp) share: a
// failure count that does not stop at the first, the dump's numbers (non-finite ones are strings), and
// the PNG's pixels. Included by one test file each; every function is inline.
#pragma once
#include <stb_image.h>

#include <cmath>
#include <cstddef>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "palette.hpp"

namespace flashlab::viz::check {

inline int failures = 0;
inline void fail(const std::string& what) {
  std::cerr << "FAIL: " << what << "\n";
  ++failures;
}

inline double value(const nlohmann::json& j) {  // the dump writes non-finite numbers as strings
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  return s == "-inf" ? -INFINITY : (s == "inf" ? INFINITY : NAN);
}

inline bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// An RGB image read with stb_image; empty (w == 0) when the file cannot be read.
struct Image {
  int w = 0, h = 0;
  unsigned char* px = nullptr;
  explicit Image(const std::string& path) {
    int channels = 0;
    px = stbi_load(path.c_str(), &w, &h, &channels, 3);
    if (!px) w = h = 0;
  }
  ~Image() { stbi_image_free(px); }
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;
  Rgb at(int x, int y) const {
    const unsigned char* p = px + (static_cast<size_t>(y) * w + x) * 3;
    return {p[0], p[1], p[2]};
  }
};

}  // namespace flashlab::viz::check
