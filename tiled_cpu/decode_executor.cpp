// The tiled decode (decode_executor.hpp), in the papers' notation: Q_i (Br x d), K_j, V_j (Bc x d),
// S_ij = score(Q_i K_j^T), running m_i and l_i, accumulator O~_i; per split s its O_i^(s), LSE_i^(s).
#include "decode_executor.hpp"

#include <cmath>
#include <limits>

#include "flashlab/parallel.hpp"
#include "flashlab/rotary.hpp"
#include "flashlab/score.hpp"

namespace flashlab::tiled {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
inline float safe_max(float m) { return m == kNegInf ? 0.0f : m; }  // exp(-inf - 0) = 0, never (-inf) - (-inf)

// "HBM" of one decode call.
struct DecodeHbm {
  const DecodeProblem& d;
  const Problem p;            // d.attention(): the mask and score rule
  const DecodeTensors& in;
  Tensor k_cache, v_cache;    // like the inputs' caches; the append writes into these
  Tensor o, lse;              // (batch, q_len, heads_q, d), (batch, heads_q, q_len)
  Tensor o_accum, lse_accum;  // (splits, batch, heads_q, q_len, d), (splits, batch, heads_q, q_len): fp32 partials

  int64_t accum_row(int64_t s, int64_t b, int64_t h, int64_t i) const {
    return ((s * d.batch + b) * d.heads_q + h) * d.q_len + i;
  }
};

// Rotates one row in fp32 and rounds it to the dtype, as a kernel storing it in the input type would.
void rotate(const DecodeProblem& d, const DecodeTensors& in, const float* x, int64_t pos, float* out) {
  const int64_t half = d.rot_dim() / 2;
  const bool on = d.rotary != Rotary::none;
  rotate_row<float>(d.rotary, d.head_dim, d.rot_dim(), x, on ? in.cos.ptr() + pos * half : nullptr,
                    on ? in.sin.ptr() + pos * half : nullptr, out);
  for (int64_t c = 0; c < d.head_dim; ++c) out[c] = round_to(d.dtype, out[c]);
}

// The append of (b, g): K_new[b, t] rotated at position cache_seqlens[b] + t and V_new[b, t], into the cache.
void append(DecodeHbm& hbm, int64_t b, int64_t g) {
  const DecodeProblem& d = hbm.d;
  for (int64_t t = 0; t < d.new_len; ++t) {
    const int64_t dst = d.cache_offset(b, d.new_pos(b, t), g), src = d.new_offset(b, t, g);
    rotate(d, hbm.in, hbm.in.k_new.ptr() + src, d.new_pos(b, t), hbm.k_cache.ptr() + dst);
    std::copy(hbm.in.v_new.ptr() + src, hbm.in.v_new.ptr() + src + d.head_dim, hbm.v_cache.ptr() + dst);
  }
}

// One (batch, query head) walked through its SplitSchedule.
class DecodeHeadRun {
 public:
  DecodeHeadRun(DecodeHbm& hbm, const SplitSchedule& sched, int64_t b, int64_t h)
      : hbm_(hbm), d_(hbm.d), sched_(sched), b_(b), h_(h), g_(hbm.p.kv_head(h)), score_(hbm.p, b, h) {}

  void run(Observer* obs) {
    for (int64_t k = 0; k < sched_.steps(); ++k) step(sched_.step(k), obs);
  }

 private:
  void step(const SplitSchedule::Step& st, Observer* obs) {
    const TileStep& t = st.tile;
    const Where at{b_, h_, Order::fa2, t.index, st.split};
    if (obs) obs->on_tile_begin(at, t);
    for (const Transfer& x : t)
      if (!x.store) {
        load(x, t);
        if (obs) obs->on_transfer(at, x);
      }
    switch (st.kind) {
      case SplitSchedule::Kind::tile: tile(t, at, obs); break;
      case SplitSchedule::Kind::empty:  // the split sees nothing of Q block i: O^(s) = 0, LSE^(s) = -inf
        O_ = Tile::Zero(t.rows, d_.head_dim);
        l_ = Eigen::VectorXf::Zero(t.rows);
        m_ = Eigen::VectorXf::Constant(t.rows, kNegInf);
        if (obs) obs->on_skip(at, t);
        break;
      case SplitSchedule::Kind::combine: combine(t, at, obs); break;
    }
    for (const Transfer& x : t)
      if (x.store) {
        store(x, st.split);
        if (obs) obs->on_transfer(at, x);
      }
    if (obs) obs->on_tile_end(at, t);
  }

  void load(const Transfer& x, const TileStep& t) {
    switch (x.tensor) {
      case TensorId::Q:  // Q_i, rotated on chip at the rows' positions; O~_i = 0, l_i = 0, m_i = -inf
        Q_.resize(x.rows, d_.head_dim);
        for (int64_t r = 0; r < x.rows; ++r)
          rotate(d_, hbm_.in, hbm_.in.q.ptr() + d_.q_offset(b_, x.row0 + r, h_), d_.q_pos(b_, x.row0 + r),
                 Q_.row(r).data());
        O_ = Tile::Zero(x.rows, d_.head_dim);
        l_ = Eigen::VectorXf::Zero(x.rows);
        m_ = Eigen::VectorXf::Constant(x.rows, kNegInf);
        break;
      case TensorId::K:
      case TensorId::V: {  // K_j, V_j: logical key rows through the cache's one indexing rule
        Tile& dst = x.tensor == TensorId::K ? K_ : V_;
        const Tensor& cache = x.tensor == TensorId::K ? hbm_.k_cache : hbm_.v_cache;
        dst.resize(x.rows, d_.head_dim);
        for (int64_t r = 0; r < x.rows; ++r) {
          const float* from = cache.ptr() + d_.cache_offset(b_, x.row0 + r, g_);
          std::copy(from, from + d_.head_dim, dst.row(r).data());
        }
        break;
      }
      case TensorId::LSEaccum:  // combine: (rows, splits)
        lse_s_.resize(x.rows, sched_.splits());
        for (int64_t r = 0; r < x.rows; ++r)
          for (int64_t s = 0; s < sched_.splits(); ++s)
            lse_s_(r, s) = hbm_.lse_accum[hbm_.accum_row(s, b_, h_, x.row0 + r)];
        break;
      case TensorId::Oaccum:  // combine: the splits' O^(s), read in the combine itself
        break;
      default: throw Error("tiled decode: unexpected load of " + to_string(x.tensor));
    }
    (void)t;
  }

  // S_ij, then FA2's step: m_new = max(m, rowmax S), P~ = exp(S - m_new), alpha = exp(m - m_new),
  // l = alpha l + rowsum(P~), O~ = diag(alpha) O~ + P~ V_j.
  void tile(const TileStep& t, const Where& at, Observer* obs) {
    Tile S(t.rows, t.cols);                                              // (Br, Bc)
    S.noalias() = Q_ * K_.transpose();
    for (int64_t r = 0; r < t.rows; ++r) {
      const int64_t row = t.row0 + r;
      const int64_t lo = hbm_.p.col_begin(b_, row), hi = hbm_.p.col_end(b_, row);
      for (int64_t c = 0; c < t.cols; ++c) {
        const int64_t col = t.col0 + c;
        S(r, c) = col >= lo && col < hi ? score_(S(r, c), row, col) : kNegInf;
      }
    }
    if (obs) obs->on_scores(at, t, S);
    const Eigen::VectorXf m_old = m_, l_old = l_;
    const Eigen::VectorXf m_new = m_old.cwiseMax(S.rowwise().maxCoeff());
    const Eigen::VectorXf m_use = m_new.unaryExpr(&safe_max);
    const Eigen::VectorXf alpha = (m_old - m_use).array().exp().matrix();
    Tile O_before;
    if (obs) O_before = O_;
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) S(r, c) = S(r, c) == kNegInf ? 0.0f : std::exp(S(r, c) - m_use(r));
    l_ = alpha.cwiseProduct(l_) + S.rowwise().sum();
    O_ = alpha.asDiagonal() * O_;
    O_.noalias() += S * V_;
    m_ = m_new;
    if (obs) {
      std::vector<RowStat> stats(static_cast<size_t>(t.rows));
      for (int64_t r = 0; r < t.rows; ++r) stats[r] = {t.row0 + r, m_old(r), m_new(r), l_old(r), l_(r), alpha(r)};
      obs->on_row_stats(at, t, stats);
      obs->on_rescale(at, t, O_before, O_);
    }
  }

  // LSE_i = log sum_s exp(LSE_i^(s)) (shifted by the largest), O_i = sum_s exp(LSE_i^(s) - LSE_i) O_i^(s).
  void combine(const TileStep& t, const Where& at, Observer* obs) {
    O_ = Tile::Zero(t.rows, d_.head_dim);
    lse_ = Eigen::VectorXf::Constant(t.rows, kNegInf);
    for (int64_t r = 0; r < t.rows; ++r) {
      const float lse_max = lse_s_.row(r).maxCoeff();
      if (lse_max == kNegInf) continue;  // no split saw anything: O = 0, LSE = -inf
      float sum = 0;
      for (int64_t s = 0; s < sched_.splits(); ++s) sum += std::exp(lse_s_(r, s) - lse_max);
      lse_(r) = lse_max + std::log(sum);
      for (int64_t s = 0; s < sched_.splits(); ++s) {
        const float w = std::exp(lse_s_(r, s) - lse_(r));
        if (w == 0.0f) continue;
        const float* o_s = hbm_.o_accum.ptr() + hbm_.accum_row(s, b_, h_, t.row0 + r) * d_.head_dim;
        for (int64_t c = 0; c < d_.head_dim; ++c) O_(r, c) += w * o_s[c];
      }
    }
    if (obs) obs->on_combine(at, t, lse_s_, O_);
  }

  // Row r's normalized output and log-sum-exp from the running state (a split's, or the combine's).
  float out_lse(int64_t r, bool combined) const {
    if (combined) return lse_(r);
    return l_(r) > 0 ? m_(r) + std::log(l_(r)) : kNegInf;
  }
  float out_o(int64_t r, int64_t c, bool combined) const {
    if (combined) return O_(r, c);
    return l_(r) > 0 ? O_(r, c) / l_(r) : 0.0f;
  }

  void store(const Transfer& x, int64_t split) {
    const bool combined = split < 0;
    for (int64_t r = 0; r < x.rows; ++r) {
      const int64_t i = x.row0 + r;
      switch (x.tensor) {
        case TensorId::Oaccum:
          for (int64_t c = 0; c < d_.head_dim; ++c)
            hbm_.o_accum[hbm_.accum_row(split, b_, h_, i) * d_.head_dim + c] = out_o(r, c, false);
          break;
        case TensorId::LSEaccum: hbm_.lse_accum[hbm_.accum_row(split, b_, h_, i)] = out_lse(r, false); break;
        case TensorId::O:
          for (int64_t c = 0; c < d_.head_dim; ++c) hbm_.o[d_.q_offset(b_, i, h_) + c] = out_o(r, c, combined);
          break;
        case TensorId::LSE: hbm_.lse[d_.lse_offset(b_, h_, i)] = out_lse(r, combined); break;
        default: throw Error("tiled decode: unexpected store of " + to_string(x.tensor));
      }
    }
  }

  DecodeHbm& hbm_;
  const DecodeProblem& d_;
  const SplitSchedule& sched_;
  int64_t b_, h_, g_;
  ScoreFn<float> score_;
  Tile Q_, K_, V_, O_;         // Q_i (Br, d), K_j, V_j (Bc, d), O~_i (Br, d)
  Eigen::VectorXf m_, l_;      // (Br)
  Tile lse_s_;                 // combine: LSE_i^(s) (Br, splits)
  Eigen::VectorXf lse_;        // combine: LSE_i (Br)
};

}  // namespace

DecodeOutputs<float> decode(const DecodeProblem& d, const DecodeTensors& in, Tiling tiling, Observer* obs) {
  check_tensors(d, in);
  DecodeHbm hbm{d, d.attention(), in, in.k_cache, in.v_cache, Tensor(d.o_shape()), Tensor(d.lse_shape(), kNegInf),
                Tensor({d.num_splits, d.batch, d.heads_q, d.q_len, d.head_dim}),
                Tensor({d.num_splits, d.batch, d.heads_q, d.q_len}, kNegInf)};
  std::vector<SplitSchedule> schedules;
  for (int64_t b = 0; b < d.batch; ++b) schedules.emplace_back(d, b, tiling);

  // 1. The append, per (batch, kv head); its transfers reported with the first query head of the group.
  parallel_for(d.batch * d.heads_kv, [&](int64_t bg) { append(hbm, bg / d.heads_kv, bg % d.heads_kv); });
  if (obs)
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t g = 0; g < d.heads_kv; ++g)
        for (const Transfer& t : schedules[b].prologue())
          obs->on_transfer(Where{b, g * (d.heads_q / d.heads_kv), Order::fa2, -1, -1}, t);

  // 2. Attention, split by split, then the combine.
  const int64_t heads = d.batch * d.heads_q;
  auto run = [&](int64_t bh, Observer* o) {
    const int64_t b = bh / d.heads_q;
    DecodeHeadRun(hbm, schedules[b], b, bh % d.heads_q).run(o);
  };
  if (obs) {
    for (int64_t bh = 0; bh < heads; ++bh) run(bh, obs);
  } else {
    parallel_for(heads, [&](int64_t bh) { run(bh, nullptr); });
  }
  if (d.dtype != DType::fp32)
    for (float& x : hbm.o.data) x = round_to(d.dtype, x);
  return {std::move(hbm.o), std::move(hbm.lse), std::move(hbm.k_cache), std::move(hbm.v_cache)};
}

}  // namespace flashlab::tiled
