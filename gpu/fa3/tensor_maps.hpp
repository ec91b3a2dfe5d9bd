// Tensor maps for the bulk tensor copy engine (TMA): how fa3's producer sees Q, K and V in global memory.
// Host code; the driver's cuTensorMapEncodeTiled is reached through the runtime
// (cudaGetDriverEntryPointByVersion), so nothing links against libcuda and CI machines without a driver
// still load the library.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace flashlab::gpu::fa3 {

// A (rows, heads, head_dim) view of a tensor of 16-bit (elem_bytes 2) or FP8 (1) elements whose rows are
// `row_stride` elements apart and whose heads `head_stride` apart (a (batch, seqlen, heads, d) tensor with
// batch and seqlen folded into rows, or a packed varlen one). Boxes are 128 bytes of columns (the 128-byte
// swizzle's width: 64 or 128 elements) by `box_rows` rows of `box_heads` heads (head-major: a head's rows
// together), written to shared memory with the 128-byte swizzle; columns at or past `head_dim` and rows
// past `rows` read as zeros.
CUtensorMap rows_heads_map(const void* base, int64_t rows, int heads, int head_dim, int64_t row_stride,
                           int64_t head_stride, int box_rows, int elem_bytes = 2, int box_heads = 1);

// V^T for the FP8 forward: `slabs` (batch x kv head) planes of `head_dim` rows of `keys` bytes (a multiple
// of 16). Boxes are 128 keys by `box_rows` head-dim rows of one plane, 128-byte swizzled; keys past `keys`
// and rows past `head_dim` read as zeros.
CUtensorMap vt_map(const void* base, int64_t keys, int head_dim, int64_t slabs, int box_rows);

}  // namespace flashlab::gpu::fa3
