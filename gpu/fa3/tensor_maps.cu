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

// A 3-d map of `elem_bytes` elements with 128-byte swizzled boxes of 128 bytes by box_rows by box_planes.
CUtensorMap encode_3d(const void* base, const cuuint64_t (&dims)[3], const cuuint64_t (&strides)[2],
                      cuuint32_t box_rows, int elem_bytes, const std::string& what, cuuint32_t box_planes = 1) {
  CUtensorMap map{};
  const cuuint32_t box[3] = {cuuint32_t(128 / elem_bytes), box_rows, box_planes};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUtensorMapDataType type = elem_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult r = encode_tiled()(&map, type, 3, const_cast<void*>(base), dims, strides, box, unit,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("fa3: cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) + ") for " + what +
                " (strides must be multiples of 16 bytes, the base 16-byte aligned)");
  return map;
}

}  // namespace

CUtensorMap rows_heads_map(const void* base, int64_t rows, int heads, int head_dim, int64_t row_stride,
                           int64_t head_stride, int box_rows, int elem_bytes, int box_heads) {
  const cuuint64_t dims[3] = {cuuint64_t(head_dim), cuuint64_t(rows), cuuint64_t(heads)};
  const cuuint64_t strides[2] = {cuuint64_t(row_stride) * elem_bytes, cuuint64_t(head_stride) * elem_bytes};  // bytes
  return encode_3d(base, dims, strides, cuuint32_t(box_rows), elem_bytes,
                   "a tensor of " + std::to_string(rows) + " rows x " + std::to_string(heads) + " heads x " +
                       std::to_string(head_dim),
                   cuuint32_t(box_heads));
}

CUtensorMap vt_map(const void* base, int64_t keys, int head_dim, int64_t slabs, int box_rows) {
  const cuuint64_t dims[3] = {cuuint64_t(keys), cuuint64_t(head_dim), cuuint64_t(slabs)};
  const cuuint64_t strides[2] = {cuuint64_t(keys), cuuint64_t(keys) * head_dim};
  return encode_3d(base, dims, strides, cuuint32_t(box_rows), 1,
                   "V^T of " + std::to_string(slabs) + " planes x " + std::to_string(head_dim) + " rows x " +
                       std::to_string(keys) + " keys");
}

}  // namespace flashlab::gpu::fa3
