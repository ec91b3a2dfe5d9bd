// The tiled executor. Notation follows the FlashAttention papers:
// Q_i (Br x d), K_j and V_j (Bc x d), S_ij = Q_i K_j^T (Br x Bc),
// running row max m_i and row sum l_i, output accumulator O_i.
#include "executor.hpp"

#include <cmath>
#include <limits>

#include "flashlab/dropout.hpp"
#include "flashlab/error.hpp"
#include "flashlab/parallel.hpp"
#include "flashlab/score.hpp"

namespace flashlab::tiled {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A row whose max is -inf has seen no visible column yet; subtracting 0
// instead keeps exp(S - m) = exp(-inf) = 0 and avoids (-inf) - (-inf) = NaN.
inline float safe_max(float m) { return m == kNegInf ? 0.0f : m; }

Tensor like_lse(const Problem& p, float fill) { return Tensor(p.lse_shape(), fill); }

}  // namespace

// ---------------------------------------------------------------- buffers

Buffers Buffers::for_forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Order order) {
  Buffers b;
  b.q = &q;
  b.k = &k;
  b.v = &v;
  b.o = Tensor(p.o_shape());
  b.lse = like_lse(p, kNegInf);
  if (order == Order::fa1) {
    b.l = like_lse(p, 0.0f);
    b.m = like_lse(p, kNegInf);
  }
  return b;
}

Buffers Buffers::for_backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& d_o) {
  Buffers b;
  b.q = &q;
  b.k = &k;
  b.v = &v;
  b.o_in = &o;
  b.lse_in = &lse;
  b.d_o = &d_o;
  b.D = like_lse(p, 0.0f);
  // Algorithm 4 reads the forward's l_i and m_i. From an LSE, m_i = LSE_i and
  // l_i = 1 give the same P = diag(l)^-1 exp(S - m) = exp(S - LSE).
  b.l = like_lse(p, 1.0f);
  b.m = lse;
  b.dq = Tensor(p.q_shape());
  b.dk = Tensor(p.k_shape());
  b.dv = Tensor(p.v_shape());
  return b;
}

// ---------------------------------------------------------------- one head

HeadRun::HeadRun(const Problem& p, Buffers& buffers, int64_t b, int64_t h, Tiling tiling, Order order)
    : p_(p), buf_(buffers), b_(b), h_(h), g_(p.kv_head(h)), schedule_(p, b, tiling, order) {}

Tensor* HeadRun::hbm(TensorId t) {
  switch (t) {
    case TensorId::O: return &buf_.o;
    case TensorId::l: return &buf_.l;
    case TensorId::m: return &buf_.m;
    case TensorId::LSE: return &buf_.lse;
    case TensorId::D: return &buf_.D;
    case TensorId::dQ: return &buf_.dq;
    case TensorId::dK: return &buf_.dk;
    case TensorId::dV: return &buf_.dv;
    default: return nullptr;  // inputs are read-only
  }
}

// Row r of tensor t for this head: where it starts and how wide it is.
namespace {
struct RowAddr {
  int64_t offset, width;
};
RowAddr row_addr(const Problem& p, TensorId t, int64_t b, int64_t h, int64_t g, int64_t r) {
  switch (t) {
    case TensorId::Q:
    case TensorId::dQ: return {p.q_offset(b, r, h), p.head_dim};
    case TensorId::K:
    case TensorId::dK: return {p.k_offset(b, r, g), p.head_dim};
    case TensorId::V:
    case TensorId::dV: return {p.v_offset(b, r, g), p.dv()};
    case TensorId::O:
    case TensorId::dO: return {p.o_offset(b, r, h), p.dv()};
    default: return {p.lse_offset(b, h, r), 1};  // l, m, LSE, D
  }
}
}  // namespace

void HeadRun::copy_rows(const Transfer& t, std::vector<float>& out) const {
  const Tensor* src = const_cast<HeadRun*>(this)->hbm(t.tensor);
  out.clear();
  for (int64_t r = t.row0; r < t.row0 + t.rows; ++r) {
    const RowAddr a = row_addr(p_, t.tensor, b_, h_, g_, r);
    out.insert(out.end(), src->ptr() + a.offset, src->ptr() + a.offset + a.width);
  }
}

void HeadRun::paste_rows(const Transfer& t, const std::vector<float>& in) {
  Tensor* dst = hbm(t.tensor);
  const float* from = in.data();
  for (int64_t r = t.row0; r < t.row0 + t.rows; ++r) {
    const RowAddr a = row_addr(p_, t.tensor, b_, h_, g_, r);
    std::copy(from, from + a.width, dst->ptr() + a.offset);
    from += a.width;
  }
}

// Gathers rows [row0, row0 + rows) of a (tokens, heads, width) tensor into a tile.
static void gather(const Problem& p, const Tensor& src, TensorId t, int64_t b, int64_t h, int64_t g, int64_t row0,
                   int64_t rows, Tile& tile) {
  const int64_t width = row_addr(p, t, b, h, g, row0).width;
  tile.resize(rows, width);
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = src.ptr() + row_addr(p, t, b, h, g, row0 + r).offset;
    std::copy(from, from + width, tile.row(r).data());
  }
}

static void gather_vec(const Problem& p, const Tensor& src, int64_t b, int64_t h, int64_t row0, int64_t rows,
                       Eigen::VectorXf& vec) {
  vec.resize(rows);
  for (int64_t r = 0; r < rows; ++r) vec(r) = src[p.lse_offset(b, h, row0 + r)];
}

void HeadRun::load(const Transfer& t, Sram& s) {
  const Order order = schedule_.order();
  switch (t.tensor) {
    case TensorId::Q:
      gather(p_, *buf_.q, t.tensor, b_, h_, g_, t.row0, t.rows, s.Q);
      if (order == Order::fa2) {  // a new Q block starts with O_i = 0, l_i = 0, m_i = -inf on chip
        s.O = Tile::Zero(t.rows, p_.dv());
        s.l = Eigen::VectorXf::Zero(t.rows);
        s.m = Eigen::VectorXf::Constant(t.rows, kNegInf);
      }
      if (order == Order::dq) s.dQ = Tile::Zero(t.rows, p_.head_dim);  // dQ_i summed on chip
      break;
    case TensorId::K:
      gather(p_, *buf_.k, t.tensor, b_, h_, g_, t.row0, t.rows, s.K);
      if (is_backward(order) && order != Order::dq) {  // a new K/V block starts with dK_j = dV_j = 0 on chip
        s.dK = Tile::Zero(t.rows, p_.head_dim);
        s.dV = Tile::Zero(t.rows, p_.dv());
      }
      break;
    case TensorId::V: gather(p_, *buf_.v, t.tensor, b_, h_, g_, t.row0, t.rows, s.V); break;
    case TensorId::O:  // FA1 forward: the running O; FA1 backward: the forward's output
      gather(p_, order == Order::fa1_backward ? *buf_.o_in : buf_.o, t.tensor, b_, h_, g_, t.row0, t.rows, s.O);
      break;
    case TensorId::dO: gather(p_, *buf_.d_o, t.tensor, b_, h_, g_, t.row0, t.rows, s.dO); break;
    case TensorId::dQ: gather(p_, buf_.dq, t.tensor, b_, h_, g_, t.row0, t.rows, s.dQ); break;
    case TensorId::l: gather_vec(p_, buf_.l, b_, h_, t.row0, t.rows, s.l); break;
    case TensorId::m: gather_vec(p_, buf_.m, b_, h_, t.row0, t.rows, s.m); break;
    case TensorId::LSE: gather_vec(p_, *buf_.lse_in, b_, h_, t.row0, t.rows, s.lse); break;
    case TensorId::D: gather_vec(p_, buf_.D, b_, h_, t.row0, t.rows, s.D); break;
    default: throw Error("tiled executor: unexpected load of " + to_string(t.tensor));
  }
}

void HeadRun::store(const Transfer& t, const Sram& s) {
  const bool fa2 = schedule_.order() == Order::fa2;
  const Tiling& tl = schedule_.tiling();
  // A Q block (FA2, the dQ pass) or K/V block (backward) every tile of which was skipped stores zeros / -inf.
  const bool dq_pass = schedule_.order() == Order::dq;
  const bool q_side = t.tensor == TensorId::O || t.tensor == TensorId::LSE || (dq_pass && t.tensor == TensorId::dQ);
  const bool kv_side = t.tensor == TensorId::dK || t.tensor == TensorId::dV;
  const int64_t q_block = tl.q_block_of(t.row0, schedule_.seqlen_q());
  const bool nothing_seen = (fa2 || dq_pass) && q_side && schedule_.kv_begin(q_block) == schedule_.kv_end(q_block);
  const bool no_grad = kv_side && schedule_.q_begin(t.row0 / tl.Bc) == schedule_.q_end(t.row0 / tl.Bc);
  for (int64_t r = 0; r < t.rows; ++r) {
    const int64_t row = t.row0 + r;
    const RowAddr a = row_addr(p_, t.tensor, b_, h_, g_, row);
    float* dst = hbm(t.tensor)->ptr() + a.offset;
    switch (t.tensor) {
      case TensorId::O:
        if (fa2) {  // FA2's deferred normalization: O_i = diag(l_i)^-1 O_i
          const float l = nothing_seen ? 0.0f : s.l(r);
          for (int64_t c = 0; c < a.width; ++c) dst[c] = l > 0 ? s.O(r, c) / l : 0.0f;
        } else {
          std::copy(s.O.row(r).data(), s.O.row(r).data() + a.width, dst);
        }
        break;
      case TensorId::LSE:  // LSE_i = m_i + log(l_i); -inf for a row that saw nothing
        *dst = (nothing_seen || s.l(r) == 0.0f) ? kNegInf : s.m(r) + std::log(s.l(r));
        break;
      case TensorId::l: *dst = s.l(r); break;
      case TensorId::m: *dst = s.m(r); break;
      case TensorId::dQ:
        if (nothing_seen) std::fill_n(dst, a.width, 0.0f);
        else std::copy(s.dQ.row(r).data(), s.dQ.row(r).data() + a.width, dst);
        break;
      case TensorId::dK:  // query heads of one kv head (GQA) add into the same dK_j
        if (!no_grad)
          for (int64_t c = 0; c < a.width; ++c) dst[c] += s.dK(r, c);
        break;
      case TensorId::dV:
        if (!no_grad)
          for (int64_t c = 0; c < a.width; ++c) dst[c] += s.dV(r, c);
        break;
      default: throw Error("tiled executor: unexpected store of " + to_string(t.tensor));
    }
  }
}

// S_ij = score(Q_i K_j^T), -inf where masked. `dot`, when asked, keeps the raw products.
void HeadRun::scores(const TileStep& st, const Sram& s, Tile& S, Tile* dot) const {
  const ScoreFn<float> score(p_, b_, h_);
  const bool plain = p_.softcap <= 0 && !p_.alibi && !dot;
  if (plain) {
    S.noalias() = score.scale * (s.Q * s.K.transpose());                // (Br, Bc); the scale rides in the GEMM
  } else {
    S.noalias() = s.Q * s.K.transpose();
    if (dot) *dot = S;
    for (int64_t r = 0; r < S.rows(); ++r)
      for (int64_t c = 0; c < S.cols(); ++c) S(r, c) = score(S(r, c), st.row0 + r, st.col0 + c);
  }
  if (st.kind == TileKind::partial) mask_tile(st, S, kNegInf);
}

// The element mask of a partial tile: X_rc = fill where (row0 + r, col0 + c) is not visible. The row's
// interval [col_begin, col_end) first; a dense mask's bits within it.
void HeadRun::mask_tile(const TileStep& st, Tile& X, float fill) const {
  const bool dense = !p_.interval_mask();
  for (int64_t r = 0; r < X.rows(); ++r) {
    const int64_t row = st.row0 + r;
    const int64_t lo = p_.col_begin(b_, row) - st.col0, hi = p_.col_end(b_, row) - st.col0;
    for (int64_t c = 0; c < X.cols(); ++c)
      if (c < lo || c >= hi || (dense && !p_.mask.dense->at(b_, h_, row, st.col0 + c))) X(r, c) = fill;
  }
}

// exp(-inf) must be 0, but a vectorized exp clamps its input (Eigen's to about
// -88) and returns a tiny positive number instead; in a row that sees only a
// few keys those add up. Masked elements of a partial tile are set to 0 exactly.
void HeadRun::zero_masked(const TileStep& st, Tile& P) const {
  if (st.kind == TileKind::partial) mask_tile(st, P, 0.0f);
}

// S <- exp(S - m) row by row, in place. Row-major S with a per-row shift
// vectorizes one row at a time (a column broadcast over the whole tile does not).
static void exp_rows(Tile& S, const Eigen::VectorXf& m) {
  for (int64_t r = 0; r < S.rows(); ++r) S.row(r).array() = (S.row(r).array() - m(r)).exp();
}

// Multiplies P by the dropout scale Z = keep / (1 - p), in place.
static void apply_dropout(const Problem& p, int64_t b, int64_t h, const TileStep& st, Tile& P) {
  if (p.dropout_p <= 0) return;
  const uint64_t key = dropout::head_key(p.seed, b, h);
  const uint32_t threshold = dropout::threshold(p.dropout_p);
  const float keep_scale = static_cast<float>(1.0 / (1.0 - p.dropout_p));
  for (int64_t r = 0; r < P.rows(); ++r)
    for (int64_t c = 0; c < P.cols(); ++c)
      P(r, c) *= dropout::keep(key, st.row0 + r, st.col0 + c, threshold) ? keep_scale : 0.0f;
}

void HeadRun::forward_tile(const TileStep& st, Sram& s, Observer* obs) {
  const Where at = where(st.index);
  Tile S;                                                               // (Br, Bc)
  scores(st, s, S, nullptr);
  if (obs) obs->on_scores(at, st, S);

  const Eigen::VectorXf m_old = s.m, l_old = s.l;                       // (Br)
  const Eigen::VectorXf m_tile = S.rowwise().maxCoeff();                // rowmax(S_ij)
  const Eigen::VectorXf m_new = m_old.cwiseMax(m_tile);
  const Eigen::VectorXf m_use = m_new.unaryExpr(&safe_max);
  Tile O_before;
  if (obs) O_before = s.O;

  if (schedule_.order() == Order::fa2) {
    // FA2: P~ = exp(S - m_new), alpha = exp(m_old - m_new),
    //      l = alpha l + rowsum(P~),  O = diag(alpha) O + P~ V_j   (no division yet)
    // P~ overwrites S row by row, its row sum taken in the same pass.
    const Eigen::VectorXf alpha = (m_old - m_use).array().exp().matrix();
    exp_rows(S, m_use);
    Tile& P = S;
    zero_masked(st, P);
    s.l = alpha.cwiseProduct(s.l) + P.rowwise().sum();
    apply_dropout(p_, b_, h_, st, P);
    s.O = alpha.asDiagonal() * s.O;
    s.O.noalias() += P * s.V;
    s.m = m_new;
  } else {
    // FA1, Algorithm 1 lines 10-12:
    //   m~ = rowmax(S), P~ = exp(S - m~), l~ = rowsum(P~)
    //   m_new = max(m, m~), l_new = e^(m - m_new) l + e^(m~ - m_new) l~
    //   O_i = diag(l_new)^-1 (diag(l) e^(m - m_new) O_i + e^(m~ - m_new) P~ V_j)
    const Eigen::VectorXf m_tile_use = m_tile.unaryExpr(&safe_max);
    Tile& P = S;
    exp_rows(P, m_tile_use);
    zero_masked(st, P);
    const Eigen::VectorXf l_tile = P.rowwise().sum();
    const Eigen::VectorXf a_old = (m_old - m_use).array().exp().matrix();
    const Eigen::VectorXf a_tile = (m_tile - m_use).array().exp().matrix();
    const Eigen::VectorXf l_new = a_old.cwiseProduct(s.l) + a_tile.cwiseProduct(l_tile);
    apply_dropout(p_, b_, h_, st, P);
    Tile PV = P * s.V;                                                  // (Br, dv)
    for (int64_t r = 0; r < s.O.rows(); ++r) {
      const float inv = l_new(r) > 0 ? 1.0f / l_new(r) : 0.0f;
      s.O.row(r) = inv * (s.l(r) * a_old(r) * s.O.row(r) + a_tile(r) * PV.row(r));
    }
    s.l = l_new;
    s.m = m_new;
  }

  if (obs) {
    std::vector<RowStat> stats(static_cast<size_t>(st.rows));
    for (int64_t r = 0; r < st.rows; ++r)
      stats[r] = {st.row0 + r, m_old(r), m_new(r), l_old(r), s.l(r), std::exp(m_old(r) - m_use(r))};
    obs->on_row_stats(at, st, stats);
    obs->on_rescale(at, st, O_before, s.O);
  }
}

void HeadRun::backward_tile(const TileStep& st, Sram& s, Observer* obs) {
  const Where at = where(st.index);
  Tile S, dot;                                                          // (Br, Bc)
  scores(st, s, S, p_.softcap > 0 ? &dot : nullptr);
  if (obs) obs->on_scores(at, st, S);
  Tile P;
  if (schedule_.order() == Order::fa1_backward) {
    // Algorithm 4: P_ij = diag(l_i)^-1 exp(S_ij - m_i), D_i = rowsum(dO_i o O_i) on chip.
    const Eigen::VectorXf m_use = s.m.unaryExpr(&safe_max);
    P = std::move(S);
    exp_rows(P, m_use);
    zero_masked(st, P);
    for (int64_t r = 0; r < P.rows(); ++r) P.row(r) *= s.l(r) > 0 ? 1.0f / s.l(r) : 0.0f;
    s.D = s.dO.cwiseProduct(s.O).rowwise().sum();
  } else {
    // P_ij = exp(S_ij - LSE_i): the forward's probabilities, recomputed.
    const Eigen::VectorXf lse_use = s.lse.unaryExpr(&safe_max);
    P = std::move(S);
    exp_rows(P, lse_use);
    zero_masked(st, P);
  }
  // The deterministic backward splits the GEMMs: its dK/dV pass skips dQ, its dQ pass dV and dK.
  const bool dq = schedule_.order() != Order::dkdv, dkdv = schedule_.order() != Order::dq;
  if (dkdv) {
    Tile Pd = P;                                                        // P o Z
    apply_dropout(p_, b_, h_, st, Pd);
    s.dV.noalias() += Pd.transpose() * s.dO;                            // dV_j += (P o Z)^T dO_i
  }
  Tile dP = s.dO * s.V.transpose();                                     // dP_ij = (dO_i V_j^T) o Z
  if (p_.dropout_p > 0) {
    Tile Z = Tile::Ones(dP.rows(), dP.cols());
    apply_dropout(p_, b_, h_, st, Z);
    dP = dP.cwiseProduct(Z);
  }
  Tile dS = P.cwiseProduct(dP.colwise() - s.D);                         // dS_ij = P_ij o (dP_ij - D_i)
  const ScoreFn<float> score(p_, b_, h_);
  if (p_.softcap > 0) {
    for (int64_t r = 0; r < dS.rows(); ++r)
      for (int64_t c = 0; c < dS.cols(); ++c) dS(r, c) *= score.dscore(dot(r, c));
  } else {
    dS *= score.scale;
  }
  if (dq) s.dQ.noalias() += dS * s.K;                                   // dQ_i += dS_ij K_j
  if (dkdv) s.dK.noalias() += dS.transpose() * s.Q;                     // dK_j += dS_ij^T Q_i
  if (obs) obs->on_gradients(at, st, P, dS);
}

void HeadRun::run_step(const TileStep& st, Sram& s, Observer* obs) {
  const Where at = where(st.index);
  if (obs) obs->on_tile_begin(at, st);
  for (const Transfer& t : st)
    if (!t.store) {
      load(t, s);
      if (obs) obs->on_transfer(at, t);
    }
  if (st.kind == TileKind::skipped) {
    if (obs) obs->on_skip(at, st);
  } else if (is_backward(schedule_.order())) {
    backward_tile(st, s, obs);
  } else {
    forward_tile(st, s, obs);
  }
  for (const Transfer& t : st)
    if (t.store) {
      store(t, s);
      if (obs) obs->on_transfer(at, t);
    }
  if (obs) obs->on_tile_end(at, st);
}

void HeadRun::prologue(Observer* obs) {
  const Where at = where(-1);
  const int64_t sq = schedule_.seqlen_q();
  if (schedule_.order() == Order::fa1) {
    // Algorithm 1, line 2: O = 0, l = 0, m = -inf in HBM (Buffers starts them so; this head's rows).
    for (int64_t i = 0; i < sq; ++i) {
      buf_.l[p_.lse_offset(b_, h_, i)] = 0.0f;
      buf_.m[p_.lse_offset(b_, h_, i)] = kNegInf;
      std::fill_n(buf_.o.ptr() + p_.o_offset(b_, i, h_), p_.dv(), 0.0f);
    }
  } else if (is_backward(schedule_.order()) && schedule_.order() != Order::fa1_backward) {
    // Backward: D_i = rowsum(dO_i o O_i) (FA1 computes it per tile instead), dQ's accumulator zeroed. (Algorithm 4
    // also zeroes dK and dV in HBM; here they start at zero and GQA's query heads add into them.) The
    // deterministic backward's dQ pass reads the D its dK/dV pass wrote; computed again here (unobserved:
    // its schedule lists no prologue) so that the pass also runs alone, in the stepper.
    for (int64_t i = 0; i < sq; ++i) {
      const float* o = buf_.o_in->ptr() + p_.o_offset(b_, i, h_);
      const float* d_o = buf_.d_o->ptr() + p_.o_offset(b_, i, h_);
      float D = 0;
      for (int64_t c = 0; c < p_.dv(); ++c) D += o[c] * d_o[c];
      buf_.D[p_.lse_offset(b_, h_, i)] = D;
      if (schedule_.order() == Order::backward) std::fill_n(buf_.dq.ptr() + p_.q_offset(b_, i, h_), p_.head_dim, 0.0f);
    }
  }
  if (obs)
    for (const Transfer& t : schedule_.prologue()) obs->on_transfer(at, t);
}

void HeadRun::epilogue(Observer* obs) {
  if (schedule_.order() == Order::fa1) {  // LSE from the l and m Algorithm 1 leaves in HBM
    for (int64_t i = 0; i < schedule_.seqlen_q(); ++i) {
      const int64_t at = p_.lse_offset(b_, h_, i);
      buf_.lse[at] = buf_.l[at] > 0 ? buf_.m[at] + std::log(buf_.l[at]) : kNegInf;
    }
  }
  if (obs)
    for (const Transfer& t : schedule_.epilogue()) obs->on_transfer(where(schedule_.steps()), t);
}

HeadRun::Snapshot HeadRun::snapshot(const TileStep& st) const {
  Snapshot snap{sram_, {}};
  for (const Transfer& t : st)
    if (t.store) {
      snap.rows.emplace_back(t, std::vector<float>{});
      copy_rows(t, snap.rows.back().second);
    }
  return snap;
}

void HeadRun::restore(const Snapshot& snap) {
  sram_ = snap.sram;
  for (const auto& [t, rows] : snap.rows) paste_rows(t, rows);
}

// ---------------------------------------------------------------- whole problem

namespace {

void round_all(Tensor& t, DType dtype) {
  if (dtype == DType::fp32) return;
  for (float& x : t.data) x = round_to(dtype, x);
}

void check_inputs(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  p.validate();
  auto same = [](const Tensor& t, const std::vector<int64_t>& shape, const char* name) {
    if (t.shape != shape)
      throw Error(std::string(name) + " has shape " + shape_string(t.shape) + ", the problem needs " +
                  shape_string(shape));
  };
  same(q, p.q_shape(), "Q");
  same(k, p.k_shape(), "K");
  same(v, p.v_shape(), "V");
}

}  // namespace

ForwardResult forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Tiling tiling, Order order,
                      Observer* obs) {
  if (is_backward(order)) throw Error("tiled::forward takes Order::fa1 or Order::fa2");
  check_inputs(p, q, k, v);
  Buffers buf = Buffers::for_forward(p, q, k, v, order);
  const int64_t heads = p.batch * p.heads_q;
  auto head_run = [&](int64_t bh) { return HeadRun(p, buf, bh / p.heads_q, bh % p.heads_q, tiling, order); };

  if (obs) {  // serial, in schedule order, every event reported
    for (int64_t bh = 0; bh < heads; ++bh) {
      HeadRun run = head_run(bh);
      run.prologue(obs);
      for (int64_t s = 0; s < run.schedule().steps(); ++s) run.step(s, obs);
      run.epilogue(obs);
    }
  } else if (order == Order::fa2) {  // Q blocks are independent: one task per (batch, head, Q block)
    std::vector<HeadRun> runs;
    std::vector<std::pair<int64_t, int64_t>> tasks;  // (head run, Q block)
    runs.reserve(heads);
    for (int64_t bh = 0; bh < heads; ++bh) {
      runs.push_back(head_run(bh));
      for (int64_t i = 0; i < runs.back().schedule().Tr(); ++i) tasks.emplace_back(bh, i);
    }
    parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t t) {
      HeadRun& run = runs[tasks[t].first];
      const Schedule& sch = run.schedule();
      const int64_t i = tasks[t].second;
      Sram sram;
      const Schedule::Range line = sch.visited(i);
      for (int64_t j = line.begin; j < line.end; ++j) run.run_step(sch.step(sch.step_of(i, j)), sram, nullptr);
    });
  } else if (heads >= parallel_threads()) {  // FA1 with enough heads: one task per head, in literal order
    parallel_for(heads, [&](int64_t bh) {
      HeadRun run = head_run(bh);
      run.prologue(nullptr);
      for (int64_t s = 0; s < run.schedule().steps(); ++s) run.step(s, nullptr);
      run.epilogue(nullptr);
    });
  } else {  // FA1 with few heads: within each K/V block, the Q blocks in parallel (rows are independent)
    for (int64_t bh = 0; bh < heads; ++bh) {
      HeadRun run = head_run(bh);
      const Schedule& sch = run.schedule();
      run.prologue(nullptr);
      for (int64_t j = 0; j < sch.Tc(); ++j) {
        const auto [i0, i1] = sch.visited(j);
        if (i0 >= i1) continue;
        Sram shared;
        run.run_step(sch.step(sch.step_of(i0, j)), shared, nullptr);  // loads K_j, V_j
        parallel_for(i1 - i0 - 1, [&](int64_t n) {
          Sram local;
          local.K = shared.K;
          local.V = shared.V;
          run.run_step(sch.step(sch.step_of(i0 + 1 + n, j)), local, nullptr);
        });
      }
      run.epilogue(nullptr);
    }
  }
  round_all(buf.o, p.dtype);
  return {std::move(buf.o), std::move(buf.lse)};
}

ForwardResult forward_for_backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Tiling tiling) {
  return forward(p, q, k, v, tiling, Order::fa2);
}

void run_order(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_o, Tiling tiling,
               Order order, Observer* observer) {
  if (!is_backward(order)) {
    forward(p, q, k, v, tiling, order, observer);
    return;
  }
  const ForwardResult f = forward_for_backward(p, q, k, v, tiling);
  backward(p, q, k, v, f.o, f.lse, d_o, tiling, observer, order);
}

BackwardResult backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& d_o, Tiling tiling, Observer* obs, Order order) {
  if (!is_backward(order))
    throw Error("tiled::backward takes Order::backward, Order::fa1_backward or the deterministic Order::dkdv / "
                "Order::dq");
  check_inputs(p, q, k, v);
  if (o.shape != p.o_shape() || d_o.shape != p.o_shape() || lse.shape != p.lse_shape())
    throw Error("backward needs O and dO of shape " + shape_string(p.o_shape()) + " and LSE of shape " +
                shape_string(p.lse_shape()));
  Buffers buf = Buffers::for_backward(p, q, k, v, o, lse, d_o);
  auto run_head = [&](int64_t b, int64_t h, Order pass, Observer* observer) {
    HeadRun run(p, buf, b, h, tiling, pass);
    run.prologue(observer);
    for (int64_t s = 0; s < run.schedule().steps(); ++s) run.step(s, observer);
    run.epilogue(observer);
  };
  // One task per (batch, kv head): its query heads add into the same dK, dV, so they run in turn.
  const Order kv_pass = is_deterministic(order) ? Order::dkdv : order;
  auto run_group = [&](int64_t bg, Observer* observer) {
    const int64_t b = bg / p.heads_kv, g = bg % p.heads_kv;
    for (int64_t h = g * p.group(); h < (g + 1) * p.group(); ++h) run_head(b, h, kv_pass, observer);
  };
  if (obs) {
    for (int64_t bg = 0; bg < p.batch * p.heads_kv; ++bg) run_group(bg, obs);
  } else {
    parallel_for(p.batch * p.heads_kv, [&](int64_t bg) { run_group(bg, nullptr); });
  }
  // The deterministic backward's second pass: dQ a (batch, query head) at a time, each row written once.
  if (is_deterministic(order)) {
    if (obs) {
      for (int64_t bh = 0; bh < p.batch * p.heads_q; ++bh) run_head(bh / p.heads_q, bh % p.heads_q, Order::dq, obs);
    } else {
      parallel_for(p.batch * p.heads_q,
                   [&](int64_t bh) { run_head(bh / p.heads_q, bh % p.heads_q, Order::dq, nullptr); });
    }
  }
  round_all(buf.dq, p.dtype);
  round_all(buf.dk, p.dtype);
  round_all(buf.dv, p.dtype);
  return {std::move(buf.dq), std::move(buf.dk), std::move(buf.dv)};
}

}  // namespace flashlab::tiled
