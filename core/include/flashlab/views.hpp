// Eigen views of one (batch, head) slice of a (tokens, heads, dim) tensor:
// a seqlen x dim row-major matrix whose rows are `heads * dim` floats apart.
// No copies; reference/ and tiled_cpu/ read and write through these.
#pragma once
#include <Eigen/Dense>

#include "flashlab/problem.hpp"
#include "flashlab/tensor.hpp"

namespace flashlab {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using HeadView = Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ConstHeadView = Eigen::Map<const RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// (len_q(b), head_dim) slice of Q for query head h
template <class T>
ConstHeadView<T> q_head(const Problem& p, const BasicTensor<T>& q, int64_t b, int64_t h) {
  return {q.ptr() + p.q_offset(b, 0, h), p.len_q(b), p.head_dim, Eigen::OuterStride<>(p.heads_q * p.head_dim)};
}
// (len_k(b), head_dim) slice of K for kv head g
template <class T>
ConstHeadView<T> k_head(const Problem& p, const BasicTensor<T>& k, int64_t b, int64_t g) {
  return {k.ptr() + p.k_offset(b, 0, g), p.len_k(b), p.head_dim, Eigen::OuterStride<>(p.heads_kv * p.head_dim)};
}
// (len_k(b), head_dim_v) slice of V for kv head g
template <class T>
ConstHeadView<T> v_head(const Problem& p, const BasicTensor<T>& v, int64_t b, int64_t g) {
  return {v.ptr() + p.v_offset(b, 0, g), p.len_k(b), p.dv(), Eigen::OuterStride<>(p.heads_kv * p.dv())};
}
// (len_q(b), head_dim_v) slice of O (or dO) for query head h
template <class T>
ConstHeadView<T> o_head(const Problem& p, const BasicTensor<T>& o, int64_t b, int64_t h) {
  return {o.ptr() + p.o_offset(b, 0, h), p.len_q(b), p.dv(), Eigen::OuterStride<>(p.heads_q * p.dv())};
}
template <class T>
HeadView<T> o_head_mut(const Problem& p, BasicTensor<T>& o, int64_t b, int64_t h) {
  return {o.ptr() + p.o_offset(b, 0, h), p.len_q(b), p.dv(), Eigen::OuterStride<>(p.heads_q * p.dv())};
}
template <class T>
HeadView<T> q_head_mut(const Problem& p, BasicTensor<T>& q, int64_t b, int64_t h) {
  return {q.ptr() + p.q_offset(b, 0, h), p.len_q(b), p.head_dim, Eigen::OuterStride<>(p.heads_q * p.head_dim)};
}
template <class T>
HeadView<T> k_head_mut(const Problem& p, BasicTensor<T>& k, int64_t b, int64_t g) {
  return {k.ptr() + p.k_offset(b, 0, g), p.len_k(b), p.head_dim, Eigen::OuterStride<>(p.heads_kv * p.head_dim)};
}
template <class T>
HeadView<T> v_head_mut(const Problem& p, BasicTensor<T>& v, int64_t b, int64_t g) {
  return {v.ptr() + p.v_offset(b, 0, g), p.len_k(b), p.dv(), Eigen::OuterStride<>(p.heads_kv * p.dv())};
}

}  // namespace flashlab
