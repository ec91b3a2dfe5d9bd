// How flashlab writes numbers for people (tables, the step view, the visualizer's panels). One unit
// system: byte counts in binary units (1 KiB = 1024 B, MiB, GiB, TiB), as the presets count memory;
// times in s, ms or us. Machine-readable output (JSON, CSV) writes plain numbers instead.
#pragma once
#include <string>

namespace flashlab {

std::string format_number(double x, int significant = 4);  // %.<significant>g; nan, inf, -inf spelled out
std::string format_bytes(double bytes);                     // "512 B", "16.0 KiB", "1.25 MiB", "3.00 GiB"
std::string format_seconds(double seconds);                 // "1.50 s", "2.34 ms", "87.5 us"

}  // namespace flashlab
