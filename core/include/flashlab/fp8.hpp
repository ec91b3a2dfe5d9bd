// FP8 e4m3 (OCP "E4M3FN", CUDA's __nv_fp8_e4m3): 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits,
// no infinities, 0x7F / 0xFF NaN, largest finite 448, smallest subnormal 2^-9. What the FP8 forward
// (gpu/fa3/fa3_fp8.cu) reads Q, K and V in and feeds P to its second GEMM in.
//
// Per-tensor quantization, as FlashAttention-3's FP8 path takes its inputs: a tensor x is stored as
// e4m3(x / descale) with descale = max|x| / 448, so that its largest value lands on e4m3's largest, and
// the kernel multiplies by descale to read it back (dequantize). Rounding is to nearest, ties to even,
// saturating at +-448, as the GPU's cvt.rn.satfinite.e4m3x2.f32 does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace flashlab::fp8 {

constexpr float kE4m3Max = 448.0f;

uint8_t e4m3_bits(float x);    // round to nearest even, saturate to +-448; NaN -> 0x7F
float e4m3_value(uint8_t bits);
inline float round_to_e4m3(float x) { return e4m3_value(e4m3_bits(x)); }

// One tensor quantized: its e4m3 bytes and the factor that reads them back.
struct Quantized {
  std::vector<uint8_t> bits;
  float descale = 1.0f;
  float value(size_t i) const { return e4m3_value(bits[i]) * descale; }  // what the kernel computes on
};
// descale = max|x| / 448 (1 for an all-zero tensor).
Quantized quantize(const std::vector<float>& x);

}  // namespace flashlab::fp8
