// fa1_minimal: Algorithm 1 of FlashAttention, as plainly as CUDA allows. It is here to be read next to
// the paper, not to be fast.
//
// The kernel body, by role (one kernel does all; fa1_init_kernel first sets O = 0, l = 0, m = -inf):
//   scheduler  one CTA per (batch, head); K/V blocks outer (j), Q blocks inner (i): exactly the paper's
//              loop order, Tc x Tr steps in one CTA.
//   producer   thread t copies key row t of K_j and V_j, then its query row of Q_i, into shared memory
//              (fp32, no cp.async).
//   consumer   one thread a query row: S_ij = scale Q_i K_j^T by scalar dot products (softcap, the
//              bottom-right causal / window mask per element), P~ V_j likewise; no tensor cores.
//   softmax    m~ = rowmax(S_ij), P~ = exp(S_ij - m~), l~ = rowsum(P~); m_new, l_new as Algorithm 1.
//   epilogue   every step: O_i = diag(l_new)^-1 (diag(l) e^(m - m_new) O_i + e^(m~ - m_new) P~ V_j) and
//              m, l written back to HBM; at the end LSE = m + log(l).
// GQA, seqlen_q != seqlen_k; no varlen. fp32 only (other dtypes are converted by host.cu).
//
// Tile shape: shapes.hpp's fa1_minimal_shape (`flashlab shapes --algo fa1-minimal`): Br = Bc = 32, one
// warp (a thread a row), (Br + 2 Bc) d floats of shared memory (96 KiB at d = 256).
//
// Where it stands: checked, not timed. The shared harness runs it (gpu-fa1-minimal) against the fp64
// oracle on every case where a GPU is present; no timing against the anchors has been recorded.
//
// Version index (full entries in gpu/HISTORY.md):
//   v1  Algorithm 1 with masks (causal / window, bottom-right), softcap, GQA, seqlen_q != seqlen_k; fp32;
//       Br = Bc = 32.
#include <cfloat>
#include <cmath>

#include "cuda_check.hpp"
#include "kernels.hpp"
#include "mask.cuh"
#include "shapes.hpp"

namespace flashlab::gpu {
namespace {

// Br, Bc and the thread count (one a row of Q_i) are shapes.hpp's fa1_minimal_shape, the same at every
// head dim it takes.
constexpr int Br = fa1_minimal_shape(64).block_m, Bc = fa1_minimal_shape(64).block_n;
static_assert(fa1_minimal_shape(64).threads == Br && fa1_minimal_shape(1).block_m == Br &&
                  fa1_minimal_shape(256).block_m == Br && fa1_minimal_shape(1).block_n == Bc &&
                  fa1_minimal_shape(256).block_n == Bc,
              "fa1_minimal_kernel's tiles do not depend on the head dim");

__global__ void fa1_minimal_kernel(AttentionParams p, float* l_hbm, float* m_hbm) {
  extern __shared__ float sram[];
  const int d = p.head_dim, b = blockIdx.x, h = blockIdx.y, g = h / (p.heads_q / p.heads_kv), t = threadIdx.x;
  float* Qi = sram;            // (Br, d)
  float* Kj = Qi + Br * d;     // (Bc, d)
  float* Vj = Kj + Bc * d;     // (Bc, d)
  const float* q = static_cast<const float*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const float* k = static_cast<const float*>(p.k) + b * p.k_batch_stride + g * p.k_head_stride;
  const float* v = static_cast<const float*>(p.v) + b * p.v_batch_stride + g * p.v_head_stride;
  float* o = static_cast<float*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;
  float* l = l_hbm + (int64_t(b) * p.heads_q + h) * p.seqlen_q;
  float* m = m_hbm + (int64_t(b) * p.heads_q + h) * p.seqlen_q;
  const int Tr = (p.seqlen_q + Br - 1) / Br, Tc = (p.seqlen_k + Bc - 1) / Bc;

  for (int j = 0; j < Tc; ++j) {
    // Load K_j, V_j to SRAM (thread t copies key row t).
    const int key = j * Bc + t;
    for (int c = 0; c < d; ++c) {
      Kj[t * d + c] = key < p.seqlen_k ? k[int64_t(key) * p.k_row_stride + c] : 0.f;
      Vj[t * d + c] = key < p.seqlen_k ? v[int64_t(key) * p.v_row_stride + c] : 0.f;
    }
    __syncthreads();  // K_j, V_j complete before any row reads them
    for (int i = 0; i < Tr; ++i) {
      const int row = i * Br + t;
      if (row < p.seqlen_q) {
        const int lo = col_begin(row, p.seqlen_q, p.seqlen_k, p.window_left);
        const int hi = col_end(row, p.seqlen_q, p.seqlen_k, p.window_right);
        for (int c = 0; c < d; ++c) Qi[t * d + c] = q[int64_t(row) * p.q_row_stride + c];
        // S_ij = scale * Q_i K_j^T (softcapped, masked); m~ = rowmax(S_ij)
        float s[Bc];
        float m_tile = -INFINITY;
        for (int c = 0; c < Bc; ++c) {
          const int col = j * Bc + c;
          if (col < lo || col >= hi) {
            s[c] = -INFINITY;
            continue;
          }
          float dot = 0.f;
          for (int x = 0; x < d; ++x) dot += Qi[t * d + x] * Kj[c * d + x];
          s[c] = p.scale * dot;
          if (p.softcap > 0.f) s[c] = p.softcap * tanhf(s[c] / p.softcap);
          m_tile = fmaxf(m_tile, s[c]);
        }
        if (m_tile > -INFINITY) {  // a tile this row cannot see changes nothing
          // P~ = exp(S - m~), l~ = rowsum(P~); m_new = max(m, m~); l_new = e^(m - m_new) l + e^(m~ - m_new) l~
          float l_tile = 0.f;
          for (int c = 0; c < Bc; ++c) l_tile += (s[c] = expf(s[c] - m_tile));
          const float m_old = m[row], l_old = l[row];
          const float m_new = fmaxf(m_old, m_tile);
          const float a_old = expf(m_old - m_new), a_tile = expf(m_tile - m_new);
          const float l_new = a_old * l_old + a_tile * l_tile;
          // O_i = diag(l_new)^-1 (diag(l) e^(m - m_new) O_i + e^(m~ - m_new) P~ V_j)
          for (int c = 0; c < d; ++c) {
            float pv = 0.f;
            for (int x = 0; x < Bc; ++x) pv += s[x] * Vj[x * d + c];
            float* out = o + int64_t(row) * p.o_row_stride + c;
            *out = (l_old * a_old * *out + a_tile * pv) / l_new;
          }
          m[row] = m_new;
          l[row] = l_new;
        }
      }
    }
    __syncthreads();  // every row done with K_j, V_j before they are overwritten
  }
  // LSE = m + log(l); -inf where a row saw nothing.
  for (int row = t; row < p.seqlen_q; row += Br)
    p.lse[(int64_t(b) * p.heads_q + h) * p.seqlen_q + row] = l[row] > 0.f ? m[row] + logf(l[row]) : -INFINITY;
}

__global__ void fa1_init_kernel(AttentionParams p, float* l, float* m) {
  // Algorithm 1, line 2: O = 0, l = 0, m = -inf in HBM.
  const int64_t n = int64_t(p.batch) * p.heads_q * p.seqlen_q;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    l[idx] = 0.f;
    m[idx] = -INFINITY;
    const int64_t row = idx % p.seqlen_q, bh = idx / p.seqlen_q;
    float* o = static_cast<float*>(p.o) + (bh / p.heads_q) * p.o_batch_stride + (bh % p.heads_q) * p.o_head_stride +
               row * p.o_row_stride;
    for (int c = 0; c < p.head_dim; ++c) o[c] = 0.f;
  }
}

}  // namespace

void fa1_minimal_forward(const AttentionParams& p, float* l_scratch, float* m_scratch, cudaStream_t stream) {
  const TileShape shape = fa1_minimal_shape(p.head_dim);
  if (!shape.supported()) throw Error(std::string("fa1_minimal: ") + shape.why);
  const size_t smem = size_t(shape.smem_bytes);  // (Br + 2 Bc) head_dim floats
  FLASHLAB_CUDA(cudaFuncSetAttribute(fa1_minimal_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  fa1_init_kernel<<<256, 256, 0, stream>>>(p, l_scratch, m_scratch);
  FLASHLAB_CUDA_LAUNCHED();
  fa1_minimal_kernel<<<dim3(p.batch, p.heads_q), shape.threads, smem, stream>>>(p, l_scratch, m_scratch);
  FLASHLAB_CUDA_LAUNCHED();
}

}  // namespace flashlab::gpu
