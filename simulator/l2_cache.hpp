// L2Cache: the GPU's L2 as the replay sees it: whole blocks of tensors, a random one evicted (or LRU).
//
// A key is one block of one tensor (K_j and V_j of a kv head, a CTA's Q_i, the
// dQ accumulator rows of a Q block, ...), dense in [0, keys). A load that
// misses reads its bytes from DRAM; a store allocates the line dirty without
// reading it (the kernels write whole blocks); an update (dQ's atomics: a
// read-modify-write in L2) reads on a miss and leaves the line dirty. A dirty
// line that is evicted, or still present at the end (flush), is written back:
// DRAM write bytes are the write-backs.
//
// Replacement: random (the model's choice: on the H100 a cyclic read of data
// every SM touches loses hits gradually past the capacity, as random
// replacement does, where LRU would fall off a cliff; microbench.cu,
// simulator/validation/microbench-h100-2026-11-23-run3.json), or least
// recently used, the textbook policy, to compare.
// Capacity: what data read by every SM can occupy (GpuSpec::l2_shared_bytes():
// A100 and H100 split their L2 in partitions that each cache a line for the
// SMs wired to them, so data every SM reads is held once per partition).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace flashlab::sim {

enum class Replacement { random, lru };

class L2Cache {
 public:
  L2Cache(double capacity_bytes, uint32_t keys, Replacement policy = Replacement::random);

  // Each returns the bytes that hit (a store allocates without reading: it never misses).
  double load(uint32_t key, double bytes);
  void store(uint32_t key, double bytes);
  double update(uint32_t key, double bytes);
  void flush();  // write back every dirty line (the kernel's end)
  bool resident(uint32_t key) const { return line_[key].present; }

  double dram_read() const { return read_; }
  double dram_write() const { return write_; }
  double hit_bytes() const { return hit_; }
  double access_bytes() const { return access_; }

 private:
  double touch(uint32_t key, double bytes);  // bytes already resident; makes the key the most recent
  void evict_to_fit();
  void unlink(uint32_t key);
  void push_front(uint32_t key);

  std::size_t victim_place();  // random replacement: the place in resident_ of the line it evicts

  static constexpr uint32_t kNone = ~uint32_t{0};
  // What the cache knows of one key, in one place (the replay touches a key's fields together).
  struct Line {
    double bytes = 0;
    bool present = false, dirty = false;
  };
  Replacement policy_;
  std::vector<Line> line_;
  std::vector<uint32_t> resident_;  // random: the resident keys
  uint64_t rng_ = 0x9E3779B97F4A7C15ull;
  double capacity_, used_ = 0;
  double read_ = 0, write_ = 0, hit_ = 0, access_ = 0;
  std::vector<uint32_t> prev_, next_;     // LRU: each key's neighbours in the recency list
  uint32_t head_ = kNone, tail_ = kNone;  // LRU: the most and the least recent key
  uint32_t last_ = kNone;                 // the key touched last (the one being filled: never the victim)
};

}  // namespace flashlab::sim
