#include "split_schedule.hpp"

#include <algorithm>

namespace flashlab::tiled {
namespace {
constexpr int64_t kAccumBytes = 4;  // Oaccum and LSEaccum are fp32, as flash-attn keeps them
}

SplitSchedule::SplitSchedule(const DecodeProblem& d, int64_t batch_index, Tiling tiling)
    : d_(d),
      b_(batch_index),
      tiles_(d.attention(), batch_index, tiling, Order::fa2),
      splits_(d.num_splits),
      per_split_((tiles_.Tc() + d.num_splits - 1) / d.num_splits),
      elem_(bytes_per_element(d.dtype)) {
  for (int64_t s = 0; s < splits_; ++s)
    for (int64_t i = 0; i < tiles_.Tr(); ++i) {
      const Schedule::Range r = computed(s, i);
      if (r.begin == r.end) order_.push_back({Kind::empty, s, i, std::min(split_blocks(s).begin, tiles_.Tc() - 1)});
      for (int64_t j = r.begin; j < r.end; ++j) order_.push_back({Kind::tile, s, i, j});
    }
  if (combines())
    for (int64_t i = 0; i < tiles_.Tr(); ++i) order_.push_back({Kind::combine, -1, i, -1});  // j = -1: no K/V block
}

Schedule::Range SplitSchedule::split_blocks(int64_t s) const {
  return {std::min(s * per_split_, tiles_.Tc()), std::min((s + 1) * per_split_, tiles_.Tc())};
}

Schedule::Range SplitSchedule::computed(int64_t s, int64_t i) const {
  const Schedule::Range sb = split_blocks(s);
  const int64_t begin = std::max(sb.begin, tiles_.kv_begin(i)), end = std::min(sb.end, tiles_.kv_end(i));
  return begin < end ? Schedule::Range{begin, end} : Schedule::Range{sb.begin, sb.begin};
}

SplitSchedule::Step SplitSchedule::step(int64_t k) const {
  const Entry& e = order_[static_cast<size_t>(k)];
  const int64_t d = d_.head_dim;
  Step st{e.kind, e.split, {}};
  TileStep& t = st.tile;
  t.index = k;
  t.i = e.i;
  t.j = e.j;
  t.row0 = tiles_.tiling().q_block(e.i, tiles_.seqlen_q()).row0;
  t.rows = tiles_.q_rows(e.i);
  auto add = [&](TensorId id, bool store, int64_t row0, int64_t rows, int64_t bytes) {
    t.transfers[t.count++] = {id, store, row0, rows, bytes};
  };
  // The outputs a split writes for Q block i: its partials, or O and LSE themselves when it is the only one.
  auto store_outputs = [&] {
    if (combines()) {
      add(TensorId::Oaccum, true, t.row0, t.rows, t.rows * d * kAccumBytes);
      add(TensorId::LSEaccum, true, t.row0, t.rows, t.rows * kAccumBytes);
    } else {
      add(TensorId::O, true, t.row0, t.rows, t.rows * d * elem_);
      add(TensorId::LSE, true, t.row0, t.rows, t.rows * kAccumBytes);
    }
  };
  switch (e.kind) {
    case Kind::tile: {
      const Schedule::Range r = computed(e.split, e.i);
      t.col0 = e.j * tiles_.tiling().Bc;
      t.cols = tiles_.kv_rows(e.j);
      t.kind = tiles_.classify(e.i, e.j);
      if (e.j == r.begin) add(TensorId::Q, false, t.row0, t.rows, t.rows * d * elem_);
      add(TensorId::K, false, t.col0, t.cols, t.cols * d * elem_);
      add(TensorId::V, false, t.col0, t.cols, t.cols * d * elem_);
      if (e.j == r.end - 1) store_outputs();
      break;
    }
    case Kind::empty:  // nothing visible in this split: zeros and -inf, no loads
      t.col0 = e.j * tiles_.tiling().Bc;
      t.kind = TileKind::skipped;
      store_outputs();
      break;
    case Kind::combine:  // read every split's partials of Q block i, write O_i and LSE_i
      add(TensorId::LSEaccum, false, t.row0, t.rows, splits_ * t.rows * kAccumBytes);
      add(TensorId::Oaccum, false, t.row0, t.rows, splits_ * t.rows * d * kAccumBytes);
      add(TensorId::O, true, t.row0, t.rows, t.rows * d * elem_);
      add(TensorId::LSE, true, t.row0, t.rows, t.rows * kAccumBytes);
      break;
  }
  return st;
}

std::vector<Transfer> SplitSchedule::prologue() const {
  if (d_.new_len == 0) return {};
  const int64_t row0 = d_.cache_seqlens[b_], n = d_.new_len, bytes = n * d_.head_dim * elem_;
  return {{TensorId::Knew, false, 0, n, bytes},
          {TensorId::Vnew, false, 0, n, bytes},
          {TensorId::K, true, row0, n, bytes},
          {TensorId::V, true, row0, n, bytes}};
}

ByteCounts SplitSchedule::closed_form() const {
  ByteCounts c;
  const int64_t d = d_.head_dim, Bc = tiles_.tiling().Bc, sk = tiles_.seqlen_k();
  auto at = [](std::array<int64_t, kTensorCount>& a, TensorId t) -> int64_t& { return a[static_cast<int>(t)]; };
  const TensorId o = combines() ? TensorId::Oaccum : TensorId::O, lse = combines() ? TensorId::LSEaccum : TensorId::LSE;
  const int64_t o_elem = combines() ? kAccumBytes : elem_;
  for (int64_t i = 0; i < tiles_.Tr(); ++i) {
    const int64_t rows = tiles_.q_rows(i);
    for (int64_t s = 0; s < splits_; ++s) {
      const Schedule::Range r = computed(s, i);
      if (r.begin < r.end) {
        const int64_t keys = std::min(r.end * Bc, sk) - r.begin * Bc;  // rows of K/V blocks [begin, end)
        at(c.load, TensorId::Q) += rows * d * elem_;
        at(c.load, TensorId::K) += keys * d * elem_;
        at(c.load, TensorId::V) += keys * d * elem_;
      }
      at(c.store, o) += rows * d * o_elem;
      at(c.store, lse) += rows * kAccumBytes;
    }
    if (combines()) {
      at(c.load, TensorId::LSEaccum) += splits_ * rows * kAccumBytes;
      at(c.load, TensorId::Oaccum) += splits_ * rows * d * kAccumBytes;
      at(c.store, TensorId::O) += rows * d * elem_;
      at(c.store, TensorId::LSE) += rows * kAccumBytes;
    }
  }
  return c;
}

}  // namespace flashlab::tiled
