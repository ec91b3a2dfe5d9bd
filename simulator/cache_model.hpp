// The L2 cache model: which re-reads of a fused kernel reach HBM.
//
// A fused attention kernel reads each input once from HBM if nothing it
// re-reads is evicted before its next use. Two kinds of re-use matter:
//   across CTAs  (FA2/FA3 forward: every Q-block CTA of a head streams the
//                same K and V; backward: every K/V-block CTA streams the same
//                Q, dO and dQ): CTAs are launched head by head, and as many run
//                at once as the SMs hold. CTAs of one head that are resident
//                together share each block they stream; a head whose CTAs span
//                waves finds its data in L2 only if it was not evicted by the
//                waves between.
//   within a CTA (FA1: one CTA per head passes over Q and O once per K/V block):
//                the re-reads hit only if the working sets of all resident CTAs
//                fit in L2 together.
// The model replays the launch order wave by wave through an LRU of the L2's
// size (minus a reserve for the streams passing through), at the granularity of
// one head's re-used data: O(waves + heads), fast enough for sweeps.
#pragma once
#include <cstdint>

namespace flashlab::sim {

struct ReuseWorkload {
  double heads = 0;            // independent groups of CTAs (batch x heads)
  double ctas_per_head = 0;    // CTAs launched consecutively for one head
  double resident_ctas = 0;    // CTAs running at once on the whole GPU
  double key_bytes = 0;        // bytes of one head's re-used data
  double heads_per_key = 1;    // consecutive heads sharing one key's data (GQA: K/V of a kv head)
  double reuse_bytes = 0;      // one head's re-read traffic beyond the first read (from the schedule)
  bool within_cta = false;     // FA1: the re-use is inside one CTA
};

struct ReuseResult {
  double extra_hbm_bytes = 0;  // re-read traffic that misses L2 and reaches HBM
  double waves = 0;
};

ReuseResult replay_l2(const ReuseWorkload& w, double l2_bytes);

}  // namespace flashlab::sim
