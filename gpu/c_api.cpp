// The first C ABI, positional: flashlab's kernels on device pointers that another program owns
// (PyTorch tensors through ctypes, bench/fa2_abi.py). Returns 0 on success; otherwise a non-zero
// code and the reason in `error`. Kept for the bench scripts as thin wrappers over launch.hpp, the
// same launchers capi/ (libflashlab.so, the versioned ABI with named fields) calls.
#include <cstring>
#include <string>

#include "cuda_check.hpp"
#include "kernels.hpp"
#include "launch.hpp"

namespace {

int fail(char* error, int error_len, const std::string& what) {
  if (error && error_len > 0) {
    std::strncpy(error, what.c_str(), size_t(error_len) - 1);
    error[error_len - 1] = '\0';
  }
  return 1;
}

// The shared shape checks and fields of both entry points.
bool fill_params(flashlab::gpu::AttentionParams& p, int batch, int seqlen_q, int seqlen_k, int heads_q, int heads_kv,
                 int head_dim, int dtype, float scale, int window_left, int window_right, float softcap,
                 char* error, int error_len) {
  using namespace flashlab::gpu;
  if (batch <= 0 || seqlen_q <= 0 || seqlen_k <= 0 || heads_q <= 0 || heads_kv <= 0 || head_dim <= 0 ||
      heads_q % heads_kv != 0) {
    fail(error, error_len, "invalid shape");
    return false;
  }
  if (dtype < 0 || dtype > 2) {
    fail(error, error_len, "dtype must be 0 (fp32), 1 (fp16) or 2 (bf16)");
    return false;
  }
  p.batch = batch;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.dtype = static_cast<Dtype>(dtype);
  p.scale = scale;
  p.window_left = window_left;
  p.window_right = window_right;
  p.softcap = softcap;
  set_contiguous_strides(p);
  return true;
}

}  // namespace

extern "C" int flashlab_forward(const char* kernel, const void* q, const void* k, const void* v, void* o, float* lse,
                                int batch, int seqlen_q, int seqlen_k, int heads_q, int heads_kv, int head_dim,
                                int dtype, float scale, int window_left, int window_right, float softcap,
                                void* stream, char* error, int error_len) {
  using namespace flashlab::gpu;
  try {
    if (!kernel || !q || !k || !v || !o || !lse) return fail(error, error_len, "null pointer argument");
    AttentionParams p;
    if (!fill_params(p, batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, scale, window_left,
                     window_right, softcap, error, error_len))
      return 1;
    p.q = q;
    p.k = k;
    p.v = v;
    p.o = o;
    p.lse = lse;
    launch_forward(kernel, p, static_cast<cudaStream_t>(stream));
    return 0;
  } catch (const std::exception& e) {
    return fail(error, error_len, e.what());
  }
}

// fa3's FP8 forward on contiguous (batch, seqlen, heads, head_dim) tensors: q, k, v in float8 e4m3 (x = e4m3 x
// descale), o in bf16, lse fp32 (batch, heads, seqlen_q). V^T is written to a buffer the library keeps.
extern "C" int flashlab_forward_fp8(const void* q, const void* k, const void* v, void* o, float* lse, int batch,
                                    int seqlen_q, int seqlen_k, int heads_q, int heads_kv, int head_dim,
                                    float descale_q, float descale_k, float descale_v, float scale, int window_left,
                                    int window_right, float softcap, void* stream, char* error, int error_len) {
  using namespace flashlab::gpu;
  try {
    if (!q || !k || !v || !o || !lse) return fail(error, error_len, "null pointer argument");
    AttentionParams p;
    if (!fill_params(p, batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, int(Dtype::bf16), scale, window_left,
                     window_right, softcap, error, error_len))
      return 1;
    p.q = q;
    p.k = k;
    p.v = v;
    p.o = o;
    p.lse = lse;
    p.descale_q = descale_q;
    p.descale_k = descale_k;
    p.descale_v = descale_v;
    fa3_fp8_forward(p, static_cast<cudaStream_t>(stream));
    return 0;
  } catch (const std::exception& e) {
    return fail(error, error_len, e.what());
  }
}

// The backward of fa2 on contiguous (batch, seqlen, heads, head_dim) tensors; o and lse are the forward's.
// Scratch (fp32 dQ and two floats a row) is allocated on `stream` and freed before returning.
extern "C" int flashlab_backward(const char* kernel, const void* q, const void* k, const void* v, const void* o,
                                 const float* lse, const void* d_o, void* dq, void* dk, void* dv, int batch,
                                 int seqlen_q, int seqlen_k, int heads_q, int heads_kv, int head_dim, int dtype,
                                 float scale, int window_left, int window_right, float softcap, int deterministic,
                                 void* stream, char* error, int error_len) {
  using namespace flashlab::gpu;
  try {
    if (!kernel || !q || !k || !v || !o || !lse || !d_o || !dq || !dk || !dv)
      return fail(error, error_len, "null pointer argument");
    BackwardParams p;
    if (!fill_params(p, batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, scale, window_left,
                     window_right, softcap, error, error_len))
      return 1;
    p.q = q;
    p.k = k;
    p.v = v;
    p.o = const_cast<void*>(o);
    p.lse = const_cast<float*>(lse);
    p.d_o = d_o;
    p.dq = dq;
    p.dk = dk;
    p.dv = dv;
    p.deterministic = deterministic != 0;
    launch_backward(kernel, p, static_cast<cudaStream_t>(stream));
    return 0;
  } catch (const std::exception& e) {
    return fail(error, error_len, e.what());
  }
}
