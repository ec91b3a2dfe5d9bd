#include "launch.hpp"

#include <vector>

#include "cuda_check.hpp"
#include "flashlab/dropout.hpp"
#include "flashlab/error.hpp"
#include "kernels.hpp"

namespace flashlab::gpu {

AttentionParams params_of(const Problem& p, Dtype dt) {
  AttentionParams a;
  a.batch = int(p.batch);
  a.heads_q = int(p.heads_q);
  a.heads_kv = int(p.heads_kv);
  a.seqlen_q = int(p.seqlen_q);
  a.seqlen_k = int(p.seqlen_k);
  a.head_dim = int(p.head_dim);
  a.scale = float(p.softmax_scale());
  a.softcap = float(p.softcap);
  a.window_left = int(p.left());
  a.window_right = int(p.right());
  a.dtype = dt;
  if (p.dropout_p > 0) {
    a.dropout_seed = p.seed;
    a.dropout_threshold = dropout::threshold(p.dropout_p);
    a.dropout_keep_scale = float(1.0 / (1.0 - p.dropout_p));
  }
  set_contiguous_strides(a);
  return a;
}

DeviceSlopes::DeviceSlopes(const Problem& problem, AttentionParams& p, cudaStream_t stream) : stream_(stream) {
  if (!problem.alibi) return;
  std::vector<float> slopes(size_t(problem.heads_q));
  for (int64_t h = 0; h < problem.heads_q; ++h) slopes[size_t(h)] = float(problem.alibi_slope(h));
  FLASHLAB_CUDA(cudaMallocAsync(&ptr_, slopes.size() * 4, stream));
  FLASHLAB_CUDA(cudaMemcpyAsync(ptr_, slopes.data(), slopes.size() * 4, cudaMemcpyHostToDevice, stream));
  FLASHLAB_CUDA(cudaStreamSynchronize(stream));  // the pageable source is freed when this returns
  p.alibi_slopes = static_cast<const float*>(ptr_);
}

DeviceMask::DeviceMask(const Problem& problem, cudaStream_t stream) : stream_(stream) {
  if (problem.mask.kind == MaskKind::none) return;
  if (!problem.interval_mask() || problem.varlen())
    throw Error("the GPU kernels take a mask function's rows as intervals of a fixed-length batch");
  const size_t rows = size_t(problem.batch * problem.seqlen_q);
  std::vector<int> bounds(2 * rows);
  for (int64_t b = 0; b < problem.batch; ++b)
    for (int64_t i = 0; i < problem.seqlen_q; ++i) {
      bounds[size_t(b * problem.seqlen_q + i)] = int(problem.col_begin(b, i));
      bounds[rows + size_t(b * problem.seqlen_q + i)] = int(problem.col_end(b, i));
    }
  FLASHLAB_CUDA(cudaMallocAsync(&ptr_, bounds.size() * 4, stream));
  FLASHLAB_CUDA(cudaMemcpyAsync(ptr_, bounds.data(), bounds.size() * 4, cudaMemcpyHostToDevice, stream));
  FLASHLAB_CUDA(cudaStreamSynchronize(stream));  // the pageable source is freed when this returns
  rows_ = rows;
}

void DeviceMask::set(AttentionParams& p) const {
  if (!ptr_) return;
  p.mask_lo = static_cast<const int*>(ptr_);
  p.mask_hi = p.mask_lo + rows_;
}

DeviceMask::~DeviceMask() {
  if (ptr_) cudaFreeAsync(ptr_, stream_);
}

DeviceSlopes::~DeviceSlopes() {
  if (ptr_) cudaFreeAsync(ptr_, stream_);
}

void launch_forward(const std::string& kernel, const AttentionParams& p, cudaStream_t stream) {
  if (kernel == "fa2") {
    fa2_forward(p, stream);
  } else if (kernel == "fa3") {
    fa3_forward(p, stream);
  } else if (kernel == "standard") {
    const size_t plane = size_t(p.batch) * p.heads_q * p.seqlen_q * p.seqlen_k;  // S (fp32) and P per head
    void *S = nullptr, *P = nullptr;
    FLASHLAB_CUDA(cudaMallocAsync(&S, plane * 4, stream));
    FLASHLAB_CUDA(cudaMallocAsync(&P, plane * (p.dtype == Dtype::fp32 ? 4 : 2), stream));
    standard_forward(p, static_cast<float*>(S), P, stream);
    FLASHLAB_CUDA(cudaFreeAsync(S, stream));
    FLASHLAB_CUDA(cudaFreeAsync(P, stream));
  } else {
    throw Error("unknown kernel '" + kernel + "': expected fa2, fa3 or standard");
  }
}

void launch_backward(const std::string& kernel, BackwardParams& p, cudaStream_t stream) {
  if (kernel != "fa2") throw Error("kernel '" + kernel + "' has no backward: only fa2 has one");
  FLASHLAB_CUDA(cudaMallocAsync(&p.scratch, fa2_backward_scratch_bytes(p), stream));
  try {
    fa2_backward(p, stream);
  } catch (...) {
    cudaFreeAsync(p.scratch, stream);
    p.scratch = nullptr;
    throw;
  }
  FLASHLAB_CUDA(cudaFreeAsync(p.scratch, stream));
  p.scratch = nullptr;
}

}  // namespace flashlab::gpu
