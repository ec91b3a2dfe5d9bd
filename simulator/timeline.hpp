// The replay made visible: each fused kernel's CTAs on the SM slots over time
// (`flashlab estimate --timeline out.svg` or `out.json`).
//
// SVG: one panel per kernel; a row per CTA slot, a bar per CTA from its start
// to its end, its upper part coloured by (batch, head), its lower strip by the
// share of its loads that missed L2 (green: all hits, red: all from DRAM). A
// causal FA2 forward at 16k shows the late CTAs of each head turning red:
// they start after the head's K/V blocks were evicted by the heads between.
#pragma once
#include <string>
#include <vector>

#include "model.hpp"

namespace flashlab::sim {

std::string timeline_svg(const std::vector<KernelTimeline>& kernels, const std::string& title);
std::string timeline_json(const std::vector<KernelTimeline>& kernels, const std::string& title);

}  // namespace flashlab::sim
