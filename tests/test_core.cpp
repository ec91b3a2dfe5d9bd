// dtype rounding and .npy I/O.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "flashlab/dtype.hpp"
#include "flashlab/error.hpp"
#include "flashlab/fp8.hpp"
#include "flashlab/npy.hpp"

using namespace flashlab;

TEST_CASE("bf16 and fp16 round to nearest, ties to even") {
  CHECK(round_to(DType::bf16, 1.0f + 0x1p-8f) == 1.0f);             // tie -> even (1.0)
  CHECK(round_to(DType::bf16, 1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);  // tie -> even (up)
  CHECK(round_to(DType::bf16, 1.0f + 0x1p-7f) == 1.0f + 0x1p-7f);   // representable
  CHECK(round_to(DType::fp16, 1.0f + 0x1p-11f) == 1.0f);
  CHECK(round_to(DType::fp16, 1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
  CHECK(std::isinf(round_to(DType::fp16, 70000.0f)));
  CHECK(round_to(DType::fp16, 65504.0f) == 65504.0f);
  CHECK(round_to(DType::fp16, 0x1p-24f) == 0x1p-24f);              // smallest subnormal
  CHECK(round_to(DType::fp16, 0x1p-26f) == 0.0f);
  CHECK(round_to(DType::fp16, -2.5f) == -2.5f);
  CHECK(std::isnan(round_to(DType::bf16, NAN)));
  CHECK_THROWS_AS(parse_dtype("fp8"), Error);
}

namespace {
std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("flashlab_test_" + name)).string();
}
void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string npy_bytes(const std::string& dict, size_t data_bytes) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string s = "\x93NUMPY";
  s += '\x01';
  s += '\x00';
  s += static_cast<char>(h.size() & 0xff);
  s += static_cast<char>(h.size() >> 8);
  return s + h + std::string(data_bytes, '\0');
}
}  // namespace

TEST_CASE("fp8 e4m3: every code reads back to itself, rounding is to nearest even and saturates") {
  // Every finite code round-trips (the two zeros included), and its value is what the format says.
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;  // NaN
    const float v = fp8::e4m3_value(uint8_t(b));
    CHECK(fp8::e4m3_bits(v) == uint8_t(b));
  }
  CHECK(fp8::e4m3_value(0x7E) == 448.0f);           // the largest finite
  CHECK(fp8::e4m3_value(0x01) == 0x1p-9f);          // the smallest subnormal
  CHECK(fp8::e4m3_value(0x08) == 0x1p-6f);          // the smallest normal
  CHECK(fp8::e4m3_value(0x38) == 1.0f);
  CHECK(std::isnan(fp8::e4m3_value(0x7F)));
  CHECK(fp8::round_to_e4m3(1.0f + 0x1p-4f) == 1.0f);                // tie between 1 and 1.125 -> even (1)
  CHECK(fp8::round_to_e4m3(1.125f + 0x1p-4f) == 1.25f);             // tie -> even (1.25)
  CHECK(fp8::round_to_e4m3(1.0f + 0x1p-4f + 0x1p-10f) == 1.125f);   // past the tie
  CHECK(fp8::round_to_e4m3(0x1p-10f) == 0.0f);                      // half the smallest subnormal: to even (0)
  CHECK(fp8::round_to_e4m3(3 * 0x1p-10f) == 0x1p-8f);               // 1.5 subnormal quanta -> 2
  CHECK(fp8::round_to_e4m3(-0.3f) == -0.3125f);
  CHECK(fp8::round_to_e4m3(1000.0f) == 448.0f);                     // saturates
  CHECK(fp8::round_to_e4m3(-INFINITY) == -448.0f);
  // Quantization puts the largest magnitude on 448 and reads back within e4m3's relative spacing.
  const std::vector<float> x = {0.5f, -2.0f, 0.01f, 1.5f, 0.0f};
  const fp8::Quantized q = fp8::quantize(x);
  CHECK(q.descale == doctest::Approx(2.0f / 448.0f));
  CHECK(q.value(1) == -2.0f);
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::abs(q.value(i) - x[i]) <= std::abs(x[i]) / 16 + q.descale * 0x1p-10f);
  CHECK(fp8::quantize({0.0f, 0.0f}).descale == 1.0f);
}

TEST_CASE(".npy round trip in f32 and f16") {
  Tensor t({2, 3, 4});
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = 0.25f * static_cast<float>(i) - 1.0f;
  for (NpyType type : {NpyType::f32, NpyType::f16}) {
    const std::string path = tmp_path("roundtrip.npy");
    write_npy(path, t, type);
    const Tensor back = read_npy(path);
    CHECK(back.shape == t.shape);
    CHECK(back.data == t.data);
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
    std::filesystem::remove(path);
  }
}

TEST_CASE("malformed .npy files are rejected with the reason") {
  const std::string path = tmp_path("bad.npy");
  auto reason = [&](const std::string& bytes) -> std::string {
    write_raw(path, bytes);
    try {
      read_npy(path);
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  };
  CHECK(reason("hello").find("magic") != std::string::npos);
  CHECK(reason(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8)).find("'<i4'") !=
        std::string::npos);
  CHECK(reason(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8)).find("Fortran") !=
        std::string::npos);
  CHECK(reason(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8)).find("needs 12") !=
        std::string::npos);
  CHECK(reason(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", 8)).find("shape") !=
        std::string::npos);
  CHECK(reason(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8)).empty());
  std::filesystem::remove(path);
  CHECK_THROWS_AS(read_npy(tmp_path("does_not_exist.npy")), Error);
}

TEST_CASE("a failed .npy write leaves nothing behind") {
  Tensor t({4});
  CHECK_THROWS_AS(write_npy("/nonexistent-dir/x.npy", t), Error);
  CHECK_FALSE(std::filesystem::exists("/nonexistent-dir/x.npy"));
}
