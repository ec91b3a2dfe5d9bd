// Naive attention, forward and backward, written as the equations read.
// One template serves the fp64 oracle and the input-precision emulation;
// `Round` is the identity for the oracle and rounds to the problem's dtype
// otherwise, applied where a low-precision framework stores a matrix.
#include "attention_reference.hpp"

#include <cmath>
#include <limits>

#include "flashlab/dropout.hpp"
#include "flashlab/error.hpp"
#include "flashlab/fp8.hpp"
#include "flashlab/score.hpp"
#include "flashlab/views.hpp"
#include "flashlab/parallel.hpp"

namespace flashlab::reference {
namespace {

template <class Real>
struct Rounder {
  DType dtype;
  bool active;  // false for the fp64 oracle
  bool e4m3 = false;  // round to fp8 e4m3 instead (Precision::fp8's P)
  Real operator()(Real x) const {
    if (!active) return x;
    return static_cast<Real>(e4m3 ? fp8::round_to_e4m3(static_cast<float>(x)) : round_to(dtype, static_cast<float>(x)));
  }
  template <class M>
  void all(M& m) const {
    if (active) m = m.unaryExpr([this](Real x) { return (*this)(x); });
  }
};

// The dropout scale Z_ij = keep_ij / (1 - p) of one (batch, head), or all ones.
template <class Real>
RowMajor<Real> dropout_scale(const Problem& p, int64_t b, int64_t h) {
  const int64_t sq = p.len_q(b), sk = p.len_k(b);
  RowMajor<Real> z = RowMajor<Real>::Ones(sq, sk);
  if (p.dropout_p <= 0) return z;
  const uint64_t key = dropout::head_key(p.seed, b, h);
  const uint32_t t = dropout::threshold(p.dropout_p);
  const Real keep_scale = static_cast<Real>(1.0 / (1.0 - p.dropout_p));
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) z(i, j) = dropout::keep(key, i, j, t) ? keep_scale : Real(0);
  return z;
}

// S (sq x sk): the masked logits; Dot: the raw q.k products (needed for softcap's derivative).
template <class Real>
void scores(const Problem& p, int64_t b, int64_t h, const RowMajor<Real>& dot, RowMajor<Real>& s) {
  const ScoreFn<Real> score(p, b, h);
  s.resize(dot.rows(), dot.cols());
  for (int64_t i = 0; i < dot.rows(); ++i) {
    const int64_t lo = p.col_begin(b, i), hi = p.col_end(b, i);
    for (int64_t j = 0; j < dot.cols(); ++j) {
      // The mask function applied element by element: the row's interval, and a dense mask's bit.
      const bool visible = j >= lo && j < hi && (p.interval_mask() || p.mask.dense->at(b, h, i, j));
      s(i, j) = visible ? score(dot(i, j), i, j) : -std::numeric_limits<Real>::infinity();
    }
  }
}

// P = softmax(S) row by row; lse_i = m_i + log(l_i). A row with no visible
// column has P = 0 and lse = -inf instead of 0/0. `unnormalized`, when active,
// rounds P~ = exp(S - m) before the division by l (Precision::fp8's e4m3).
template <class Real>
void softmax_rows(RowMajor<Real>& s_to_p, Eigen::Matrix<Real, Eigen::Dynamic, 1>& lse,
                  const Rounder<Real>& unnormalized = {DType::fp32, false}) {
  lse.resize(s_to_p.rows());
  for (int64_t i = 0; i < s_to_p.rows(); ++i) {
    auto row = s_to_p.row(i);
    const Real m = row.maxCoeff();
    if (m == -std::numeric_limits<Real>::infinity()) {
      row.setZero();
      lse(i) = m;
      continue;
    }
    row = (row.array() - m).exp();
    const Real l = row.sum();
    unnormalized.all(row);
    row /= l;
    lse(i) = m + std::log(l);
  }
}

template <class Real>
Forward<Real> forward_impl(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Precision precision,
                           const Options& options) {
  p.validate();
  check_memory(p, precision, false, options);
  const bool fp8 = precision == Precision::fp8;
  const Rounder<Real> rnd{fp8 ? DType::bf16 : p.dtype, fp8 || (precision == Precision::input && p.dtype != DType::fp32)};
  const Rounder<Real> rnd_p{DType::fp32, fp8, true};  // fp8: P~ in e4m3
  Forward<Real> out{BasicTensor<Real>(p.o_shape()), BasicTensor<Real>(p.lse_shape())};

  parallel_for(p.batch * p.heads_q, [&](int64_t bh) {
    const int64_t b = bh / p.heads_q, h = bh % p.heads_q, g = p.kv_head(h);
    const RowMajor<Real> Q = q_head(p, q, b, h).template cast<Real>();   // (sq, d)
    const RowMajor<Real> K = k_head(p, k, b, g).template cast<Real>();   // (sk, d)
    const RowMajor<Real> V = v_head(p, v, b, g).template cast<Real>();   // (sk, dv)
    RowMajor<Real> dot = Q * K.transpose();                              // (sq, sk)
    rnd.all(dot);
    RowMajor<Real> P;                                                    // (sq, sk): S, then softmax(S) in place
    scores(p, b, h, dot, P);
    Eigen::Matrix<Real, Eigen::Dynamic, 1> lse;                          // (sq)
    softmax_rows(P, lse, rnd_p);
    if (!fp8) rnd.all(P);
    RowMajor<Real> O = p.dropout_p > 0 ? RowMajor<Real>(P.cwiseProduct(dropout_scale<Real>(p, b, h)) * V)
                                       : RowMajor<Real>(P * V);          // (sq, dv)
    rnd.all(O);
    o_head_mut(p, out.o, b, h) = O;
    for (int64_t i = 0; i < p.len_q(b); ++i) out.lse[p.lse_offset(b, h, i)] = lse(i);
  });
  return out;
}

// dV = (P o Z)^T dO,  dP = (dO V^T) o Z,  D_i = sum_j P_ij dP_ij,
// dS = P o (dP - D),  dDot = dS o dscore(Dot),  dQ = dDot K,  dK = dDot^T Q.
// Query heads that share a kv head (GQA) add into the same dK, dV.
template <class Real>
Backward<Real> backward_impl(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_o,
                             Precision precision, const Options& options) {
  p.validate();
  check_memory(p, precision, true, options);
  const Rounder<Real> rnd{p.dtype, precision == Precision::input && p.dtype != DType::fp32};
  Backward<Real> out{BasicTensor<Real>(p.q_shape()), BasicTensor<Real>(p.k_shape()), BasicTensor<Real>(p.v_shape())};

  parallel_for(p.batch * p.heads_kv, [&](int64_t bg) {
    const int64_t b = bg / p.heads_kv, g = bg % p.heads_kv;
    const RowMajor<Real> K = k_head(p, k, b, g).template cast<Real>();   // (sk, d)
    const RowMajor<Real> V = v_head(p, v, b, g).template cast<Real>();   // (sk, dv)
    RowMajor<Real> dK = RowMajor<Real>::Zero(K.rows(), K.cols());        // (sk, d)
    RowMajor<Real> dV = RowMajor<Real>::Zero(V.rows(), V.cols());        // (sk, dv)
    for (int64_t h = g * p.group(); h < (g + 1) * p.group(); ++h) {
      const ScoreFn<Real> score(p, b, h);
      const RowMajor<Real> Q = q_head(p, q, b, h).template cast<Real>();   // (sq, d)
      const RowMajor<Real> dO = o_head(p, d_o, b, h).template cast<Real>();// (sq, dv)
      RowMajor<Real> dot = Q * K.transpose();                              // (sq, sk)
      rnd.all(dot);
      RowMajor<Real> P;                                                    // (sq, sk)
      scores(p, b, h, dot, P);
      Eigen::Matrix<Real, Eigen::Dynamic, 1> lse;
      softmax_rows(P, lse);
      rnd.all(P);
      RowMajor<Real> dP = dO * V.transpose();                              // (sq, sk)
      if (p.dropout_p > 0) {
        const RowMajor<Real> Z = dropout_scale<Real>(p, b, h);             // (sq, sk)
        dV += P.cwiseProduct(Z).transpose() * dO;
        dP = dP.cwiseProduct(Z);
      } else {
        dV += P.transpose() * dO;
      }
      rnd.all(dP);
      const Eigen::Matrix<Real, Eigen::Dynamic, 1> D = P.cwiseProduct(dP).rowwise().sum();  // (sq)
      RowMajor<Real> dS = P.cwiseProduct(dP.colwise() - D);                // (sq, sk)
      rnd.all(dS);
      for (int64_t i = 0; i < dS.rows(); ++i)
        for (int64_t j = 0; j < dS.cols(); ++j) dS(i, j) *= score.dscore(dot(i, j));
      RowMajor<Real> dQ = dS * K;                                          // (sq, d)
      rnd.all(dQ);
      q_head_mut(p, out.dq, b, h) = dQ;
      dK += dS.transpose() * Q;
    }
    rnd.all(dK);
    rnd.all(dV);
    k_head_mut(p, out.dk, b, g) = dK;
    v_head_mut(p, out.dv, b, g) = dV;
  });
  return out;
}

}  // namespace

int64_t matrix_bytes(const Problem& p, Precision precision, bool backward) {
  int64_t largest = 0;  // the largest sq x sk of any batch entry
  for (int64_t b = 0; b < p.batch; ++b) largest = std::max(largest, p.len_q(b) * p.len_k(b));
  const int64_t real = precision == Precision::fp64 ? 8 : 4;
  // Alive at once per head: forward Dot and P; backward Dot, P, dP and dS; dropout adds its scale Z
  // and the product P o Z.
  const int64_t matrices = (backward ? 4 : 2) + (p.dropout_p > 0 ? 2 : 0);
  const int64_t in_flight = std::min<int64_t>(parallel_threads(), p.batch * (backward ? p.heads_kv : p.heads_q));
  return largest * real * matrices * in_flight;
}

void check_memory(const Problem& p, Precision precision, bool backward, const Options& options) {
  const int64_t need = matrix_bytes(p, precision, backward);
  if (need > options.memory_budget_bytes) {
    throw Error("the naive reference would need " + std::to_string(need) + " bytes (" +
                std::to_string(need >> 20) + " MiB) for its materialized " + std::to_string(p.seqlen_q) + " x " +
                std::to_string(p.seqlen_k) + " matrices, over its budget of " +
                std::to_string(options.memory_budget_bytes >> 20) +
                " MiB; use a tiled implementation (tiled-fa2) for this size");
  }
}

Forward<double> forward_fp64(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Options& o) {
  return forward_impl<double>(p, q, k, v, Precision::fp64, o);
}
Forward<float> forward_lowp(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Options& o) {
  return forward_impl<float>(p, q, k, v, Precision::input, o);
}
Forward<float> forward_fp8(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Options& o) {
  return forward_impl<float>(p, q, k, v, Precision::fp8, o);
}
Backward<double> backward_fp64(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& d_o, const Options& o) {
  return backward_impl<double>(p, q, k, v, d_o, Precision::fp64, o);
}
Backward<float> backward_lowp(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& d_o, const Options& o) {
  return backward_impl<float>(p, q, k, v, d_o, Precision::input, o);
}

}  // namespace flashlab::reference
