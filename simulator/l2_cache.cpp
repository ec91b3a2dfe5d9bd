#include "l2_cache.hpp"

#include <algorithm>

namespace flashlab::sim {

L2Cache::L2Cache(double capacity_bytes, uint32_t keys, Replacement policy)
    : policy_(policy), slot_(policy == Replacement::random ? keys : 0, kNone), capacity_(capacity_bytes),
      prev_(keys, kNone), next_(keys, kNone), bytes_(keys, 0), present_(keys, 0), dirty_(keys, 0) {}

uint32_t L2Cache::victim() {
  if (policy_ == Replacement::lru) return tail_;
  for (;;) {  // any resident block but the one being filled (the head); xorshift64 keeps runs reproducible
    rng_ ^= rng_ << 13, rng_ ^= rng_ >> 7, rng_ ^= rng_ << 17;
    const uint32_t k = resident_[rng_ % resident_.size()];
    if (k != head_) return k;
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
  while (used_ > capacity_ && tail_ != kNone && tail_ != head_) {
    const uint32_t victim = this->victim();
    unlink(victim);
    if (policy_ == Replacement::random) {  // swap-remove from the resident list
      resident_[slot_[victim]] = resident_.back();
      slot_[resident_.back()] = slot_[victim];
      resident_.pop_back();
    }
    used_ -= bytes_[victim];
    if (dirty_[victim]) write_ += bytes_[victim];
    present_[victim] = dirty_[victim] = 0;
  }
}

double L2Cache::touch(uint32_t k, double bytes) {
  access_ += bytes;
  double hit = 0;
  if (present_[k]) {
    unlink(k);
    hit = std::min(bytes, bytes_[k]);
  } else {
    present_[k] = 1;
    bytes_[k] = 0;
    if (policy_ == Replacement::random) {
      slot_[k] = uint32_t(resident_.size());
      resident_.push_back(k);
    }
  }
  push_front(k);
  if (bytes > bytes_[k]) {  // a block read in part before (a causal diagonal chunk) grows to what is asked
    used_ += bytes - bytes_[k];
    bytes_[k] = bytes;
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
  dirty_[k] = 1;
  evict_to_fit();
}

double L2Cache::update(uint32_t k, double bytes) {
  const double hit = load(k, bytes);
  dirty_[k] = 1;
  return hit;
}

void L2Cache::flush() {
  for (uint32_t k = head_; k != kNone; k = next_[k])
    if (dirty_[k]) {
      write_ += bytes_[k];
      dirty_[k] = 0;
    }
}

}  // namespace flashlab::sim
