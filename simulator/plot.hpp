// An SVG of estimates: the roofline with a point per algorithm (left) and the
// speedup over standard attention against sequence length (right).
#pragma once
#include <string>
#include <vector>

#include "model.hpp"

namespace flashlab::sim {

std::string plot_svg(const GpuSpec& gpu, DType dtype, const std::vector<Estimate>& estimates);

}  // namespace flashlab::sim
