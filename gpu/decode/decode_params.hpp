// DecodeParams: one KV-cache decoding call on the device, as core's DecodeProblem
// describes it (flash_attn_with_kvcache): rotary and append into the cache, then
// attention of q_len queries a batch entry over its cache, split over the keys
// (flash-decoding) and combined.
//
// Tensors (device pointers, contiguous):
//   q, o            (batch, q_len, heads_q, head_dim)
//   lse             (batch, heads_q, q_len) fp32, natural log
//   k_cache,v_cache (batch, cache_len, heads_kv, head_dim), or paged (num_pages, page_size, heads_kv,
//                   head_dim) through block_table (batch, max_pages) int32
//   cache_seqlens   (batch) int32: keys in the cache before the append
//   k_new, v_new    (batch, new_len, heads_kv, head_dim), or null with new_len 0
//   cos, sin        (rotary rows, rotary_dim / 2), or null without rotary
//   scratch         decode_scratch_bytes(): the rotated queries, and with num_splits > 1 each split's
//                   normalized partial O (fp32) and LSE
#pragma once
#include <cstddef>
#include <cstdint>

#include "params.hpp"

namespace flashlab::gpu {

struct DecodeParams {
  const void* q = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  const int* block_table = nullptr;  // null: contiguous cache
  const int* cache_seqlens = nullptr;
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  void* scratch = nullptr;
  int batch = 1, heads_q = 1, heads_kv = 1, head_dim = 64, q_len = 1;
  int cache_len = 0;                 // contiguous: rows per entry
  int page_size = 0, max_pages = 0;  // paged
  int new_len = 0;
  int rotary = 0;                    // 0 none, 1 interleaved (GPT-J pairs 2k, 2k+1), 2 half (GPT-NeoX k, k + rd/2)
  int rotary_dim = 0;
  int num_splits = 1;
  float scale = 0;
  float softcap = 0;
  bool causal = false;
  Dtype dtype = Dtype::bf16;
};

// Bytes of device scratch decode_forward needs for p.
size_t decode_scratch_bytes(const DecodeParams& p);
// "" when the kernels take p, else why not.
const char* decode_unsupported(const DecodeParams& p);
// flash-decoding's split count for p on the current device (`sms` SMs) whose longest entry has
// max_seqlen_k keys: gpu/shapes.hpp's decode_split_count with the device's HBM peak and this kernel's
// occupancy and bytes in flight; 1 when the grid without splits already streams at the HBM's rate.
int decode_num_splits(const DecodeParams& p, int sms, int max_seqlen_k);
// Rotary and append, the split kernel, and (num_splits > 1) the combine, on `stream`.
void decode_forward(const DecodeParams& p, cudaStream_t stream);

}  // namespace flashlab::gpu
