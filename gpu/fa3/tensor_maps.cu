#include "tensor_maps.hpp"

#include <cuda_runtime.h>

#include <string>

#include "cuda_check.hpp"
#include "flashlab/error.hpp"

namespace flashlab::gpu::fa3 {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    FLASHLAB_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !f)
      throw Error("fa3: the driver has no cuTensorMapEncodeTiled (it needs a CUDA 12 driver or newer)");
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

}  // namespace

CUtensorMap rows_heads_map(const void* base, int64_t rows, int heads, int head_dim, int64_t row_stride,
                           int64_t head_stride, int box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {cuuint64_t(head_dim), cuuint64_t(rows), cuuint64_t(heads)};
  const cuuint64_t strides[2] = {cuuint64_t(row_stride) * 2, cuuint64_t(head_stride) * 2};  // bytes, dims 1 and 2
  const cuuint32_t box[3] = {64, cuuint32_t(box_rows), 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides,
                                    box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("fa3: cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) + ") for a tensor of " +
                std::to_string(rows) + " rows x " + std::to_string(heads) + " heads x " + std::to_string(head_dim) +
                " (strides must be multiples of 16 bytes, the base 16-byte aligned)");
  return map;
}

}  // namespace flashlab::gpu::fa3
