// flashlab-viz --decode's colours, shared with its screenshot test (which checks
// that a page box has its batch entry's colour and the current key block kCurrent).
#pragma once
#include "palette.hpp"

namespace flashlab::viz {

// One colour per batch entry (cycled): the pages it owns and its block table row.
inline constexpr Rgb kEntry[] = {{60, 140, 200}, {200, 110, 60}, {90, 170, 90}, {170, 90, 180},
                                 {190, 170, 60}, {60, 170, 170}, {200, 80, 120}, {130, 130, 200}};
inline constexpr int kEntryCount = 8;
inline Rgb entry_colour(int64_t b) { return kEntry[b % kEntryCount]; }

// One colour per split (the CTA that walks it), cycled; pending blocks dimmed.
inline constexpr Rgb kSplit[] = {{80, 160, 230}, {230, 110, 160}, {120, 200, 110}, {200, 160, 240},
                                 {240, 200, 90}, {90, 210, 200}};
inline constexpr int kSplitCount = 6;
inline Rgb split_colour(int64_t s) { return kSplit[s % kSplitCount]; }
inline Rgb dimmed(Rgb c) { return {static_cast<uint8_t>(c.r / 3), static_cast<uint8_t>(c.g / 3), static_cast<uint8_t>(c.b / 3)}; }

inline constexpr Rgb kAppended{250, 250, 250};  // rows appended by this call (K_new, V_new)
inline constexpr Rgb kUnusedRow{40, 42, 48};    // page rows beyond seqlen_k
inline constexpr Rgb kFreePage{28, 28, 32};     // a physical page no block table entry maps

}  // namespace flashlab::viz
