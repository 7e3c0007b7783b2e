// dtype.hpp — the floating-point storage formats the suite reads and writes, and exact
// conversions between them and double.
//
//   DType::bf16: 8 significand bits, fp32's exponent range; DType::f16: 11 bits, max 65504.
//   DType::f8e4m3: 4 bits, max 448, no infinities (OCP E4M3, PyTorch's float8_e4m3fn);
//   DType::f8e5m2: 3 bits, max 57344, IEEE-style infinities (OCP E5M2, float8_e5m2).
//   DType::i8: the integers -128 .. 127 (an int8 KV cache's codes, meant times their scale).
//   round_to(DType::bf16, x)   rounds a double to the nearest bf16 value (ties to even)
//   representable(DType::f16, x)  is true when x is exactly an fp16 value
#pragma once

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/text.hpp"

namespace dcp::oracle {

enum class DType { f64, f32, f16, bf16, f8e4m3, f8e5m2, i64, i8 };

// Each dtype's facts in one row, in the enum's order: its safetensors name (printed and parsed)
// and its bytes. A new dtype is one row here.
struct DTypeInfo {
  DType value;
  std::string_view name;
  int bytes;
};
inline constexpr DTypeInfo kDTypes[] = {
    {DType::f64, "F64", 8},   {DType::f32, "F32", 4},        {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2}, {DType::f8e4m3, "F8_E4M3", 1}, {DType::f8e5m2, "F8_E5M2", 1},
    {DType::i64, "I64", 8},   {DType::i8, "I8", 1}};

constexpr bool dtype_rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (static_cast<size_t>(kDTypes[i].value) != i) return false;
  return true;
}
static_assert(dtype_rows_in_enum_order(), "kDTypes: one row per DType, in the enum's order");

// The row of t; nullptr for a value outside the enum.
constexpr const DTypeInfo* dtype_info(DType t) {
  const auto i = static_cast<size_t>(t);
  return i < std::size(kDTypes) ? &kDTypes[i] : nullptr;
}

inline std::string_view dtype_name(DType t) {
  const DTypeInfo* d = dtype_info(t);
  return d ? d->name : "?";
}

// Parses the safetensors dtype names the suite accepts.
inline std::optional<DType> parse_dtype(std::string_view s) {
  for (const DTypeInfo& d : kDTypes)
    if (d.name == s) return d.value;
  return std::nullopt;
}

// The names of the dtypes that pass `keep`, "A, B or C", in the table's order (for refusals).
template <class Keep>
std::string dtype_names(Keep keep) {
  std::vector<std::string_view> names;
  for (const DTypeInfo& d : kDTypes)
    if (keep(d.value)) names.push_back(d.name);
  return choices_text(names);
}

// The floating dtypes a case's tensors may hold: every one but the integers.
inline std::string float_dtype_names() {
  return dtype_names([](DType t) { return t != DType::i64 && t != DType::i8; });
}

// The int8 codes' range: a quantizing write rounds x / scale to the nearest integer (ties to even)
// and saturates at the ends, as a GPU's saturating conversion does.
inline constexpr double kI8Min = -128.0, kI8Max = 127.0;

inline int dtype_bytes(DType t) {
  const DTypeInfo* d = dtype_info(t);
  return d ? d->bytes : 0;
}

// Unit roundoff u = 2^-p of a floating dtype with p significand bits (implicit bit included).
inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::f64:
      return std::ldexp(1.0, -53);
    case DType::f32:
      return std::ldexp(1.0, -24);
    case DType::f16:
      return std::ldexp(1.0, -11);
    case DType::bf16:
      return std::ldexp(1.0, -8);
    case DType::f8e4m3:
      return std::ldexp(1.0, -4);
    case DType::f8e5m2:
      return std::ldexp(1.0, -3);
    case DType::i64:
    case DType::i8:
      return 0.0;
  }
  return 0.0;
}

// Smallest positive normal value of a floating dtype: below it a rounding may lose all relative
// accuracy (subnormals, or flush-to-zero), so it sets the absolute error floor of a rounding.
inline double min_normal(DType t) {
  switch (t) {
    case DType::f64:
      return std::ldexp(1.0, -1022);
    case DType::f32:
      return std::ldexp(1.0, -126);
    case DType::f16:
      return std::ldexp(1.0, -14);
    case DType::bf16:
      return std::ldexp(1.0, -126);
    case DType::f8e4m3:
      return std::ldexp(1.0, -6);
    case DType::f8e5m2:
      return std::ldexp(1.0, -14);
    case DType::i64:
    case DType::i8:
      return 0.0;
  }
  return 0.0;
}

// The fp8 formats' parameters: significand bits (implicit bit included), the exponent of the
// smallest normal, the exponent bias and the largest finite value.
inline constexpr int kE4m3Bits = 4, kE4m3Emin = -6, kE4m3Bias = 7;
inline constexpr double kE4m3Max = 448.0;
inline constexpr int kE5m2Bits = 3, kE5m2Emin = -14, kE5m2Bias = 15;
inline constexpr double kE5m2Max = 57344.0;

inline bool is_fp8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }
// A quantized cache's format: fp8 or int8 codes, which a cache keeps beside their scales.
inline bool is_quantized(DType t) { return is_fp8(t) || t == DType::i8; }

// The largest finite value of a floating dtype.
inline double max_finite(DType t) {
  switch (t) {
    case DType::f64:
      return DBL_MAX;
    case DType::f32:
      return FLT_MAX;
    case DType::bf16:
      return 3.3895313892515355e38;  // (2 - 2^-7) 2^127
    case DType::f16:
      return 65504.0;
    case DType::f8e4m3:
      return kE4m3Max;
    case DType::f8e5m2:
      return kE5m2Max;
    case DType::i8:
      return kI8Max;
    case DType::i64:
      return 0.0;
  }
  return 0.0;
}

// --- bit-level conversions -------------------------------------------------------------------

inline double bf16_bits_to_double(uint16_t b) {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(b) << 16));
}

inline double f16_bits_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), -24);  // subnormal: man * 2^-24
  } else if (exp == 31) {
    v = man ? std::nan("") : INFINITY;
  } else {
    v = std::ldexp(static_cast<double>(man + 1024), exp - 25);
  }
  return sign ? -v : v;
}

// An fp8 byte: sign, 4 or 5 exponent bits, 3 or 2 mantissa bits. E4M3 has no infinities and one
// NaN per sign (S.1111.111); E5M2's all-ones exponent is inf or NaN, as in IEEE formats.
inline double fp8_bits_to_double(DType t, uint8_t b) {
  const bool e4m3 = t == DType::f8e4m3;
  const int man_bits = e4m3 ? kE4m3Bits - 1 : kE5m2Bits - 1;
  const int bias = e4m3 ? kE4m3Bias : kE5m2Bias;
  const int exp_all = e4m3 ? 0xf : 0x1f;
  const int sign = (b >> 7) & 1;
  const int exp = (b >> man_bits) & exp_all;
  const int man = b & ((1 << man_bits) - 1);
  double v;
  if (exp == exp_all && (!e4m3 || man == (1 << man_bits) - 1)) {
    v = (!e4m3 && man == 0) ? INFINITY : std::nan("");
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - bias - man_bits);  // subnormal
  } else {
    v = std::ldexp(static_cast<double>(man + (1 << man_bits)), exp - bias - man_bits);
  }
  return sign ? -v : v;
}

// Round to nearest, ties to even, to a format with `bits` significand bits, minimum normal
// exponent `emin` (value 2^emin) and largest finite value `largest`; overflow gives inf.
inline double round_to_format(double x, int bits, int emin, double largest) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1
  const int exp_of_lsb = std::max(e - bits, emin - bits + 1);
  const double scaled = std::ldexp(x, -exp_of_lsb);
  const double r = std::nearbyint(scaled);  // default rounding mode: ties to even
  const double y = std::ldexp(r, exp_of_lsb);
  if (std::fabs(y) > largest) return std::copysign(INFINITY, x);
  return y;
}

inline double round_to(DType t, double x) {
  switch (t) {
    case DType::f64:
      return x;
    case DType::f32:
      return static_cast<double>(static_cast<float>(x));
    case DType::f16:
      return round_to_format(x, 11, -14, max_finite(DType::f16));
    case DType::bf16:
      return round_to_format(x, 8, -126, max_finite(DType::bf16));
    case DType::f8e4m3:
      return round_to_format(x, kE4m3Bits, kE4m3Emin, kE4m3Max);
    case DType::f8e5m2:
      return round_to_format(x, kE5m2Bits, kE5m2Emin, kE5m2Max);
    case DType::i64:
      return std::nearbyint(x);
    case DType::i8:
      return std::isnan(x) ? 0.0 : std::clamp(std::nearbyint(x), kI8Min, kI8Max);
  }
  return x;
}

// Whether x is exactly a value of t (non-finite x counts as representable). The 32- and 16-bit
// formats are tested on the bits of x as a float (a hot path: every input element of a case is
// checked), each equal to round_to(t, x) == x (tests/unit/test_dtype_eigen.cpp checks they agree).
inline bool representable(DType t, double x) {
  if (!std::isfinite(x)) return true;
  if (t == DType::f32 || t == DType::bf16 || t == DType::f16) {
    const auto f = static_cast<float>(x);
    if (static_cast<double>(f) != x) return false;  // not a float (or beyond the float range)
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    if (t == DType::f32) return true;
    if (t == DType::bf16) return (bits & 0xffffu) == 0;  // bf16: a float's top 16 bits
    // f16: 10 stored bits down to 2^-14, then multiples of 2^-24 (the subnormals), at most 65504.
    if ((bits & 0x7fffffffu) == 0) return true;
    const int e = static_cast<int>((bits >> 23) & 0xffu) - 127;  // float subnormals: e = -127
    if (e > 15 || e < -24) return false;
    const int dropped = e >= -14 ? 13 : 13 + (-14 - e);  // float mantissa bits f16 lacks
    return (bits & ((1u << dropped) - 1u)) == 0;
  }
  return round_to(t, x) == x;
}

inline uint16_t double_to_bf16_bits(double x) {
  const float f = static_cast<float>(round_to(DType::bf16, x));
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
}

inline uint16_t double_to_f16_bits(double x) {
  const double r = round_to(DType::f16, x);
  const uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  const double a = std::fabs(r);
  if (std::isnan(r)) return 0x7e00;
  if (std::isinf(a)) return sign | 0x7c00;
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);  // a = f * 2^e
  if (e - 1 < -14) {  // subnormal
    return sign | static_cast<uint16_t>(std::ldexp(a, 24));
  }
  const int man = static_cast<int>(std::ldexp(a, 11 - e)) - 1024;
  return sign | static_cast<uint16_t>(((e - 1 + 15) << 10) | man);
}

// The fp8 byte of round_to(t, x): a value past the largest finite one is E5M2's inf, or E4M3's
// NaN (it has no inf); NaN is the all-ones pattern of the sign.
inline uint8_t double_to_fp8_bits(DType t, double x) {
  const bool e4m3 = t == DType::f8e4m3;
  const int man_bits = e4m3 ? kE4m3Bits - 1 : kE5m2Bits - 1;
  const int bias = e4m3 ? kE4m3Bias : kE5m2Bias;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double r = round_to(t, x);
  const double a = std::fabs(r);
  if (std::isnan(r) || (e4m3 && std::isinf(a))) return sign | 0x7f;
  if (std::isinf(a)) return sign | 0x7c;
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);  // a = f * 2^e
  const int emin = 1 - bias;
  if (e - 1 < emin) {  // subnormal: a = man * 2^(emin - man_bits)
    return sign | static_cast<uint8_t>(std::ldexp(a, man_bits - emin));
  }
  const int man = static_cast<int>(std::ldexp(a, man_bits + 1 - e)) - (1 << man_bits);
  return sign | static_cast<uint8_t>(((e - 1 + bias) << man_bits) | man);
}

}  // namespace dcp::oracle
