// tensor.hpp — a dense row-major host tensor of plain values with its logical shape.
//
//   Tensor<double> q({T, Hq, Dk});   q.at({t, h, d}) = 1.0;   q.numel() == T * Hq * Dk
//
// The oracle stores every floating-point input as double: fp32, fp16 and bf16 values are all
// exactly representable, and the dtype they arrived in is kept beside them (see dtype.hpp).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace dcp::oracle {

using Shape = std::vector<int64_t>;

inline int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

inline std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The row-major offset of index idx into a tensor of `shape`.
inline int64_t offset_of(const Shape& shape, std::initializer_list<int64_t> idx) {
  int64_t off = 0;
  int i = 0;
  for (int64_t x : idx) off = off * shape[i++] + x;
  return off;
}

template <class T>
struct Tensor {
  Shape shape;
  std::vector<T> data;

  Tensor() = default;
  explicit Tensor(Shape s, T fill = T{}) : shape(std::move(s)), data(numel_of(shape), fill) {}

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int rank() const { return static_cast<int>(shape.size()); }
  bool empty() const { return shape.empty(); }
  int64_t dim(int i) const { return shape[i]; }

  int64_t offset(std::initializer_list<int64_t> idx) const { return offset_of(shape, idx); }
  T& at(std::initializer_list<int64_t> idx) { return data[offset(idx)]; }
  const T& at(std::initializer_list<int64_t> idx) const { return data[offset(idx)]; }
};

}  // namespace dcp::oracle
