// dtype rounding and .npy I/O.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "flashlab/dtype.hpp"
#include "flashlab/error.hpp"
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
