// dtype.hpp — the floating-point storage formats the suite reads and writes, and exact
// conversions between them and double.
//
//   DType::bf16: 8 significand bits, fp32's exponent range; DType::f16: 11 bits, max 65504.
//   round_to(DType::bf16, x)   rounds a double to the nearest bf16 value (ties to even)
//   representable(DType::f16, x)  is true when x is exactly an fp16 value
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dcp::oracle {

enum class DType { f64, f32, f16, bf16, i64 };

inline std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f64:
      return "F64";
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i64:
      return "I64";
  }
  return "?";
}

// Parses the safetensors dtype names the suite accepts.
inline std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "F64") return DType::f64;
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  if (s == "I64") return DType::i64;
  return std::nullopt;
}

inline int dtype_bytes(DType t) {
  switch (t) {
    case DType::f64:
      return 8;
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i64:
      return 8;
  }
  return 0;
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
    case DType::i64:
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

// Round to nearest, ties to even, to a format with `bits` significand bits, minimum normal
// exponent `emin` (value 2^emin) and largest finite value `max_finite`; overflow gives inf.
inline double round_to_format(double x, int bits, int emin, double max_finite) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1
  const int exp_of_lsb = std::max(e - bits, emin - bits + 1);
  const double scaled = std::ldexp(x, -exp_of_lsb);
  const double r = std::nearbyint(scaled);  // default rounding mode: ties to even
  const double y = std::ldexp(r, exp_of_lsb);
  if (std::fabs(y) > max_finite) return std::copysign(INFINITY, x);
  return y;
}

inline double round_to(DType t, double x) {
  switch (t) {
    case DType::f64:
      return x;
    case DType::f32:
      return static_cast<double>(static_cast<float>(x));
    case DType::f16:
      return round_to_format(x, 11, -14, 65504.0);
    case DType::bf16:
      return round_to_format(x, 8, -126, 3.3895313892515355e38);
    case DType::i64:
      return std::nearbyint(x);
  }
  return x;
}

inline bool representable(DType t, double x) { return !std::isfinite(x) || round_to(t, x) == x; }

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

}  // namespace dcp::oracle
