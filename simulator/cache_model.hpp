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
//
// A head whose CTAs straddle two waves is the one case a whole-head LRU gets
// wrong: its CTAs walk the head's K/V blocks in order, so the CTAs of the next
// wave re-read block j one CTA lifetime after those of this wave read it
// (cyclic reuse). In between, the GPU touched the whole head's data, the other
// heads' data of both waves (half of each on average, by loop position) and
// the wave's streamed Q/O blocks. If that footprint exceeds the usable L2,
// LRU evicts each block just before its re-read: the whole head is read again.
// This needs the CTAs of a wave to run in step (equal work per CTA); under a
// causal mask they do not, and the rule is not applied.
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
  double stream_bytes = 0;     // bytes one CTA reads or writes once and never again (forward: Q_i, O_i)
  bool equal_ctas = false;     // every CTA of a head does the same work, so a wave's CTAs run in step
  bool within_cta = false;     // FA1: the re-use is inside one CTA
};

struct ReuseResult {
  double extra_hbm_bytes = 0;  // re-read traffic that misses L2 and reaches HBM
  double waves = 0;
};

ReuseResult replay_l2(const ReuseWorkload& w, double l2_bytes);

}  // namespace flashlab::sim
