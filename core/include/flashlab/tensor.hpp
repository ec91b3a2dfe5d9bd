// Tensor: a dense, row-major array with a shape. flashlab keeps storage this
// plain on purpose: every kernel indexes it with the offsets Problem computes.
#pragma once
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace flashlab {

template <class T>
struct BasicTensor {
  std::vector<int64_t> shape;
  std::vector<T> data;

  BasicTensor() = default;
  explicit BasicTensor(std::vector<int64_t> shape_, T fill = T(0))
      : shape(std::move(shape_)), data(static_cast<size_t>(count(shape)), fill) {}

  static int64_t count(const std::vector<int64_t>& shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  bool empty() const { return data.empty(); }
  T* ptr() { return data.data(); }
  const T* ptr() const { return data.data(); }
  T& operator[](int64_t i) { return data[static_cast<size_t>(i)]; }
  const T& operator[](int64_t i) const { return data[static_cast<size_t>(i)]; }
};

using Tensor = BasicTensor<float>;    // storage tensors (fp16/bf16 values held rounded, as floats)
using TensorD = BasicTensor<double>;  // the fp64 oracle's outputs

std::string shape_string(const std::vector<int64_t>& shape);  // "(2, 128, 8, 64)"

}  // namespace flashlab
