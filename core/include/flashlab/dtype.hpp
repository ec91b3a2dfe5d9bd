// Storage precisions and how values are rounded into them.
//
// flashlab computes on the CPU in fp32 or fp64; an fp16/bf16 tensor is held
// as floats that have been rounded to the nearest representable fp16/bf16
// value (round to nearest, ties to even), which is exactly what a GPU kernel
// reading that storage would see.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace flashlab {

enum class DType { fp32, fp16, bf16 };

std::string_view to_string(DType dtype);
DType parse_dtype(std::string_view name);  // "fp32" | "fp16" | "bf16"; throws Error otherwise

// Bytes one element occupies in GPU memory (fp16/bf16: 2, fp32: 4).
constexpr int64_t bytes_per_element(DType dtype) { return dtype == DType::fp32 ? 4 : 2; }

// Unit roundoff u = 2^-(mantissa bits + 1): the largest relative error of one rounding.
constexpr double unit_roundoff(DType dtype) {
  return dtype == DType::fp32 ? 0x1p-24 : dtype == DType::fp16 ? 0x1p-11 : 0x1p-8;
}

uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(uint16_t bits);
uint16_t float_to_fp16_bits(float x);
float fp16_bits_to_float(uint16_t bits);

// Rounds x to the nearest value representable in `dtype` (identity for fp32).
float round_to(DType dtype, float x);

}  // namespace flashlab
