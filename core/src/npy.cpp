#include "flashlab/npy.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "flashlab/dtype.hpp"
#include "flashlab/error.hpp"

namespace flashlab {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw Error("malformed .npy file '" + path + "': " + why);
}

struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
Header parse_header(const std::string& path, const std::string& text) {
  Header h;
  std::smatch m;
  static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex fortran_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(text, m, descr_re)) bad(path, "header has no 'descr'");
  h.descr = m[1];
  if (!std::regex_search(text, m, fortran_re)) bad(path, "header has no 'fortran_order'");
  h.fortran = m[1] == "True";
  if (!std::regex_search(text, m, shape_re)) bad(path, "header has no 'shape'");
  std::stringstream dims(m[1].str());
  std::string item;
  while (std::getline(dims, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \tL") + 1);
    if (item.empty()) continue;
    if (item.find_first_not_of("0123456789") != std::string::npos || item.size() > 15)
      bad(path, "shape entry '" + item + "' is not a non-negative integer");
    h.shape.push_back(std::stoll(item));
  }
  return h;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

namespace {

// A file's header and data bytes, checked against the header's shape; `widths` maps each accepted
// dtype to its bytes per element, `expected` names them for the error message.
struct RawNpy {
  Header h;
  int width = 0;
  std::vector<char> raw;
};

RawNpy read_raw(const std::string& path, const std::vector<std::pair<std::string, int>>& widths,
                const std::string& expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  char magic[kMagicLen + 2] = {};
  if (!in.read(magic, kMagicLen + 2) || std::memcmp(magic, kMagic, kMagicLen) != 0)
    bad(path, "it does not start with the \\x93NUMPY magic string");
  const int major = static_cast<unsigned char>(magic[6]);
  size_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) bad(path, "truncated header length");
    header_len = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) bad(path, "truncated header length");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<size_t>(b[3]) << 24);
    if (header_len > (1u << 20)) bad(path, "header length " + std::to_string(header_len) + " is implausible");
  } else {
    bad(path, "unsupported format version " + std::to_string(major));
  }
  std::string text(header_len, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_len))) bad(path, "truncated header");
  RawNpy r;
  r.h = parse_header(path, text);
  if (r.h.fortran) bad(path, "Fortran order is not supported; save with np.ascontiguousarray");
  for (const auto& [descr, width] : widths)
    if (r.h.descr == descr) r.width = width;
  if (r.width == 0) bad(path, "dtype '" + r.h.descr + "' is not supported; expected " + expected);

  double elems = 1;
  for (int64_t d : r.h.shape) elems *= static_cast<double>(d);
  if (elems > 0x1p40) bad(path, "shape " + shape_string(r.h.shape) + " is too large");
  const int64_t count = BasicTensor<float>::count(r.h.shape);

  const auto data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const int64_t have = static_cast<int64_t>(in.tellg() - data_start);
  const int64_t need = count * r.width;
  if (have != need)
    bad(path, "shape " + shape_string(r.h.shape) + " of " + r.h.descr + " needs " + std::to_string(need) +
                  " data bytes, the file has " + std::to_string(have));
  in.seekg(data_start);
  r.raw.resize(static_cast<size_t>(need));
  if (need > 0 && !in.read(r.raw.data(), need)) bad(path, "could not read the data");
  return r;
}

}  // namespace

Tensor read_npy(const std::string& path) {
  const RawNpy r = read_raw(path, {{"<f4", 4}, {"<f2", 2}, {"<f8", 8}}, "'<f4', '<f2' or '<f8'");
  const int width = r.width;
  const int64_t count = BasicTensor<float>::count(r.h.shape);
  Tensor t;
  t.shape = r.h.shape;
  t.data.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const char* p = r.raw.data() + i * width;
    if (width == 4) {
      std::memcpy(&t.data[i], p, 4);
    } else if (width == 2) {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      t.data[i] = fp16_bits_to_float(bits);
    } else {
      double d;
      std::memcpy(&d, p, 8);
      t.data[i] = static_cast<float>(d);
    }
  }
  return t;
}

BoolArray read_npy_bool(const std::string& path) {
  const RawNpy r = read_raw(path, {{"|b1", 1}, {"|u1", 1}},
                            "'|b1' (numpy bool) or '|u1' (uint8) for a boolean mask; save it with m.astype(bool)");
  BoolArray a;
  a.shape = r.h.shape;
  a.data.resize(r.raw.size());
  for (size_t i = 0; i < r.raw.size(); ++i) a.data[i] = r.raw[i] != 0 ? 1 : 0;
  return a;
}

namespace {

// The header dictionary of a C-order array, padded so that the data starts at a multiple of 64.
std::string header_dict(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += std::to_string(shape[i]) + ", ";
  if (shape.size() > 1) dict.erase(dict.size() - 1);  // (2, 3) but (5,)
  dict += "), }";
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  const size_t unpadded = kMagicLen + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  return dict;
}

// Writes magic, version, header and data to "<path>.tmp" and renames it into place.
void write_file(const std::string& path, const std::string& dict, const char* data, size_t bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
    out.write(kMagic, kMagicLen);
    const char version[2] = {1, 0};
    out.write(version, 2);
    const unsigned char len[2] = {static_cast<unsigned char>(dict.size() & 0xff),
                                  static_cast<unsigned char>(dict.size() >> 8)};
    out.write(reinterpret_cast<const char*>(len), 2);
    out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
    out.write(data, static_cast<std::streamsize>(bytes));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw Error("writing '" + path + "' failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error("cannot move '" + tmp + "' to '" + path + "': " + ec.message());
  }
}

}  // namespace

void write_npy_bool(const std::string& path, const BoolArray& a) {
  write_file(path, header_dict("|b1", a.shape), reinterpret_cast<const char*>(a.data.data()), a.data.size());
}

void write_npy(const std::string& path, const Tensor& tensor, NpyType type) {
  const std::string dict = header_dict(type == NpyType::f32 ? "<f4" : "<f2", tensor.shape);
  if (type == NpyType::f32) {
    write_file(path, dict, reinterpret_cast<const char*>(tensor.ptr()), static_cast<size_t>(tensor.numel()) * 4);
  } else {
    std::vector<uint16_t> half(tensor.data.size());
    for (size_t i = 0; i < half.size(); ++i) half[i] = float_to_fp16_bits(tensor.data[i]);
    write_file(path, dict, reinterpret_cast<const char*>(half.data()), half.size() * 2);
  }
}

}  // namespace flashlab
