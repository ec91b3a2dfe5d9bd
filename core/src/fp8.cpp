#include "flashlab/fp8.hpp"

#include <algorithm>
#include <cmath>

namespace flashlab::fp8 {

uint8_t e4m3_bits(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::min(std::abs(x), kE4m3Max);  // saturate (also +-inf)
  // The spacing of e4m3 values around a: 2^(e - 3) for a normal with exponent e >= -6, else the
  // subnormals' 2^-9. Round a to a multiple of it, ties to even (nearbyint in the default mode).
  int e = 0;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1): a's exponent is e - 1
  const int exponent = std::max(e - 1, -6);
  const float quantum = std::ldexp(1.0f, exponent - 3);
  const float r = std::nearbyint(a / quantum) * quantum;  // may carry into the next binade: still exact
  if (r == 0.0f) return sign;
  int re = 0;
  const float f = std::frexp(r, &re);  // r = f 2^re
  const int unbiased = re - 1;
  if (unbiased < -6) return uint8_t(sign | int(std::ldexp(r, 9)));  // subnormal: r = m 2^-9, m < 8
  const int mantissa = int(std::ldexp(f, 4)) - 8;                    // f 2^4 in [8, 16)
  return uint8_t(sign | ((unbiased + 7) << 3) | mantissa);
}

float e4m3_value(uint8_t bits) {
  const float sign = bits & 0x80 ? -1.0f : 1.0f;
  const int exponent = (bits >> 3) & 0xF, mantissa = bits & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -9);
  return sign * std::ldexp(float(8 + mantissa), exponent - 7 - 3);
}

Quantized quantize(const std::vector<float>& x) {
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::abs(v));
  Quantized q;
  q.descale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
  q.bits.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) q.bits[i] = e4m3_bits(x[i] / q.descale);
  return q;
}

}  // namespace flashlab::fp8
