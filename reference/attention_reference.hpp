// The naive attention the rest of flashlab is checked against.
//
// It does what the textbook does and what PyTorch's math path does: for each
// (batch, head) it materializes the full score matrix S = score(Q K^T) and
// P = softmax(S) (sq x sk each), then O = P V. Backward materializes dP and
// dS as well. Two precisions:
//   Precision::fp64   everything in double: the oracle.
//   Precision::input  fp32 arithmetic with S, P, dP, dS and every output
//                     rounded to the problem's dtype, the way a low-precision
//                     framework computes it. Its error against the oracle sets
//                     the tolerance every other implementation must meet.
//   Precision::fp8    (forward) what an FP8 kernel's rule is measured by, on
//                     inputs that already hold e4m3 values times their
//                     descales: S and O rounded to bf16, as FlashAttention-3's
//                     FP8 test computes its reference (in bf16 on the
//                     dequantized inputs), and the unnormalized P~ = exp(S - m)
//                     rounded to e4m3 before P~ V, the operand an FP8 kernel's
//                     second GEMM reads (the row sum l stays in fp32).
//
// Memory: S and P cost sq * sk * sizeof(real) each per head in flight. A
// problem whose matrices exceed the budget is refused before anything is
// allocated, with the number of bytes it would need.
#pragma once
#include <cstdint>

#include "flashlab/problem.hpp"
#include "flashlab/tensor.hpp"

namespace flashlab::reference {

enum class Precision { fp64, input, fp8 };

template <class T>
struct Forward {
  BasicTensor<T> o;    // (batch, seqlen_q, heads_q, head_dim_v)
  BasicTensor<T> lse;  // (batch, heads_q, seqlen_q), natural log; -inf for a fully masked row
};

template <class T>
struct Backward {
  BasicTensor<T> dq;   // like Q
  BasicTensor<T> dk;   // like K
  BasicTensor<T> dv;   // like V
};

struct Options {
  int64_t memory_budget_bytes = int64_t{4} << 30;  // for the materialized matrices of the heads in flight
};

// Bytes of materialized sq x sk matrices a call would hold at once, and the
// check that refuses it (throws flashlab::Error naming the bytes).
int64_t matrix_bytes(const Problem& p, Precision precision, bool backward);
void check_memory(const Problem& p, Precision precision, bool backward, const Options& options);

Forward<double> forward_fp64(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Options& options = {});
Forward<float> forward_lowp(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Options& options = {});
Forward<float> forward_fp8(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Options& options = {});

// dO has O's shape. The backward pass recomputes S and P itself.
Backward<double> backward_fp64(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& d_o, const Options& options = {});
Backward<float> backward_lowp(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& d_o, const Options& options = {});

}  // namespace flashlab::reference
