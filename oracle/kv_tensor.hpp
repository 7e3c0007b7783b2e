// kv_tensor.hpp — a case's keys or values [S, Hkv, D]: held as doubles (cases built in memory:
// generators, tests, the MLA slice), or as a file stores them (bf16, f16, fp8, int8 or f32 bytes,
// read in place from a memory-mapped case file) and widened a row at a time, times the row's scale
// (its KV head's, or its token's: ScaleGrain). Either way a value is the same exact double
// (case.hpp: stored value x scale fits one).
//
//   KvTensor k(Tensor<double>({S, Hkv, D}));        // held as doubles: k.data, k.at({j, g, i})
//   KvTensor k = KvTensor::stored({S, Hkv, D}, DType::bf16, bytes, keep, {k_scale});
//   double buf[D];  const double* row = k.row(j, g, buf);   // D values of key j, KV head g
//
// A long case's keys and values are most of its memory: held as stored, a 1M-token bf16 case
// costs its file's bytes (mapped, paged in as read) instead of four times them as doubles.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "oracle/dtype.hpp"
#include "oracle/tensor.hpp"

namespace dcp::oracle {

// n stored elements of `dtype` (little-endian bytes at p) times `scale`, into out. Exact: every
// stored value times an fp32 scale fits a double. (kv_tensor.cpp: compiled for AVX-512, AVX2 and
// baseline x86-64, the widest the CPU has chosen at load time; the hot path of a long case.)
void widen_stored(DType dtype, const uint8_t* p, int64_t n, double scale, double* out);

// n values of dtype (exactly representable) as its little-endian bytes at out: the inverse of
// widen_stored with scale 1 (a NaN keeps its sign, as a file writes it).
void narrow_to_stored(DType dtype, const double* x, int64_t n, uint8_t* out);

// The index of the first of n stored elements that is not finite (inf or NaN), or -1: the
// element's bits under its row's non-finite mask equal to the pattern (dtype.hpp).
inline int64_t first_nonfinite(DType dtype, const uint8_t* p, int64_t n) {
  const DTypeInfo* d = dtype_info(dtype);
  if (!d || d->encoding == Encoding::integer) return -1;  // every code is finite
  const NonFinite nf = nonfinite_bits(*d);
  const auto scan = [&](auto word) -> int64_t {
    using W = decltype(word);
    for (int64_t i = 0; i < n; ++i) {
      W b;
      std::memcpy(&b, p + sizeof(W) * static_cast<size_t>(i), sizeof(W));
      if ((b & nf.mask) == nf.pattern) return i;
    }
    return -1;
  };
  switch (d->bytes) {
    case 8:
      return scan(uint64_t{});
    case 4:
      return scan(uint32_t{});
    case 2:
      return scan(uint16_t{});
    default:
      return scan(uint8_t{});
  }
}

// The grain of a dequantization scale vector (a case's k_scale or v_scale, as engines keep them):
// by KV head, n = 1 (one for the tensor) or Hkv; or by token, n = S (one per token) or S * Hkv
// (per token and KV head, row-major). A case file says which by the tensor's rank (case_file.cpp).
enum class ScaleGrain { head, token };

// The entry of key j, KV head g in a scale vector of n entries of that grain, for S keys and Hkv
// heads (n == S * Hkv == S only when Hkv == 1, where both readings agree).
inline size_t scale_index(ScaleGrain grain, size_t n, int64_t j, int64_t g, int64_t S,
                          int64_t Hkv) {
  if (grain == ScaleGrain::head) return n == 1 ? 0 : static_cast<size_t>(g);
  return static_cast<size_t>(n == static_cast<size_t>(S) ? j : j * Hkv + g);
}

struct KvTensor {
  Shape shape;
  std::vector<double> data;  // held as doubles: numel values, row-major; stored: empty

  KvTensor() = default;
  explicit KvTensor(Shape s, double fill = 0.0)
      : shape(std::move(s)), data(numel_of(shape), fill) {}
  KvTensor(Tensor<double> t) : shape(std::move(t.shape)), data(std::move(t.data)) {}  // NOLINT

  // Keys or values as a file stores them: numel elements of `dtype` at `bytes`, kept alive by
  // `keep` (the file's mapping), each row times its entry of `scale` (empty: 1; else of `grain`).
  static KvTensor stored(Shape s, DType dtype, const uint8_t* bytes,
                         std::shared_ptr<const void> keep, std::vector<double> scale,
                         ScaleGrain grain = ScaleGrain::head) {
    KvTensor t;
    t.shape = std::move(s);
    t.dtype_ = dtype;
    t.bytes_ = bytes;
    t.keep_ = std::move(keep);
    t.scale_ = std::move(scale);
    t.grain_ = grain;
    return t;
  }

  // These values held as dtype's bytes, each row divided by its entry of `scale` (as stored();
  // every value must be its stored value times that scale, as a case's are): a long generated
  // case then costs what its file would. Requires a tensor held as doubles.
  KvTensor to_stored(DType dtype, std::vector<double> scale,
                     ScaleGrain grain = ScaleGrain::head) const;

  bool is_stored() const { return bytes_ != nullptr; }
  DType stored_dtype() const { return dtype_; }
  const uint8_t* stored_bytes() const { return bytes_; }
  const std::vector<double>& stored_scale() const { return scale_; }
  ScaleGrain stored_grain() const { return grain_; }
  const std::shared_ptr<const void>& stored_owner() const { return keep_; }
  // The scale each stored row is multiplied by (a case file's k_scale or v_scale, read after K).
  void set_stored_scale(std::vector<double> scale, ScaleGrain grain) {
    scale_ = std::move(scale);
    grain_ = grain;
  }
  // Bytes held for the values: 8 per element as doubles, the format's width as stored.
  int64_t bytes_held() const { return numel() * (is_stored() ? dtype_bytes(dtype_) : 8); }

  int64_t numel() const { return numel_of(shape); }
  int rank() const { return static_cast<int>(shape.size()); }
  bool empty() const { return shape.empty(); }
  int64_t dim(int i) const { return shape[i]; }
  int64_t offset(std::initializer_list<int64_t> idx) const { return offset_of(shape, idx); }

  // Held as doubles only (cases built in memory); a stored tensor is read through row().
  double& at(std::initializer_list<int64_t> idx) { return data[checked(offset(idx))]; }
  double at(std::initializer_list<int64_t> idx) const {
    if (!is_stored()) return data[offset(idx)];
    double x;
    widen_stored(dtype_, bytes_ + offset(idx) * dtype_bytes(dtype_), 1,
                 scale_of(idx.begin()[0], idx.begin()[1]), &x);
    return x;
  }

  // The dim(2) values of key j, KV head g: a pointer into data, or widened into buf (dim(2)
  // doubles) and buf returned.
  const double* row(int64_t j, int64_t g, double* buf) const {
    const int64_t w = shape[2], off = (j * shape[1] + g) * w;
    if (!is_stored()) return data.data() + off;
    widen_stored(dtype_, bytes_ + off * dtype_bytes(dtype_), w, scale_of(j, g), buf);
    return buf;
  }

  // The same values, held as doubles.
  KvTensor widened() const {
    if (!is_stored()) return *this;
    KvTensor t(shape);
    const int64_t w = rank() == 3 ? shape[2] : 1, rows = w == 0 ? 0 : numel() / w;
    for (int64_t r = 0; r < rows; ++r)
      widen_stored(dtype_, bytes_ + r * w * dtype_bytes(dtype_), w,
                   rank() == 3 ? scale_of(r / shape[1], r % shape[1]) : 1.0, t.data.data() + r * w);
    return t;
  }

 private:
  double scale_of(int64_t j, int64_t g) const {
    return scale_.empty() ? 1.0
                          : scale_[scale_index(grain_, scale_.size(), j, g, shape[0], shape[1])];
  }
  int64_t checked(int64_t off) const {
    if (is_stored()) {
      std::fprintf(stderr, "KvTensor::at: a stored tensor is read-only (read it with row())\n");
      std::abort();
    }
    return off;
  }

  DType dtype_ = DType::f64;
  const uint8_t* bytes_ = nullptr;
  std::shared_ptr<const void> keep_;
  std::vector<double> scale_;
  ScaleGrain grain_ = ScaleGrain::head;
};

}  // namespace dcp::oracle
