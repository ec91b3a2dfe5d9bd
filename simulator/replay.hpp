// The event-driven CTA timeline: a kernel's CTAs replayed on the GPU's SM slots
// in launch order, their loads and stores sent through the L2 in time order.
//
// A kernel is a CtaGrid: its CTAs in the order the hardware (or the kernel's
// persistent tile scheduler) hands them out, and for each CTA its segments in
// order. A segment is a stretch of the CTA's work: the blocks it loads or
// stores at its start (Q_i, a chunk of K/V blocks, dQ's accumulator rows, ...)
// and the seconds of compute that follow. replay() dispatches each CTA to the
// slot that frees first (the block scheduler fills free slots in launch order),
// advances every slot segment by segment, and, always taking the earliest
// pending segment, feeds the accesses to one L2Cache: CTAs that run together
// share the blocks they stream, CTAs far apart in time find them evicted.
// DRAM bytes are the L2's misses plus its write-backs; causal imbalance, tail
// waves and heads that straddle waves fall out of the order of events.
//
// Cost: O(segments x log slots), and each segment moves the events queued after
// it by one. Grids keep their segments under kMaxSegments by coarsening: a
// segment then covers several consecutive K/V (or Q) blocks, and a key covers
// the same chunk (grids.cpp says where).
#pragma once
#include <cstdint>
#include <vector>

#include "l2_cache.hpp"

namespace flashlab::sim {

enum class AccessKind : uint8_t { load, store, update };  // update: read-modify-write (dQ's atomics)

struct Access {
  uint32_t key;  // a block of a tensor, dense in [0, CtaGrid::keys())
  double bytes;
  AccessKind kind;
};

// A deterministic backward's turn (grids.hpp DqSum::turns): the segment adds into the dQ rows of turn line
// `line` after the segments of ranks 0 .. rank - 1 on that line have released them. A segment of a chunk
// holds `steps` of its CTA's turns (one a Q block), each a hand-over after the last. kOwnOnly: a chunk of
// rotated walks, whose predecessors are steps ahead and not replayed: only its CTA's own turns count.
struct Turn {
  static constexpr uint32_t kNone = ~uint32_t{0}, kOwnOnly = kNone - 1;
  uint32_t line = kNone, rank = 0, steps = 1;
};

struct Segment {
  double seconds = 0;             // compute after the accesses
  double elements = 0;            // elements of S it computes
  double partial_elements = 0;    // of those, in tiles on the mask's edge
  std::vector<Access> accesses;   // issued at the segment's start
  Turn turn;                      // none unless the grid sums dQ in turns
};

class CtaGrid {
 public:
  virtual ~CtaGrid() = default;
  virtual int64_t ctas() const = 0;                                   // in dispatch order
  virtual int64_t segments(int64_t cta) const = 0;
  virtual void segment(int64_t cta, int64_t k, Segment& out) const = 0;  // out arrives cleared
  virtual uint32_t keys() const = 0;
  virtual int64_t head(int64_t cta) const = 0;                        // (batch, head) index, for the timeline
  // For the residency probe: the keys of one (batch, head)'s K/V chunks in block order, and which chunk a
  // CTA's segment streams (-1 when it streams none); grids without K/V chunks return nothing.
  virtual std::vector<uint32_t> kv_keys(int64_t head) const { return {}; }
  virtual int64_t segment_chunk(int64_t cta, int64_t k) const { return -1; }
  virtual int64_t chunk_blocks() const { return 1; }         // blocks per chunk (the coarsening, grids.hpp)
  virtual int64_t block(int64_t cta) const { return -1; }    // the CTA's own block (forward: its Q block)
  virtual uint32_t turn_lines() const { return 0; }          // lines of turns its segments carry (0: none)
};

// A budget of segments per replay that keeps one estimate in milliseconds.
constexpr int64_t kMaxSegments = int64_t{1} << 16;

struct ReplaySetup {
  int64_t slots = 1;              // CTAs resident at once on the whole GPU
  int64_t sms = 1;                // slot s belongs to SM s % sms (the first wave spreads over the SMs)
  double l2_capacity = 0;         // bytes the replayed blocks may occupy
  double cta_start_s = 0;         // a CTA's fixed cost before its first segment (its first loads' wait)
  // Bursts (non-persistent grids; 0: off): CTAs that start while others' first loads are in flight share
  // the chip with them. A burst opens when a CTA starts, and every CTA that starts before the burst's bytes
  // are through joins it: its first segment's DRAM traffic (the L2's misses and the write-backs they
  // force: the stores of the CTAs that ended, left dirty in the L2) goes at dram_bytes_per_s, its accesses
  // at l2_bytes_per_s, after one round trip (latency_s). Served in the order they joined, those that joined
  // at the same time together: a wave of equal CTAs starts computing together, when all its bytes are in.
  // A CTA alone still waits cta_start_s at least; the first wave is the first burst.
  double dram_bytes_per_s = 0, l2_bytes_per_s = 0, latency_s = 0;
  Replacement replacement = Replacement::random;
  double time_scale = 1;          // segment seconds are per SM; the CTAs sharing an SM each run this much slower
  // Turns (a grid with turn_lines()): a segment whose predecessor on its line released at time r ends no
  // earlier than r + turn_latency_s (its poll sees the release) + turn_tail_s (its own dQ rows land), and
  // releases turn_latency_s after it ends (L2 acknowledges those rows before the release is written). Its
  // CTA's previous turn is a predecessor too (one warp keeps a CTA's turns, in order: gpu/fa3/), unless
  // turn_look_ahead and the turn was already free when the previous one's adds were issued (its release
  // had reached L2 one round trip after that one ended): then it ends no earlier than turn_stream_s after
  // the previous one (the CTA's adds back to back).
  double turn_latency_s = 0, turn_tail_s = 0, turn_stream_s = 0;
  bool turn_look_ahead = false;
};

// One CTA as it ran, for `flashlab estimate --timeline`.
struct CtaSpan {
  int64_t cta = 0, slot = 0, head = 0;
  double start_s = 0, end_s = 0;
  double hit_bytes = 0, miss_bytes = 0;  // its loads that hit L2, and those that went to DRAM
};

struct ReplayResult {
  double makespan_s = 0;
  double dram_read = 0, dram_write = 0;  // L2 misses, write-backs (dirty evictions and the final flush)
  double l2_loaded = 0, l2_hits = 0;      // bytes of the replayed accesses, and those that hit
  double elements = 0, partial_elements = 0;
  int64_t segments = 0;
  double turn_wait_s = 0;                 // summed over segments: how much later turns made them end
  double own_turn_wait_s = 0;             // of which, waits for the CTA's own previous turn (its rows landing)
};

// What the L2 held of one (batch, head)'s K/V as its CTAs advanced: for each of its CTAs in launch order
// and each segment, the chunk the segment streams and, at the segment's start, which chunks were resident.
struct Residency {
  int64_t head = 0;                       // the (batch, head) probed
  int64_t chunk_blocks = 1;               // K/V blocks per chunk
  struct Step {
    int64_t block, segment, chunk;        // the CTA's Q block; chunk: the K/V chunk this segment loads
    std::vector<bool> resident;           // per chunk, before the segment's loads
  };
  std::vector<Step> steps;
};

ReplayResult replay(const CtaGrid& grid, const ReplaySetup& setup, std::vector<CtaSpan>* timeline = nullptr,
                    Residency* probe = nullptr);

}  // namespace flashlab::sim
