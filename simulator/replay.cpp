#include "replay.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "flashlab/error.hpp"
#include "l2_cache.hpp"

namespace flashlab::sim {
namespace {

// The slots' next events, earliest first (ties: the lower slot): a sorted array read from `head_`, at most
// one event a slot. A pop moves `head_`; a push walks from the end towards the front, moving each later
// event up by one, and drops the event into the gap (about 26 of 132 events at seqlen 64k, where the
// coarsened chunks put the slots out of step); the array moves back to its front when it reaches its end
// (after 3 x slots pops or more). A binary heap spent half an estimate's time in the unpredictable
// branches of its pops; a binary search and a memmove, 15% in the search's (bench/simulator_speed.cpp,
// perf; bench/results/simulator-speed-2026-11-27-cpu2c.md).
class EventQueue {
 public:
  struct Event {
    double t;  // when the slot is next free
    int64_t slot;
    bool operator<(const Event& o) const { return t < o.t || (t == o.t && slot < o.slot); }
  };
  explicit EventQueue(int64_t slots) : events_(4 * size_t(slots) + 1) {}
  bool empty() const { return head_ == end_; }
  const Event& top() const { return events_[head_]; }
  void pop() { ++head_; }
  void push(const Event& e) {
    if (end_ == events_.size()) {
      std::memmove(events_.data(), events_.data() + head_, (end_ - head_) * sizeof(Event));
      end_ -= head_;
      head_ = 0;
    }
    size_t i = end_++;
    for (; i > head_ && e < events_[i - 1]; --i) events_[i] = events_[i - 1];
    events_[i] = e;
  }

 private:
  std::vector<Event> events_;
  size_t head_ = 0, end_ = 0;
};

}  // namespace

ReplayResult replay(const CtaGrid& grid, const ReplaySetup& setup, std::vector<CtaSpan>* timeline, Residency* probe) {
  const std::vector<uint32_t> probed = probe ? grid.kv_keys(probe->head) : std::vector<uint32_t>{};
  if (probe) probe->chunk_blocks = grid.chunk_blocks();
  struct Slot {
    int64_t cta = -1, next = 0, count = 0;
    CtaSpan span;
    double released = -1;  // its CTA's last turn's release (turns only; -1: none yet)
  };
  const int64_t n = grid.ctas();
  const int64_t slots = std::max<int64_t>(1, std::min(setup.slots, n));
  std::vector<Slot> slot(slots);
  EventQueue pending(slots);
  for (int64_t s = 0; s < slots; ++s) pending.push({0.0, s});

  L2Cache l2(setup.l2_capacity, grid.keys(), setup.replacement);
  Segment seg;
  ReplayResult r;
  int64_t next_cta = 0;
  const bool bursts = setup.dram_bytes_per_s > 0 && setup.l2_bytes_per_s > 0;
  // The burst in flight: its CTAs (slot, the time it started, its first segment's compute), its start and
  // the bytes it has sent so far (DRAM traffic as the L2 counts it, accesses through the L2).
  struct Member {
    int64_t slot;
    double t, seconds, dram, l2;  // dram, l2: the burst's bytes once this CTA's are in
    Turn turn;                    // its first segment's, taken when the burst closes
  };
  std::vector<Member> burst;
  double burst_t0 = 0, burst_dram = 0, burst_l2 = 0;
  // When bytes sent since the burst opened are through: one round trip, then DRAM and L2 at their rates.
  auto through = [&](double dram, double l2_bytes) {
    return burst_t0 + setup.latency_s + std::max(dram / setup.dram_bytes_per_s, l2_bytes / setup.l2_bytes_per_s);
  };
  auto burst_end = [&] { return through(burst_dram, burst_l2); };
  // Turns (a deterministic backward's dQ): per line, the rank whose turn it is and when the last rank
  // released. A segment's loads and compute run when they would; only its end waits for its turn. A segment
  // that ends before its predecessor on the line has even been replayed is parked with the end it would
  // have, and finished when that predecessor releases.
  struct Line {
    uint32_t next_rank = 0;
    double released = 0;
  };
  struct Parked {
    uint32_t rank;
    int64_t slot;
    double end;
  };
  std::vector<Line> lines(grid.turn_lines());
  std::vector<std::vector<Parked>> parked(lines.size());
  int64_t parked_count = 0;
  // A turn also waits for its CTA's previous one: released, then polled for this one, then its own rows;
  // or, looked ahead to (free by the time the previous one's adds were issued), only for those adds.
  // A segment of a chunk holds `steps` turns, each after the one before it in the same way.
  auto after_own = [&](const Turn& turn, double end, int64_t s) {
    if (slot[s].released < 0) return end;
    const double L = setup.turn_latency_s, previous_end = slot[s].released - L;
    const bool free = turn.line != Turn::kOwnOnly &&
                      (turn.rank == 0 || (turn.rank == lines[turn.line].next_rank &&
                                          lines[turn.line].released <= slot[s].released));
    const double each = setup.turn_look_ahead && free ? setup.turn_stream_s : 2 * L + setup.turn_tail_s;
    const double ready = previous_end + double(turn.steps) * each;
    if (ready <= end) return end;
    r.turn_wait_s += ready - end;
    r.own_turn_wait_s += ready - end;
    return ready;
  };
  auto finish = [&](const Turn& turn, double end, int64_t s) {
    if (turn.line == Turn::kNone) {
      pending.push({end, s});
      return;
    }
    end = after_own(turn, end, s);
    if (turn.line == Turn::kOwnOnly) {
      slot[s].released = end + setup.turn_latency_s;
      pending.push({end, s});
      return;
    }
    Line& line = lines[turn.line];
    if (turn.rank != line.next_rank) {  // its predecessor is still to come
      parked[turn.line].push_back({turn.rank, s, end});
      ++parked_count;
      return;
    }
    for (;;) {  // this turn, then every parked successor it frees
      if (line.next_rank > 0) {
        const double ready = line.released + setup.turn_latency_s + setup.turn_tail_s;
        if (ready > end) r.turn_wait_s += ready - end, end = ready;
      }
      ++line.next_rank;
      line.released = slot[s].released = end + setup.turn_latency_s;
      pending.push({end, s});
      auto& waiting = parked[turn.line];
      const auto next = std::find_if(waiting.begin(), waiting.end(),
                                     [&](const Parked& w) { return w.rank == line.next_rank; });
      if (next == waiting.end()) return;
      s = next->slot;
      end = next->end;
      waiting.erase(next);
      --parked_count;
    }
  };
  // Served in the order the CTAs joined, those that joined at the same time together (a wave that starts
  // together finishes together): a CTA computes once its bytes and those sent with or before it are through.
  auto close_burst = [&] {
    for (size_t i = burst.size(); i-- > 1;)
      if (burst[i - 1].t == burst[i].t) {
        burst[i - 1].dram = burst[i].dram;
        burst[i - 1].l2 = burst[i].l2;
      }
    for (const Member& m : burst)
      finish(m.turn, std::max(m.t + setup.cta_start_s, through(m.dram, m.l2)) + m.seconds, m.slot);
    burst.clear();
  };
  for (;;) {
    if (pending.empty()) {  // every slot idle or parked: the burst in flight closes (and may wake some)
      if (burst.empty()) break;
      close_burst();
      continue;
    }
    auto [t, s] = pending.top();
    if (!burst.empty() && t >= burst_end()) {  // the burst's loads are through before this event
      close_burst();
      continue;
    }
    pending.pop();
    Slot& sl = slot[s];
    if (sl.cta >= 0 && sl.next == sl.count) {  // its CTA is done
      sl.span.end_s = t;
      if (timeline) timeline->push_back(sl.span);
      sl.cta = -1;
    }
    bool first = false;
    if (sl.cta < 0) {  // take the next CTA in launch order, if any
      if (next_cta == n) {
        r.makespan_s = std::max(r.makespan_s, t);
        if (pending.empty() && !burst.empty()) close_burst();
        continue;
      }
      sl.cta = next_cta++;
      sl.next = 0;
      sl.released = -1;
      sl.count = grid.segments(sl.cta);
      sl.span = CtaSpan{sl.cta, s, grid.head(sl.cta), t, t, 0, 0};
      if (sl.count == 0) {
        pending.push({t + setup.cta_start_s, s});
        continue;
      }
      first = bursts;
      if (!bursts) t += setup.cta_start_s;
    }
    if (first && burst.empty()) {
      burst_t0 = t;
      burst_dram = burst_l2 = 0;
    }
    const double dram_before = first ? l2.dram_read() + l2.dram_write() : 0.0;
    seg.accesses.clear();
    seg.seconds = seg.elements = seg.partial_elements = 0;
    seg.turn = Turn{};
    if (!probed.empty() && grid.head(sl.cta) == probe->head) {
      Residency::Step st{grid.block(sl.cta), sl.next, grid.segment_chunk(sl.cta, sl.next),
                         std::vector<bool>(probed.size())};
      for (size_t n = 0; n < probed.size(); ++n) st.resident[n] = l2.resident(probed[n]);
      probe->steps.push_back(std::move(st));
    }
    grid.segment(sl.cta, sl.next++, seg);
    // Each of seg's counts read on its own, the two far apart: read together as one 16-byte load, just
    // after segment() stored them one by one, they cost the store-to-load forwarding stall that was an
    // eighth of the sweep's time (perf).
    r.elements += seg.elements;
    ++r.segments;
    for (const Access& a : seg.accesses) {
      double hit = 0;
      switch (a.kind) {
        case AccessKind::load: hit = l2.load(a.key, a.bytes); break;
        case AccessKind::update: hit = l2.update(a.key, a.bytes); break;
        case AccessKind::store: l2.store(a.key, a.bytes); continue;
      }
      sl.span.hit_bytes += hit;
      sl.span.miss_bytes += a.bytes - hit;
      if (first) burst_l2 += a.bytes;
    }
    r.partial_elements += seg.partial_elements;
    if (first) {  // joins the burst: computes once the burst's bytes are through
      burst_dram += l2.dram_read() + l2.dram_write() - dram_before;
      burst.push_back({s, t, seg.seconds * setup.time_scale, burst_dram, burst_l2, seg.turn});
      if (pending.empty()) close_burst();
      continue;
    }
    if (seg.turn.line == Turn::kNone) pending.push({t + seg.seconds * setup.time_scale, s});  // the common case
    else finish(seg.turn, t + seg.seconds * setup.time_scale, s);
  }
  if (parked_count > 0)
    throw Error("replay: " + std::to_string(parked_count) + " segments wait on a turn that never comes (the grid's "
                "order of turns does not follow its launch order)");
  l2.flush();
  r.dram_read = l2.dram_read();
  r.dram_write = l2.dram_write();
  r.l2_loaded = l2.access_bytes();
  r.l2_hits = l2.hit_bytes();
  return r;
}

}  // namespace flashlab::sim
