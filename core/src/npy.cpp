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

Tensor read_npy(const std::string& path) {
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
  const Header h = parse_header(path, text);
  if (h.fortran) bad(path, "Fortran order is not supported; save with np.ascontiguousarray");

  int width = 0;
  if (h.descr == "<f4") width = 4;
  else if (h.descr == "<f2") width = 2;
  else if (h.descr == "<f8") width = 8;
  else bad(path, "dtype '" + h.descr + "' is not supported; expected '<f4', '<f2' or '<f8'");

  double elems = 1;
  for (int64_t d : h.shape) elems *= static_cast<double>(d);
  if (elems > 0x1p40) bad(path, "shape " + shape_string(h.shape) + " is too large");
  const int64_t count = BasicTensor<float>::count(h.shape);

  const auto data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const int64_t have = static_cast<int64_t>(in.tellg() - data_start);
  const int64_t need = count * width;
  if (have != need)
    bad(path, "shape " + shape_string(h.shape) + " of " + h.descr + " needs " + std::to_string(need) +
                  " data bytes, the file has " + std::to_string(have));
  in.seekg(data_start);

  Tensor t;
  t.shape = h.shape;
  t.data.resize(static_cast<size_t>(count));
  std::vector<char> raw(static_cast<size_t>(need));
  if (need > 0 && !in.read(raw.data(), need)) bad(path, "could not read the data");
  for (int64_t i = 0; i < count; ++i) {
    const char* p = raw.data() + i * width;
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

void write_npy(const std::string& path, const Tensor& tensor, NpyType type) {
  std::string dict = std::string("{'descr': '") + (type == NpyType::f32 ? "<f4" : "<f2") +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.shape.size(); ++i) dict += std::to_string(tensor.shape[i]) + ", ";
  if (tensor.shape.size() > 1) dict.erase(dict.size() - 1);  // (2, 3) but (5,)
  dict += "), }";
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  const size_t unpadded = kMagicLen + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';

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
    if (type == NpyType::f32) {
      out.write(reinterpret_cast<const char*>(tensor.ptr()), static_cast<std::streamsize>(tensor.numel() * 4));
    } else {
      std::vector<uint16_t> half(tensor.data.size());
      for (size_t i = 0; i < half.size(); ++i) half[i] = float_to_fp16_bits(tensor.data[i]);
      out.write(reinterpret_cast<const char*>(half.data()), static_cast<std::streamsize>(half.size() * 2));
    }
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

}  // namespace flashlab
