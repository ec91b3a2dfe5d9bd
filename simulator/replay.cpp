#include "replay.hpp"

#include <algorithm>
#include <queue>

#include "l2_cache.hpp"

namespace flashlab::sim {

ReplayResult replay(const CtaGrid& grid, const ReplaySetup& setup, std::vector<CtaSpan>* timeline, Residency* probe) {
  const std::vector<uint32_t> probed = probe ? grid.kv_keys(probe->head) : std::vector<uint32_t>{};
  if (probe) probe->chunk_blocks = grid.chunk_blocks();
  struct Slot {
    int64_t cta = -1, next = 0, count = 0;
    CtaSpan span;
  };
  const int64_t n = grid.ctas();
  const int64_t slots = std::max<int64_t>(1, std::min(setup.slots, n));
  std::vector<Slot> slot(slots);
  using Event = std::pair<double, int64_t>;  // (time the slot is next free, slot)
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> pending;
  for (int64_t s = 0; s < slots; ++s) pending.push({0.0, s});

  L2Cache l2(setup.l2_capacity, grid.keys(), setup.replacement);
  Segment seg;
  ReplayResult r;
  int64_t next_cta = 0;
  while (!pending.empty()) {
    auto [t, s] = pending.top();
    pending.pop();
    Slot& sl = slot[s];
    if (sl.cta >= 0 && sl.next == sl.count) {  // its CTA is done
      sl.span.end_s = t;
      if (timeline) timeline->push_back(sl.span);
      sl.cta = -1;
    }
    if (sl.cta < 0) {  // take the next CTA in launch order, if any
      if (next_cta == n) {
        r.makespan_s = std::max(r.makespan_s, t);
        continue;
      }
      sl.cta = next_cta++;
      sl.next = 0;
      sl.count = grid.segments(sl.cta);
      sl.span = CtaSpan{sl.cta, s, grid.head(sl.cta), t, t, 0, 0};
      t += sl.cta < slots ? setup.first_wave_start_s : setup.cta_start_s;
      if (sl.count == 0) {
        pending.push({t, s});
        continue;
      }
    }
    seg.accesses.clear();
    seg.seconds = seg.elements = seg.partial_elements = 0;
    if (!probed.empty() && grid.head(sl.cta) == probe->head) {
      Residency::Step st{grid.block(sl.cta), sl.next, grid.segment_chunk(sl.cta, sl.next),
                         std::vector<bool>(probed.size())};
      for (size_t n = 0; n < probed.size(); ++n) st.resident[n] = l2.resident(probed[n]);
      probe->steps.push_back(std::move(st));
    }
    grid.segment(sl.cta, sl.next++, seg);
    r.elements += seg.elements;
    r.partial_elements += seg.partial_elements;
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
    }
    pending.push({t + seg.seconds * setup.time_scale, s});
  }
  l2.flush();
  r.dram_read = l2.dram_read();
  r.dram_write = l2.dram_write();
  r.l2_loaded = l2.access_bytes();
  r.l2_hits = l2.hit_bytes();
  return r;
}

}  // namespace flashlab::sim
