// The kernel launchers, one per version (llm.c style: each .cu file holds one
// operation's versions, with a version index at its top).
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "flashlab/error.hpp"
#include "params.hpp"
#include "shapes.hpp"

namespace flashlab::gpu {

// A dense mask's block lists must be made at the tiles of the kernel that walks them (launch.hpp
// DeviceMask makes them with shapes.hpp's functions); a launch checks before it starts.
inline void check_block_lists(const BlockLists& l, int block_m, int block_n, const char* kernel) {
  if (l.counts && (l.block_m != block_m || l.block_n != block_n))
    throw Error(std::string(kernel) + ": the dense mask's block lists are for " + std::to_string(l.block_m) + " x " +
                std::to_string(l.block_n) + " tiles and this kernel runs " + std::to_string(block_m) + " x " +
                std::to_string(block_n));
}

// A kernel's instantiation for this problem's softcap and features (params.hpp Features): `make` takes
// std::bool_constant<softcap> and std::integral_constant<Features, f> and returns that instantiation's
// address, so a launch names its kernel once rather than once for each of the six.
template <class Make>
auto pick_instantiation(const AttentionParams& p, Make make) {
  using F = Features;
  const auto with = [&](auto cap) {
    switch (p.features()) {
      case F::none: return make(cap, std::integral_constant<F, F::none>{});
      case F::mask: return make(cap, std::integral_constant<F, F::mask>{});
      case F::extras: break;
    }
    return make(cap, std::integral_constant<F, F::extras>{});
  };
  return p.softcap > 0.f ? with(std::true_type{}) : with(std::false_type{});
}

// fa1_minimal.cu: Algorithm 1, fp32 scalar. l, m: (batch, heads, seqlen_q) fp32 scratch.
void fa1_minimal_forward(const AttentionParams& p, float* l_scratch, float* m_scratch, cudaStream_t stream);

// fa2_fwd.cu: FlashAttention-2 forward on tensor cores (mma.sync m16n8k16), bf16 or fp16. Compiled
// for head_dim 64, 128 and 256; any other multiple of 8 up to 256 runs zero-padded to the next one
// (shapes.hpp: fa2_padded_head_dim, and the tile shape of each).
bool fa2_forward_supports(const AttentionParams& p);
void fa2_forward(const AttentionParams& p, cudaStream_t stream);
// fa2_fwd_pairs.cu: the head_dim 256 forward with warp pairs splitting the head dim (fa2_forward
// calls it; p as fa2_forward_supports accepts it, head_dim padded to 256).
void fa2_forward_pairs_d256(const AttentionParams& p, cudaStream_t stream);

// fa2_bwd.cu: FlashAttention-2 backward (dK, dV per K/V block; dQ by fp32 atomics, or by its own
// kernel when p.deterministic). p.o and p.lse are the forward's; p.scratch holds
// fa2_backward_scratch_bytes(p) bytes of device memory.
size_t fa2_backward_scratch_bytes(const BackwardParams& p);
void fa2_backward(const BackwardParams& p, cudaStream_t stream);
// The opt-in shared memory per block of the current device (227 KiB on sm_90, 163 KiB on A100): what
// fa2_backward_shape is asked with.
size_t max_smem_per_block();
// The current device's L2 in bytes (what tile_order.hpp's sections are sized by).
double l2_cache_bytes();

// fa3/fa3_fwd.cu: the FlashAttention-3-style Hopper forward (TMA, wgmma, warp-specialized, persistent),
// bf16 or fp16, head dims as fa2. fa3_forward_unsupported says why a problem or this device cannot run it
// ("" when it can): it needs an sm_90 GPU.
std::string fa3_forward_unsupported(const AttentionParams& p);
void fa3_forward(const AttentionParams& p, cudaStream_t stream);
// Its FP8 version: p.q, p.k, p.v in float8 e4m3 (x = e4m3 x p.descale_*, core's fp8.hpp), p.o in bf16, LSE
// as the others; head dims padded to 128 or 256 (multiples of 16), causal and sliding windows, softcap,
// GQA, fixed-length batches. It writes V^T into a buffer of its own first (one a stream, grown as needed).
std::string fa3_fp8_forward_unsupported(const AttentionParams& p);
void fa3_fp8_forward(const AttentionParams& p, cudaStream_t stream);
// fa3/fa3_bwd.cu: its backward (wgmma for the five GEMMs, TMA, dQ by bulk reductions; p.deterministic adds
// them in a fixed order), head dims up to 128, the window rule's masks, softcap, GQA, varlen.
// fa3_backward_unsupported says why not ("" when it can); p.scratch holds fa3_backward_scratch_bytes(p).
std::string fa3_backward_unsupported(const BackwardParams& p);
size_t fa3_backward_scratch_bytes(const BackwardParams& p);
void fa3_backward(const BackwardParams& p, cudaStream_t stream);

// standard.cu: cuBLAS QK^T into an fp32 S, a softmax kernel writing P, cuBLAS PV.
// s_scratch: batch*heads*sq*sk floats; p_scratch: the same count in the input dtype.
void standard_forward(const AttentionParams& p, float* s_scratch, void* p_scratch, cudaStream_t stream);

}  // namespace flashlab::gpu
