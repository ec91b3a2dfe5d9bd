// .npy files (NumPy format 1.0/2.0/3.0), read strictly and written atomically.
//
// Reading accepts little-endian float32 ('<f4'), float16 ('<f2') and float64
// ('<f8', narrowed to float), or for a boolean mask numpy bool ('|b1') and
// uint8 ('|u1', nonzero = true), C order only, and checks the magic string, the
// header dictionary, the shape and that the file holds exactly the bytes the
// shape needs. Anything else throws flashlab::Error naming the file and the
// problem. Writing goes to "<path>.tmp" and renames it into place, so a failed
// write never leaves a half-written file under the final name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "flashlab/tensor.hpp"

namespace flashlab {

enum class NpyType { f32, f16 };

Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& tensor, NpyType type = NpyType::f32);

// A boolean array (a user's dense attention mask): one byte per element, 0 or 1, C order.
struct BoolArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
BoolArray read_npy_bool(const std::string& path);
void write_npy_bool(const std::string& path, const BoolArray& array);

}  // namespace flashlab
