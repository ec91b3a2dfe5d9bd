#include "cache_model.hpp"

#include <algorithm>
#include <cmath>
#include <list>
#include <unordered_map>

namespace flashlab::sim {

// The share of L2 the re-used data can count on. A100 and H100 split their L2
// into two partitions, and a line read by SMs on both sides can be held in
// both; streams passing through (Q and O blocks, outputs) take their share
// too. Half the L2 is the assumption; simulator/README.md shows what it gives.
constexpr double kL2Usable = 0.5;

ReuseResult replay_l2(const ReuseWorkload& w, double l2_bytes) {
  ReuseResult r;
  const double total_ctas = w.heads * w.ctas_per_head;
  const double resident = std::max(1.0, std::min(w.resident_ctas, total_ctas));
  r.waves = std::ceil(total_ctas / resident);
  const double cap = kL2Usable * l2_bytes;
  if (w.reuse_bytes <= 0 || total_ctas <= 0) return r;

  if (w.within_cta) {
    // Every resident CTA cycles over its own head's data: LRU keeps all of it or, once the
    // sum is larger than the cache, (cyclic access) almost none of it.
    const double working_set = resident * w.key_bytes;
    r.extra_hbm_bytes = working_set <= cap ? 0.0 : w.heads * w.reuse_bytes;
    return r;
  }

  // Across CTAs: wave by wave, each wave touches the keys of the heads it holds.
  std::list<std::pair<int64_t, double>> lru;  // (key, bytes), most recent first
  std::unordered_map<int64_t, std::list<std::pair<int64_t, double>>::iterator> where;
  double cached = 0;
  int64_t last_key_seen = -1, prev_k0 = 0, prev_k1 = -1;
  const int64_t waves = static_cast<int64_t>(r.waves);
  for (int64_t wave = 0; wave < waves; ++wave) {
    const double first_cta = wave * resident, last_cta = std::min(total_ctas, (wave + 1) * resident) - 1;
    const int64_t k0 = static_cast<int64_t>(std::floor(first_cta / w.ctas_per_head / w.heads_per_key));
    const int64_t k1 = static_cast<int64_t>(std::floor(last_cta / w.ctas_per_head / w.heads_per_key));
    for (int64_t key = k0; key <= k1; ++key) {
      if (auto it = where.find(key); it != where.end()) {  // hit: move to the front
        lru.splice(lru.begin(), lru, it->second);
        if (w.equal_ctas && key >= prev_k0 && key <= prev_k1) {
          // Straddling the waves: one CTA lifetime between touches of each block (see the header).
          const double others = 0.5 * double(prev_k1 - prev_k0) + 0.5 * double(k1 - k0);
          const double footprint = (1 + others) * w.key_bytes + (last_cta - first_cta + 1) * w.stream_bytes;
          if (footprint > cap) r.extra_hbm_bytes += w.key_bytes;
        }
        continue;
      }
      // A key seen before (in an earlier wave) and evicted since is read from HBM again.
      if (key <= last_key_seen) r.extra_hbm_bytes += w.key_bytes;
      last_key_seen = std::max(last_key_seen, key);
      if (w.key_bytes <= cap) {
        lru.emplace_front(key, w.key_bytes);
        where[key] = lru.begin();
        cached += w.key_bytes;
        while (cached > cap) {
          cached -= lru.back().second;
          where.erase(lru.back().first);
          lru.pop_back();
        }
      }
    }
    prev_k0 = k0;
    prev_k1 = k1;
  }
  // Never more than every re-read going to HBM.
  r.extra_hbm_bytes = std::min(r.extra_hbm_bytes, w.heads * w.reuse_bytes);
  return r;
}

}  // namespace flashlab::sim
