// AttentionParams: one flat struct every GPU kernel reads (FA3-style): device
// pointers, explicit strides in elements, shapes and options. Tensors are laid
// out (batch, seqlen, heads, head_dim) as flash_attn_func takes them, or
// varlen (total, heads, head_dim) with cumulative offsets.
#pragma once
#include <cstdint>

namespace flashlab::gpu {

enum class Dtype : int { fp32 = 0, fp16 = 1, bf16 = 2 };

// A dense mask's bits (core's MaskKind::dense, true = may attend), one bit a (query row, key):
// word (b, h, i, j / 32) at words + b batch_stride + h head_stride + i row_words, bit j % 32. A mask
// that does not vary by batch entry or head has stride 0 there.
struct DenseBits {
  const uint32_t* words = nullptr;  // device; null: no dense mask
  int64_t batch_stride = 0, head_stride = 0;
  int row_words = 0;  // ceil(seqlen_k / 32)
};

// FlexAttention's compressed block mask at one kernel's tiles (tiled_cpu/block_mask.hpp compress()):
// for each line (a Q block of block_m rows for the forward and dQ, a K/V block of block_n keys for
// dK / dV) the count of its partial blocks and of its full ones, and their indices, the partial ones
// first: line L of batch variant v lists index[(v lines + L) cross + n] for n < partial + full, where
// n < partial needs the element mask and the rest do not. Blocks not listed are never visited.
struct BlockLists {
  const int* counts = nullptr;  // device (variants, lines, 2): partial, full; null: no lists
  const int* index = nullptr;   // device (variants, lines, cross)
  int lines = 0, cross = 0;     // lines and the blocks of the other side a line can list
  int block_m = 0, block_n = 0; // the kernel tiles the lists were made for (the launch checks them)
  bool by_batch = false;        // variant = batch entry (a 4-d mask with a batch dimension), else 0
};

// The options a kernel instantiation compiles in, each level adding to the one before; a problem runs
// the least that covers it (AttentionParams::features), so the kernels without a level keep their code
// and registers:
//   none    the window rule (causal, sliding window): the kernels as they were before masks
//   mask    a mask function: each row's interval of keys (mask_lo / mask_hi), a dense mask's bits and
//           each kernel's block lists
//   extras  ALiBi and dropout as well (their per-element bias, keep test and registers)
enum class Features : int { none, mask, extras };

// fa3 forward's PackGQA (FA3's pack_gqa): a tile's query rows drawn from every query head of one kv head
// (gpu/fa3/scheduler.cuh), so that a short query sequence under GQA fills the tile. automatic: where that
// wastes fewer of the tile's rows (fa3_fwd.cu pack_of); on: always (refused where it cannot); off: never.
enum class PackGqa : int { automatic, off, on };

struct AttentionParams {
  const void* q = nullptr;    // (batch, seqlen_q, heads_q,  head_dim)
  const void* k = nullptr;    // (batch, seqlen_k, heads_kv, head_dim)
  const void* v = nullptr;    // (batch, seqlen_k, heads_kv, head_dim)
  void* o = nullptr;          // (batch, seqlen_q, heads_q,  head_dim)
  float* lse = nullptr;       // (batch, heads_q, seqlen_q), natural log
  // Strides in elements.
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  int batch = 1, heads_q = 1, heads_kv = 1;
  int seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  const int* cu_seqlens_q = nullptr;  // device, batch + 1 entries; null for fixed length
  const int* cu_seqlens_k = nullptr;
  int total_q = 0, total_k = 0;       // varlen: cu_seqlens_q[batch], cu_seqlens_k[batch] (packed rows)
  float scale = 0;            // softmax scale
  float softcap = 0;          // 0: off
  int window_left = -1;       // -1: unbounded (causal is window_right = 0)
  int window_right = -1;
  Dtype dtype = Dtype::bf16;
  // ALiBi: score -= slope[h] |i + seqlen_k - seqlen_q - j| after the softcap (natural units).
  const float* alibi_slopes = nullptr;  // device, one per query head; null: off
  // Dropout (core's dropout.hpp, bit for bit): P_ij kept iff dropout::keep(head_key(seed, b, h), i, j,
  // threshold), and O scaled by keep_scale = 1 / (1 - p). threshold 0: off.
  uint64_t dropout_seed = 0;
  uint32_t dropout_threshold = 0;
  float dropout_keep_scale = 1.f;
  // fa3's FP8 forward (fa3_fp8_forward): q, k, v hold e4m3 values, x = e4m3 x descale (core's fp8.hpp),
  // o is bf16. The other kernels ignore them.
  float descale_q = 1.f, descale_k = 1.f, descale_v = 1.f;
  PackGqa pack_gqa = PackGqa::automatic;  // fa3 forward only
  // Which of the kernels' instantiations runs this problem (Features below).
  Features features() const {
    if (alibi_slopes != nullptr || dropout_threshold != 0) return Features::extras;
    return mask_lo != nullptr ? Features::mask : Features::none;
  }
  // A mask with one interval of visible keys a row, whose ends never decrease as the row grows (core's
  // prefix-LM, document and chunked masks, the window folded in: Problem::col_begin / col_end): row i of
  // batch entry b sees keys [mask_lo[b seqlen_q + i], mask_hi[b seqlen_q + i]). Fixed-length batches only.
  // Null: the window rule (mask.cuh).
  const int* mask_lo = nullptr;
  const int* mask_hi = nullptr;
  // A dense mask (holes inside a row): mask_lo / mask_hi hold the interval its bits are read within
  // (the window), `bits` the holes, and each kernel walks its own tiles' block lists.
  DenseBits bits;
  BlockLists forward_blocks;  // fa2 forward: lines are its Q blocks
  BlockLists dkdv_blocks;     // fa2 backward dK / dV: lines are its K/V blocks
  BlockLists dq_blocks;       // fa2 backward deterministic dQ: lines are its Q blocks
  BlockLists fa3_blocks;      // fa3 forward: lines are its Q blocks
  // Under a mask function, how each kernel deals its tiles (tile_order.hpp): its lines (len of them, at its
  // tiles) longest walk first (tiled::longest_first; a dK/dV kernel's K/V blocks: longest_first_columns),
  // in `sections` sections of (batch, head) pairs sized by the longest walk. fa3's forward: its Q blocks,
  // as its scheduler hands them out; fa2's forward and dK/dV kernels: their grid's order. Null lines: the
  // causal order (fa3), the grid's (fa2).
  struct Deal {
    const int* lines = nullptr;
    int len = 0, sections = 1;
  };
  Deal fa3_forward_deal, fa2_forward_deal, fa2_dkdv_deal;
};

// The backward adds the output gradient, the input gradients and fp32 scratch.
// dq, dk, dv and d_o share the strides of q, k, v and o.
struct BackwardParams : AttentionParams {
  const void* d_o = nullptr;  // (batch, seqlen_q, heads_q,  head_dim), the forward's O is `o`
  void* dq = nullptr;         // (batch, seqlen_q, heads_q,  head_dim)
  void* dk = nullptr;         // (batch, seqlen_k, heads_kv, head_dim)
  void* dv = nullptr;         // (batch, seqlen_k, heads_kv, head_dim)
  // Scratch, sized by fa2_backward_scratch_bytes: dQ in fp32 (rows x heads_q x head_dim) for the
  // atomic accumulation, and per row (laid out as lse) D = rowsum(dO * O) and LSE in log2 units.
  void* scratch = nullptr;
  bool deterministic = false;  // true: dQ from its own Q-outer kernel, no atomics, bit-reproducible
};

// Contiguous (batch, seqlen, heads, head_dim) strides.
inline void set_contiguous_strides(AttentionParams& p) {
  p.q_row_stride = int64_t{p.heads_q} * p.head_dim;
  p.q_head_stride = p.head_dim;
  p.q_batch_stride = p.q_row_stride * p.seqlen_q;
  p.k_row_stride = p.v_row_stride = int64_t{p.heads_kv} * p.head_dim;
  p.k_head_stride = p.v_head_stride = p.head_dim;
  p.k_batch_stride = p.v_batch_stride = p.k_row_stride * p.seqlen_k;
  p.o_row_stride = p.q_row_stride;
  p.o_head_stride = p.head_dim;
  p.o_batch_stride = p.q_batch_stride;
}

}  // namespace flashlab::gpu
