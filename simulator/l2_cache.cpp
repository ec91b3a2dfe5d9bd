#include "l2_cache.hpp"

#include <algorithm>

namespace flashlab::sim {

L2Cache::L2Cache(double capacity_bytes, uint32_t keys, Replacement policy)
    : policy_(policy), line_(keys), capacity_(capacity_bytes) {
  if (policy == Replacement::lru) prev_.assign(keys, kNone), next_.assign(keys, kNone);
}

std::size_t L2Cache::victim_place() {
  for (;;) {  // any resident block but the one being filled; xorshift64 keeps runs reproducible
    rng_ ^= rng_ << 13, rng_ ^= rng_ >> 7, rng_ ^= rng_ << 17;
    const std::size_t at = rng_ % resident_.size();
    if (resident_[at] != last_) return at;
  }
}

void L2Cache::unlink(uint32_t k) {
  (prev_[k] == kNone ? head_ : next_[prev_[k]]) = next_[k];
  (next_[k] == kNone ? tail_ : prev_[next_[k]]) = prev_[k];
  prev_[k] = next_[k] = kNone;
}

void L2Cache::push_front(uint32_t k) {
  prev_[k] = kNone;
  next_[k] = head_;
  if (head_ != kNone) prev_[head_] = k;
  head_ = k;
  if (tail_ == kNone) tail_ = k;
}

void L2Cache::evict_to_fit() {
  const bool lru = policy_ == Replacement::lru;
  while (used_ > capacity_ && (lru ? tail_ != kNone && tail_ != head_ : resident_.size() > 1)) {
    uint32_t key = tail_;
    if (lru) {
      unlink(key);
    } else {  // swap-remove from the resident list, at the place random replacement drew
      const std::size_t at = victim_place();
      key = resident_[at];
      resident_[at] = resident_.back();
      resident_.pop_back();
    }
    Line& v = line_[key];
    used_ -= v.bytes;
    if (v.dirty) write_ += v.bytes;
    v.present = v.dirty = false;
  }
}

double L2Cache::touch(uint32_t k, double bytes) {
  access_ += bytes;
  const bool lru = policy_ == Replacement::lru;
  Line& l = line_[k];
  double hit = 0;
  if (l.present) {
    if (lru) unlink(k);
    hit = std::min(bytes, l.bytes);
  } else {
    l.present = true;
    l.bytes = 0;
    if (!lru) resident_.push_back(k);
  }
  if (lru) push_front(k);
  last_ = k;
  if (bytes > l.bytes) {  // a block read in part before (a causal diagonal chunk) grows to what is asked
    used_ += bytes - l.bytes;
    l.bytes = bytes;
  }
  return hit;
}

double L2Cache::load(uint32_t k, double bytes) {
  const double hit = touch(k, bytes);
  hit_ += hit;
  read_ += bytes - hit;
  evict_to_fit();
  return hit;
}

void L2Cache::store(uint32_t k, double bytes) {
  touch(k, bytes);
  line_[k].dirty = true;
  evict_to_fit();
}

double L2Cache::update(uint32_t k, double bytes) {
  const double hit = load(k, bytes);
  line_[k].dirty = true;
  return hit;
}

void L2Cache::flush() {
  auto write_back = [&](uint32_t k) {
    if (!line_[k].dirty) return;
    write_ += line_[k].bytes;
    line_[k].dirty = false;
  };
  if (policy_ == Replacement::lru) {
    for (uint32_t k = head_; k != kNone; k = next_[k]) write_back(k);
  } else {
    for (uint32_t k : resident_) write_back(k);
  }
}

}  // namespace flashlab::sim
