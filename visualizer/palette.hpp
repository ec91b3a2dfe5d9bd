// The tile grid's colours, shared by the grid panel and the screenshot test
// (which checks that the current tile's pixel has kCurrent).
#pragma once
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

}  // namespace flashlab::viz
