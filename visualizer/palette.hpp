// The tile grid's colours and the heatmaps' colour map, shared by the panels
// and the screenshot test (which checks that the current tile's pixel has
// kCurrent and that heatmap cells have the colour of their value).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace flashlab::viz {

struct Rgb {
  uint8_t r, g, b;
};

inline constexpr Rgb kPending{70, 74, 84};      // not visited yet
inline constexpr Rgb kDone{46, 120, 200};       // visited: its contribution is in O (or dK, dV, dQ)
inline constexpr Rgb kSkipped{24, 24, 28};      // every element masked: never loaded, never computed
inline constexpr Rgb kSkippedDone{36, 36, 44};  // a masked tile the walk has passed
inline constexpr Rgb kResident{120, 170, 90};   // the block that stays in SRAM across the inner loop
inline constexpr Rgb kCurrent{255, 170, 30};    // the tile in SRAM now: Q_i x K_j
inline constexpr Rgb kCurrentSkipped{150, 60, 60};  // the current step is a skipped tile

// Heatmaps: a diverging map, negative blue, zero white-grey, positive red, at
// full strength from |v| = vmax (the matrix's largest finite |value|); -inf
// (masked) is the skipped tiles' near-black.
inline Rgb diverging(float v, float vmax) {
  if (!std::isfinite(v)) return kSkipped;
  const float t = std::clamp(vmax > 0 ? v / vmax : 0.0f, -1.0f, 1.0f);
  const auto mix = [](float a, float b, float u) { return static_cast<uint8_t>(a + (b - a) * u); };
  if (t >= 0) return {mix(235, 200, t), mix(235, 40, t), mix(235, 40, t)};
  return {mix(235, 40, -t), mix(235, 90, -t), mix(235, 200, -t)};
}

}  // namespace flashlab::viz
