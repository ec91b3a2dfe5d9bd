// The kernels on device memory the caller owns (PyTorch tensors through the C ABIs: capi/ and c_api.cpp),
// picked by name, on the caller's stream. host.cu drives the same kernels from host tensors for the
// harness; both build their AttentionParams with params_of.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "flashlab/problem.hpp"
#include "params.hpp"

namespace flashlab::gpu {

// A validated problem's shapes, scale, mask, softcap and dropout (seed, threshold, 1 / (1 - p)) in the
// kernels' struct, contiguous strides, no pointers (ALiBi's slopes: DeviceSlopes). Varlen fields (cu_seqlens, total_q/k, batch strides 0) are the caller's to set.
AttentionParams params_of(const Problem& p, Dtype dt);

// ALiBi's slopes (one per query head, natural units) on the device for launches on `stream`, uploaded
// here and freed stream-ordered when this goes out of scope; sets p.alibi_slopes. Nothing without ALiBi.
class DeviceSlopes {
 public:
  DeviceSlopes(const Problem& problem, AttentionParams& p, cudaStream_t stream);
  ~DeviceSlopes();
  DeviceSlopes(const DeviceSlopes&) = delete;
  DeviceSlopes& operator=(const DeviceSlopes&) = delete;

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// A mask function on the device for launches on `stream`, uploaded when made and freed stream-ordered
// with this object; set() points a launch's params at it, so one DeviceMask serves many calls
// (FlexAttention's create_block_mask once, attention many times). Nothing without a mask kind.
//   every kind   each row's interval of keys (params.hpp mask_lo / mask_hi: Problem::col_begin / col_end
//                of every row of every entry; for a dense mask the window its bits are read within)
//   dense        the bits (DenseBits) and, for each fa2 kernel and fa3's forward, FlexAttention's compressed
//                block mask at that kernel's tiles (BlockLists, from tiled_cpu's BlockMask, the one every
//                consumer uses)
//   every kind   also the order each kernel deals its lines in (tile_order.hpp): fa3's and fa2's forward Q
//                blocks (tiled::longest_first), fa2 dK/dV's K/V blocks (tiled::longest_first_columns)
class DeviceMask {
 public:
  DeviceMask(const Problem& problem, cudaStream_t stream);
  DeviceMask(const Problem& problem, AttentionParams& p, cudaStream_t stream) : DeviceMask(problem, stream) { set(p); }
  ~DeviceMask();
  DeviceMask(const DeviceMask&) = delete;
  DeviceMask& operator=(const DeviceMask&) = delete;
  void set(AttentionParams& p) const;

 private:
  // Where each part sits in the one upload, in 4-byte words; lists' pointers are filled by set().
  struct Lists {
    BlockLists lists;
    size_t counts_at = 0, index_at = 0;
  };
  void* ptr_ = nullptr;
  size_t rows_ = 0;
  bool dense_ = false;
  size_t bits_at_ = 0;
  DenseBits bits_;
  Lists forward_, dkdv_, dq_, fa3_;
  struct Order {
    size_t at = 0, len = 0;
    int sections = 1;  // fa2's: sections of (batch, head) pairs (tile_order.hpp)
  };
  // Every kind: the lines each kernel deals longest walk first (fa3's and fa2's Q blocks, fa2 dK/dV's K/V blocks).
  Order fa3_order_, fa2_forward_order_, fa2_dkdv_order_;
  cudaStream_t stream_ = nullptr;
};

// "fa2" | "fa3" | "standard" (S and P allocated and freed on `stream`); throws flashlab::Error otherwise.
// "fa3-pack-gqa" and "fa3-no-pack-gqa" are fa3 with PackGQA asked for or refused (params.hpp PackGqa),
// for tests and benches that compare the two.
void launch_forward(const std::string& kernel, const AttentionParams& p, cudaStream_t stream);
// The kernel a forward name runs ("fa3" for both PackGQA names) and the PackGqa it asks for.
std::pair<std::string, PackGqa> forward_kernel(const std::string& name);
// "fa2" or "fa3": the backward's scratch in bytes, and the backward on the scratch p.scratch points at
// (the harness poisons its own first; launch_backward allocates one); any other name throws.
size_t backward_scratch_bytes(const std::string& kernel, const BackwardParams& p);
void backward_on_scratch(const std::string& kernel, const BackwardParams& p, cudaStream_t stream);
// "fa2" or "fa3". p.scratch is allocated on `stream` and freed before returning (p.scratch is left null).
void launch_backward(const std::string& kernel, BackwardParams& p, cudaStream_t stream);

}  // namespace flashlab::gpu
