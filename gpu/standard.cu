// standard: attention the unfused way, as PyTorch's math path does it; the baseline every lesson
// compares the fused kernels with, and the reason it runs out of memory at long sequences.
//
// By role:
//   S = Q K^T        cuBLAS, one strided-batched GEMM per (batch, kv head), fp32 out   (sq x sk per head)
//   P = softmax(S)   one CTA per row of S: scale, softcap, mask, max, exp, sum (two block reductions);
//                    P in the input dtype, LSE
//   O = P V          cuBLAS again
// S and P are written to and read back from HBM: at seqlen 32768 with 32 heads they need 192 GiB, and
// `flashlab run --impl gpu-standard` refuses with the bytes it would need (gpu/README.md).
//
// Tile shape: no tiles of its own. cuBLAS picks its GEMM tiles; the softmax kernel is shapes.hpp's
// standard_softmax_shape, a CTA of 256 threads a row (`flashlab shapes --algo standard`).
//
// Where it stands: checked, not timed. The shared harness runs it (gpu-standard) against the fp64 oracle
// on every case where a GPU is present; no timing against the anchors has been recorded. cuBLAS is
// opened with dlopen on first use (below: why).
//
// Version index (full entries in gpu/HISTORY.md):
//   v1  cublasGemmStridedBatchedEx with fp32 accumulation; a one-pass-per-row softmax kernel.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <dlfcn.h>
#include <cuda_fp16.h>

#include <cmath>

#include "cuda_check.hpp"
#include "kernels.hpp"
#include "mask.cuh"
#include "shapes.hpp"

#define FLASHLAB_CUBLAS(call)                                                                             \
  do {                                                                                                    \
    const cublasStatus_t st_ = (call);                                                                    \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      throw ::flashlab::Error(std::string(#call) + " failed: cuBLAS status " + std::to_string(int(st_))); \
  } while (0)

namespace flashlab::gpu {
namespace {

cudaDataType_t cuda_type(Dtype t) {
  return t == Dtype::bf16 ? CUDA_R_16BF : t == Dtype::fp16 ? CUDA_R_16F : CUDA_R_32F;
}

template <typename T>
__device__ T from_float(float x);
template <>
__device__ float from_float<float>(float x) { return x; }
template <>
__device__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// One CTA per row of S (all heads): P = softmax(masked score(S)), LSE = max + log(sum).
template <typename T>
__global__ void softmax_rows(const float* S, T* P, float* lse, AttentionParams p) {
  const int64_t row_id = blockIdx.x;  // (b, h, i)
  const int i = int(row_id % p.seqlen_q);
  const int64_t bh = row_id / p.seqlen_q;
  const float* s = S + row_id * p.seqlen_k;
  T* out = P + row_id * p.seqlen_k;
  const int lo = col_begin(i, p.seqlen_q, p.seqlen_k, p.window_left);
  const int hi = col_end(i, p.seqlen_q, p.seqlen_k, p.window_right);
  auto logit = [&](int c) {
    if (c < lo || c >= hi) return -INFINITY;
    const float x = p.scale * s[c];
    return p.softcap > 0.f ? p.softcap * tanhf(x / p.softcap) : x;
  };
  __shared__ float red[32];
  auto block_reduce = [&](float v, bool is_max) {
    for (int off = 16; off > 0; off /= 2) {
      const float other = __shfl_xor_sync(0xffffffff, v, off);
      v = is_max ? fmaxf(v, other) : v + other;
    }
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : (is_max ? -INFINITY : 0.f);
    if (threadIdx.x < 32)
      for (int off = 16; off > 0; off /= 2) {
        const float other = __shfl_xor_sync(0xffffffff, v, off);
        v = is_max ? fmaxf(v, other) : v + other;
      }
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    const float result = red[0];
    __syncthreads();  // red is reused by the next reduction
    return result;
  };
  float m = -INFINITY;
  for (int c = threadIdx.x; c < p.seqlen_k; c += blockDim.x) m = fmaxf(m, logit(c));
  m = block_reduce(m, true);
  const float m_use = m == -INFINITY ? 0.f : m;
  float l = 0.f;
  for (int c = threadIdx.x; c < p.seqlen_k; c += blockDim.x) l += expf(logit(c) - m_use);
  l = block_reduce(l, false);
  const float inv = l > 0.f ? 1.f / l : 0.f;
  for (int c = threadIdx.x; c < p.seqlen_k; c += blockDim.x) out[c] = from_float<T>(expf(logit(c) - m_use) * inv);
  if (threadIdx.x == 0) lse[bh * p.seqlen_q + i] = l > 0.f ? m + logf(l) : -INFINITY;
}

// cuBLAS is opened on first use rather than linked: its libraries add ~150 MiB
// of resident pages to every process at start-up, which would swamp the memory
// figures of the CPU implementations that share the flashlab binary.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                         const void*, cudaDataType, int, long long, const void*, cudaDataType, int, long long,
                         const void*, void*, cudaDataType, int, long long, int, cublasComputeType_t,
                         cublasGemmAlgo_t) = nullptr;
  cublasHandle_t handle = nullptr;
};

const Cublas& cublas() {
  static const Cublas api = [] {
    Cublas c;
    void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen(FLASHLAB_CUDA_LIBRARY_DIR "/libcublas.so.13", RTLD_NOW | RTLD_LOCAL);  // the toolkit built against
    if (!lib) throw Error(std::string("standard: cannot load cuBLAS (libcublas.so.13): ") + dlerror());
    c.create = reinterpret_cast<decltype(c.create)>(dlsym(lib, "cublasCreate_v2"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(dlsym(lib, "cublasSetStream_v2"));
    c.gemm = reinterpret_cast<decltype(c.gemm)>(dlsym(lib, "cublasGemmStridedBatchedEx"));
    if (!c.create || !c.set_stream || !c.gemm) throw Error("standard: cuBLAS lacks the functions flashlab calls");
    FLASHLAB_CUBLAS(c.create(&c.handle));
    return c;
  }();
  return api;
}

}  // namespace

void standard_forward(const AttentionParams& p, float* S, void* P, cudaStream_t stream) {
  if (p.cu_seqlens_q) throw Error("standard: varlen batches are not supported");
  const Cublas& blas = cublas();
  FLASHLAB_CUBLAS(blas.set_stream(blas.handle, stream));
  const int group = p.heads_q / p.heads_kv;
  const size_t esize = p.dtype == Dtype::fp32 ? 4 : 2;
  const cudaDataType_t t = cuda_type(p.dtype);
  const float one = 1.f, zero = 0.f;
  const int64_t plane = int64_t(p.seqlen_q) * p.seqlen_k;  // one head's S
  // Row-major S (sq x sk) is column-major S^T = K Q^T: m = sk, n = sq, k = d.
  for (int b = 0; b < p.batch; ++b)
    for (int g = 0; g < p.heads_kv; ++g) {
      const char* q = static_cast<const char*>(p.q) + (b * p.q_batch_stride + int64_t(g) * group * p.q_head_stride) * esize;
      const char* k = static_cast<const char*>(p.k) + (b * p.k_batch_stride + g * p.k_head_stride) * esize;
      float* s = S + (int64_t(b) * p.heads_q + int64_t(g) * group) * plane;
      FLASHLAB_CUBLAS(blas.gemm(blas.handle, CUBLAS_OP_T, CUBLAS_OP_N, p.seqlen_k, p.seqlen_q,
                                                 p.head_dim, &one, k, t, int(p.k_row_stride), 0, q, t,
                                                 int(p.q_row_stride), p.q_head_stride, &zero, s, CUDA_R_32F,
                                                 p.seqlen_k, plane, group, CUBLAS_COMPUTE_32F,
                                                 CUBLAS_GEMM_DEFAULT));
    }
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.seqlen_q;
  const int threads = standard_softmax_shape(p.head_dim).threads;  // a CTA a row of S
  if (p.dtype == Dtype::bf16)
    softmax_rows<__nv_bfloat16><<<rows, threads, 0, stream>>>(S, static_cast<__nv_bfloat16*>(P), p.lse, p);
  else if (p.dtype == Dtype::fp16)
    softmax_rows<__half><<<rows, threads, 0, stream>>>(S, static_cast<__half*>(P), p.lse, p);
  else
    softmax_rows<float><<<rows, threads, 0, stream>>>(S, static_cast<float*>(P), p.lse, p);
  FLASHLAB_CUDA_LAUNCHED();
  // Row-major O (sq x d) is column-major O^T = V^T P^T: m = d, n = sq, k = sk.
  for (int b = 0; b < p.batch; ++b)
    for (int g = 0; g < p.heads_kv; ++g) {
      const char* v = static_cast<const char*>(p.v) + (b * p.v_batch_stride + g * p.v_head_stride) * esize;
      const char* pm = static_cast<const char*>(P) + (int64_t(b) * p.heads_q + int64_t(g) * group) * plane * esize;
      char* o = static_cast<char*>(p.o) + (b * p.o_batch_stride + int64_t(g) * group * p.o_head_stride) * esize;
      FLASHLAB_CUBLAS(blas.gemm(blas.handle, CUBLAS_OP_N, CUBLAS_OP_N, p.head_dim, p.seqlen_q,
                                                 p.seqlen_k, &one, v, t, int(p.v_row_stride), 0, pm, t,
                                                 p.seqlen_k, plane, &zero, o, t, int(p.o_row_stride),
                                                 p.o_head_stride, group, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

}  // namespace flashlab::gpu
