#include "flashlab/dtype.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "flashlab/enum_names.hpp"
#include "flashlab/error.hpp"

namespace flashlab {

static const EnumNames<DType, 3> kDTypeNames{{DType::fp32, "fp32"}, {DType::fp16, "fp16"}, {DType::bf16, "bf16"}};

std::string_view to_string(DType dtype) { return enum_name(kDTypeNames, dtype); }
DType parse_dtype(std::string_view name) { return enum_parse(kDTypeNames, name, "dtype"); }

// bf16 keeps the top 16 bits of an IEEE fp32. Rounding to nearest even adds
// 0x7fff plus the lowest kept bit before truncating; NaN stays a (quiet) NaN.
uint16_t float_to_bf16_bits(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x0040);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

// fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Values below 2^-14
// are subnormal (steps of 2^-24); values at or above 65520 round to infinity.
uint16_t float_to_fp16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const float a = std::fabs(x);
  if (std::isnan(x)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u;  // overflow -> inf
  if (a < 0x1p-14f) {
    // Subnormal: the value is an integer number of 2^-24 steps; nearbyint rounds ties to even.
    const float steps = std::nearbyint(a * 0x1p24f);
    return sign | static_cast<uint16_t>(steps);  // 1024 steps carries into the smallest normal
  }
  const uint32_t exp32 = (std::bit_cast<uint32_t>(a) >> 23) & 0xffu;
  const uint32_t mant32 = std::bit_cast<uint32_t>(a) & 0x7fffffu;
  uint32_t half = ((exp32 - 127 + 15) << 10) | (mant32 >> 13);
  const uint32_t rest = mant32 & 0x1fffu;  // the 13 bits dropped
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half += 1;  // may carry into the exponent: correct
  return sign | static_cast<uint16_t>(half);
}

float fp16_bits_to_float(uint16_t bits) {
  const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
  const int exp = (bits >> 10) & 0x1f;
  const int mant = bits & 0x3ff;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31) return mant ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
}

float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::fp32: return x;
    case DType::fp16: return fp16_bits_to_float(float_to_fp16_bits(x));
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(x));
  }
  return x;
}

}  // namespace flashlab
