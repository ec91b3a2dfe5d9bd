// The order a kernel deals its tiles to CTAs under a causal mask or a mask function, whose tiles are of
// unequal length: longest first, so that the short tiles fill the end and the CTAs finish together
// (longest processing time first), within sections of (batch, head) pairs whose shared reads (a forward's
// K and V) fit half the L2 (FA3's scheduler does the same), so that the CTAs in flight share a few heads'
// K and V through L2.
//
// A tile is (line, pair): a line is a Q block (a forward) or a K/V block (a backward's dK/dV), a pair a
// (batch, head) unit. Inside a section the lines go one by one in `order` (the mask's lines, longest walk
// first: tiled::longest_first), or from the last without one (causal), every pair of the section inside
// each: a round of tiles is then of nearly one length. fa3's persistent scheduler (fa3/scheduler.cuh)
// hands tiles out in this order as its CTAs ask; fa2's kernels take it as their grid's order (the
// hardware dispatches a grid's CTAs in blockIdx order as slots free up, which is the same greedy deal).
// Host and device: the simulator replays the same order (simulator/grids.cpp).
#pragma once

#include "host_device.hpp"

namespace flashlab::gpu {

struct DealtTile {
  int line, pair;
};

// Tile t (0 <= t < lines x pairs) of the longest-first deal over `sections` sections of pairs, whose sizes
// differ by at most one (the first pairs % sections take one more).
FLASHLAB_HOST_DEVICE inline DealtTile longest_first_tile(int t, int lines, int pairs, int sections, const int* order) {
  const int small = pairs / sections, big_ones = pairs % sections;
  const int big_tiles = big_ones * (small + 1) * lines;  // the tiles of the bigger sections, dealt first
  int first, n, r;  // the section's first pair, its pairs, t's rank inside it
  if (t < big_tiles) {
    const int k = t / ((small + 1) * lines);
    first = k * (small + 1);
    n = small + 1;
    r = t - first * lines;
  } else {
    const int k = (t - big_tiles) / (small * lines);
    first = big_ones * (small + 1) + k * small;
    n = small;
    r = t - first * lines;
  }
  return {order ? order[r / n] : lines - 1 - r / n, first + r % n};
}

// How many sections: as few as keep each one's pairs' shared bytes (pair_bytes a pair) within half of an
// L2 of l2_bytes; evened out by longest_first_tile, so that no section is a sliver of a few pairs whose
// longest tiles start last. Under a mask function a round of tiles reads only its lines' walks, so the
// caller counts the longest walk's blocks rather than the whole sequence (DeviceMask).
inline int l2_sections(double l2_bytes, double pair_bytes, int pairs) {
  if (pairs <= 1) return 1;
  const double fit = l2_bytes / 2 / (pair_bytes > 1 ? pair_bytes : 1);
  const int most = fit < 1 ? 1 : fit >= pairs ? pairs : int(fit);
  return (pairs + most - 1) / most;
}

// The bytes a pair's tiles share a block of a line's walk, what l2_sections is given (times the longest
// walk): a forward's K and V block (its kv head's, shared by the group's query heads); dK/dV's Q, dO and
// fp32 dQ rows of a Q block, for every query head of its kv head's group. elem: bytes an element.
inline double forward_block_bytes(double block_n, int head_dim, int group, double elem = 2) {
  return 2 * elem * block_n * head_dim / group;
}
inline double dkdv_block_bytes(double block_m, int head_dim, int group, double elem = 2) {
  return (2 * elem + 4) * block_m * head_dim * group;
}

// A deterministic backward's rotated walks (gpu/fa3/: dQ added into each Q block by the K/V blocks that see
// it, one at a time in a fixed order). Where every K/V block of an entry walks every place of its kv head's
// group (place c = query head of the group x Q blocks + Q block: no mask function, no causal or window
// rule), K/V block j starts at place j mod places and wraps around, visiting c at step (c - j) mod places,
// and the turns at c go by that step (among blocks at one step, more blocks than places, from the last):
// a head's K/V blocks are at different places at every step, each finding its predecessor's addition a
// step old (without rotation all start at place 0 and queue there in a chain). A block may then wait on
// one launched after it, so a kernel rotates only when a head's K/V blocks all fit on the device at once:
// the hardware launching a grid in blockIdx order, the oldest unfinished head is then wholly resident
// and its waits go by step, without a cycle.
inline bool rotates_walks(bool every_block_walks_every_place, long long blocks_kv, long long resident_ctas) {
  return every_block_walks_every_place && blocks_kv <= resident_ctas;
}
// How many K/V blocks add into the place that block j visits at step t before it: those j' with j' mod
// places in the cyclic interval (c - t, c], c = (t + j) mod places (t full rounds of blocks_kv / places and
// the residues under blocks_kv % places), and the blocks after j at j's own residue.
FLASHLAB_HOST_DEVICE inline int rotated_turn_rank(int places, int t, int j, int blocks_kv) {
  const int rot = j % places, c = t + rot < places ? t + rot : t + rot - places;
  const int full = blocks_kv / places, rem = blocks_kv % places, lo = c - t + 1;
  const int top = c + 1 < rem ? c + 1 : rem, low = lo < rem ? lo : rem, wrapped = lo + places < rem ? lo + places : rem;
  const int under = lo >= 0 ? top - low : top + rem - wrapped;
  return t * full + under + (blocks_kv - 1 - j) / places;
}

}  // namespace flashlab::gpu
