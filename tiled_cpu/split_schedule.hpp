// SplitSchedule: the one description of split-KV decoding's traversal
// (flash-decoding, as flash_attn_with_kvcache runs it with num_splits > 1).
//
// Decoding has few query rows and many keys, so one CTA per Q block leaves a
// GPU idle. Split-KV cuts the Tc key blocks of batch entry b into num_splits
// contiguous ranges of ceil(Tc / num_splits) blocks; each split runs FA2's
// inner loop over its range alone and writes a partial output, normalized,
// and its log-sum-exp:
//   O_i^(s) = diag(l_i^(s))^-1 O~_i^(s),   LSE_i^(s) = m_i^(s) + log l_i^(s)      (fp32, "Oaccum", "LSEaccum")
// A split with no visible block writes O_i^(s) = 0, LSE_i^(s) = -inf. Then the
// combine merges the splits with the online-softmax rule:
//   LSE_i = log sum_s exp(LSE_i^(s)),   O_i = sum_s exp(LSE_i^(s) - LSE_i) O_i^(s)
// With num_splits = 1 there is no combine: the one split writes O and LSE, and
// the walk is FA2's order exactly.
//
// The tiles themselves (Tr x Tc over the lowered problem, DecodeProblem::attention(),
// each full / partial / skipped) are the FA2 Schedule's: this class owns only
// the order of the splits, which tiles each computes, the combine, the append,
// and the transfers and byte counts of all of them. The executor
// (decode_executor.hpp), `flashlab trace --decode` and the simulator's decode
// estimate walk it.
//
// Steps, in order: for each split s, for each Q block i, the K/V blocks of i
// that s computes (visible(i) intersected with the split's range; one `empty`
// step when there are none); then, when num_splits > 1, one `combine` step per
// Q block. The prologue is the append (per kv head): load K_new, V_new, store
// them into the cache.
#pragma once
#include <cstdint>
#include <vector>

#include "flashlab/decode_problem.hpp"
#include "schedule.hpp"

namespace flashlab::tiled {

class SplitSchedule {
 public:
  SplitSchedule(const DecodeProblem& d, int64_t batch_index, Tiling tiling);

  enum class Kind { tile, empty, combine };
  struct Step {
    Kind kind;
    int64_t split;  // -1 for a combine step
    TileStep tile;  // i, j, rows, cols, kind and transfers (empty: cols = 0; combine: j = -1, cols = 0)
  };

  const Schedule& tiles() const { return tiles_; }
  int64_t splits() const { return splits_; }
  bool combines() const { return splits_ > 1; }
  int64_t blocks_per_split() const { return per_split_; }
  Schedule::Range split_blocks(int64_t s) const;          // the split's K/V blocks [begin, end)
  Schedule::Range computed(int64_t s, int64_t i) const;   // those Q block i sees
  int64_t steps() const { return static_cast<int64_t>(order_.size()); }
  Step step(int64_t k) const;

  std::vector<Transfer> prologue() const;  // the append, for one kv head
  ByteCounts closed_form() const;          // the steps' bytes for one query head, without walking them
  int64_t elem_bytes() const { return elem_; }

 private:
  struct Entry {
    Kind kind;
    int64_t split, i, j;
  };
  DecodeProblem d_;
  int64_t b_;
  Schedule tiles_;
  int64_t splits_, per_split_, elem_;
  std::vector<Entry> order_;
};

}  // namespace flashlab::tiled
