// dtype.hpp — the floating-point storage formats the suite reads and writes, and exact
// conversions between them and double.
//
//   DType::bf16: 8 significand bits, fp32's exponent range; DType::f16: 11 bits, max 65504.
//   DType::f8e4m3: 4 bits, max 448, no infinities (OCP E4M3, PyTorch's float8_e4m3fn);
//   DType::f8e5m2: 3 bits, max 57344, IEEE-style infinities (OCP E5M2, float8_e5m2).
//   DType::f8e4m3fnuz: 4 bits, max 240, no infinities, no -0: 0x80 is the one NaN (AMD MI300's
//   fp8, PyTorch's float8_e4m3fnuz; "F8_E4M3FNUZ" is this suite's name, safetensors has none).
//   DType::i8: the integers -128 .. 127 (an int8 KV cache's codes, meant times their scale).
//   Each one's facts are a row of kDTypes; what follows derives from the rows.
//   round_to(DType::bf16, x)   rounds a double to the nearest bf16 value (ties to even)
//   representable(DType::f16, x)  is true when x is exactly an fp16 value
#pragma once

#include <algorithm>
#include <array>
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

enum class DType { f64, f32, f16, bf16, f8e4m3, f8e5m2, i64, i8, f8e4m3fnuz };

// What a dtype may hold in a case: values (inputs, results, claimed formats), a quantized KV
// cache's elements (K and V only, beside their scales), or indices.
enum class Role { value, cache, index };
// How its bits mean a number: IEEE-style (the all-ones exponent is inf and NaN); finite, with one
// NaN per sign (S.1111.111, no inf: OCP E4M3); finite with an unsigned zero (no inf, no -0: the
// sign bit alone, 0x80, is the one NaN; "fnuz"); or two's complement integers.
enum class Encoding { ieee, finite, fnuz, integer };

// Each dtype's facts in one row, in the enum's order: its safetensors name (printed and parsed),
// its bytes, its role, its name as a result file's metadata names a format, and for a floating
// dtype its encoding, stored significand bits and exponent bias (whence its unit roundoff, smallest
// normal and largest finite value). A new dtype is one row here.
struct DTypeInfo {
  DType value;
  std::string_view name;
  int bytes;
  Role role;
  std::string_view format_text;
  Encoding encoding;
  int man_bits = 0, exp_bits = 0, bias = 0;
};
inline constexpr DTypeInfo kDTypes[] = {
    {DType::f64, "F64", 8, Role::value, "f64", Encoding::ieee, 52, 11, 1023},
    {DType::f32, "F32", 4, Role::value, "f32", Encoding::ieee, 23, 8, 127},
    {DType::f16, "F16", 2, Role::value, "f16", Encoding::ieee, 10, 5, 15},
    {DType::bf16, "BF16", 2, Role::value, "bf16", Encoding::ieee, 7, 8, 127},
    {DType::f8e4m3, "F8_E4M3", 1, Role::cache, "f8_e4m3", Encoding::finite, 3, 4, 7},
    {DType::f8e5m2, "F8_E5M2", 1, Role::cache, "f8_e5m2", Encoding::ieee, 2, 5, 15},
    {DType::i64, "I64", 8, Role::index, "i64", Encoding::integer},
    {DType::i8, "I8", 1, Role::cache, "i8", Encoding::integer},
    {DType::f8e4m3fnuz, "F8_E4M3FNUZ", 1, Role::cache, "f8_e4m3fnuz", Encoding::fnuz, 3, 4, 8}};

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

inline bool is_float(DType t) {
  const DTypeInfo* d = dtype_info(t);
  return d && d->encoding != Encoding::integer;
}
// A quantized cache's format: fp8 or int8 codes, which a cache keeps beside their scales.
inline bool is_quantized(DType t) {
  const DTypeInfo* d = dtype_info(t);
  return d && d->role == Role::cache;
}
inline bool is_fp8(DType t) { return is_quantized(t) && is_float(t); }

// The floating dtypes a case's tensors may hold: every one but the integers.
inline std::string float_dtype_names() { return dtype_names(is_float); }
// What a case's K and V may hold: those and the quantized caches' codes.
inline std::string kv_dtype_names() {
  return dtype_names([](DType t) { return is_float(t) || is_quantized(t); });
}

inline int dtype_bytes(DType t) {
  const DTypeInfo* d = dtype_info(t);
  return d ? d->bytes : 0;
}

// The quantized caches' formats (fp8, int8 codes), in the table's order.
inline std::vector<DType> quantized_dtypes() {
  std::vector<DType> out;
  for (const DTypeInfo& d : kDTypes)
    if (d.role == Role::cache) out.push_back(d.value);
  return out;
}

// The floating dtypes coarser than f32 (16-bit and fp8), finest first: fewer significand bits
// later, and of as many, the wider subnormal range first (E4M3FNUZ's smallest normal 2^-7 before
// E4M3's 2^-6: the coarser one's claim covers a kernel of either). The formats a cast may round
// into; the probe claims the coarsest that explains a kernel.
inline std::vector<DType> narrow_floats_finest_first() {
  std::vector<DType> out;
  for (const DTypeInfo& d : kDTypes)
    if (d.encoding != Encoding::integer && d.man_bits < dtype_info(DType::f32)->man_bits)
      out.push_back(d.value);
  std::stable_sort(out.begin(), out.end(), [](DType a, DType b) {
    const DTypeInfo &x = *dtype_info(a), &y = *dtype_info(b);
    return x.man_bits != y.man_bits ? x.man_bits > y.man_bits : x.bias > y.bias;
  });
  return out;
}

// The int8 codes' range: a quantizing write rounds x / scale to the nearest integer (ties to even)
// and saturates at the ends, as a GPU's saturating conversion does.
inline constexpr double kI8Min = -128.0, kI8Max = 127.0;

// 2^e, exactly, in a constant expression (std::ldexp is not constexpr in C++20).
constexpr double exp2i(int e) {
  double r = 1.0;
  for (; e > 0; --e) r *= 2.0;
  for (; e < 0; ++e) r /= 2.0;
  return r;
}

// A floating dtype's range from its row, derived once at compile time (rounding reads it on every
// element): unit roundoff u = 2^-p (p significand bits, the implicit one included); smallest
// positive normal 2^(1 - bias), below which a rounding may lose all relative accuracy (subnormals,
// or flush-to-zero), so it sets a rounding's absolute error floor; largest finite value, the
// largest significand at the largest exponent that is not the all-ones one (IEEE-style), at the
// all-ones one less its NaN's significand (finite: E4M3's 1.75 * 2^8 = 448), or at the all-ones
// one (fnuz: 1.875 * 2^7 = 240). All 0 for the integers.
struct FloatRange {
  double unit_roundoff = 0.0, min_normal = 0.0, max_finite = 0.0;
};
constexpr FloatRange float_range(const DTypeInfo& d) {
  if (d.encoding == Encoding::integer) return {};
  const int top = (1 << d.exp_bits) - 1 - d.bias;  // the all-ones exponent's
  const double largest = d.encoding == Encoding::ieee ? (2.0 - exp2i(-d.man_bits)) * exp2i(top - 1)
                         : d.encoding == Encoding::fnuz
                             ? (2.0 - exp2i(-d.man_bits)) * exp2i(top)
                             : (2.0 - exp2i(1 - d.man_bits)) * exp2i(top);
  return {exp2i(-(d.man_bits + 1)), exp2i(1 - d.bias), largest};
}
inline constexpr auto kFloatRanges = [] {
  std::array<FloatRange, std::size(kDTypes)> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = float_range(kDTypes[i]);
  return out;
}();

static_assert(kFloatRanges[static_cast<size_t>(DType::f64)].max_finite == DBL_MAX &&
                  kFloatRanges[static_cast<size_t>(DType::f32)].max_finite == FLT_MAX &&
                  kFloatRanges[static_cast<size_t>(DType::bf16)].max_finite ==
                      3.3895313892515355e38 &&  // (2 - 2^-7) 2^127
                  kFloatRanges[static_cast<size_t>(DType::f16)].max_finite == 65504.0 &&
                  kFloatRanges[static_cast<size_t>(DType::f8e4m3)].max_finite == 448.0 &&
                  kFloatRanges[static_cast<size_t>(DType::f8e5m2)].max_finite == 57344.0 &&
                  kFloatRanges[static_cast<size_t>(DType::f8e4m3fnuz)].max_finite == 240.0,
              "kFloatRanges: the formats' published largest values");

inline double unit_roundoff(DType t) {
  return dtype_info(t) ? kFloatRanges[static_cast<size_t>(t)].unit_roundoff : 0.0;
}
inline double min_normal(DType t) {
  return dtype_info(t) ? kFloatRanges[static_cast<size_t>(t)].min_normal : 0.0;
}
// The largest finite value of a floating dtype (FloatRange); an int8 code's 127.
inline double max_finite(DType t) {
  if (t == DType::i8) return kI8Max;
  return dtype_info(t) ? kFloatRanges[static_cast<size_t>(t)].max_finite : 0.0;
}

// A floating dtype's non-finite elements: those whose bits under `mask` equal `pattern`. The
// exponent field all ones (IEEE-style); that and every stored significand bit (finite: E4M3's
// S.1111.111); the byte 0x80 (fnuz).
struct NonFinite {
  uint64_t mask, pattern;
};
inline NonFinite nonfinite_bits(const DTypeInfo& d) {
  const uint64_t exp_all = ((uint64_t{1} << d.exp_bits) - 1) << d.man_bits;
  const uint64_t man_all = (uint64_t{1} << d.man_bits) - 1;
  switch (d.encoding) {
    case Encoding::ieee:
      return {exp_all, exp_all};
    case Encoding::finite:
      return {exp_all | man_all, exp_all | man_all};
    case Encoding::fnuz:
      return {0xff, 0x80};
    case Encoding::integer:
      break;
  }
  return {0, 1};  // never: every integer is finite
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

// An fp8 byte (any row of one byte and a floating encoding): sign, exponent and stored bits as
// its row says. IEEE-style (E5M2): the all-ones exponent is inf (stored bits 0) or NaN; finite
// (E4M3): no inf, and one NaN per sign, S.1111.111; fnuz: 0x80 is NaN, every other byte a value.
inline double fp8_bits_to_double(DType t, uint8_t b) {
  const DTypeInfo& d = *dtype_info(t);
  const int man_bits = d.man_bits, bias = d.bias;
  const int exp_all = (1 << d.exp_bits) - 1, man_all = (1 << man_bits) - 1;
  const int sign = (b >> 7) & 1;
  const int exp = (b >> man_bits) & exp_all;
  const int man = b & man_all;
  const bool ieee = d.encoding == Encoding::ieee;
  if (d.encoding == Encoding::fnuz && b == 0x80) return std::nan("");
  double v;
  if (d.encoding != Encoding::fnuz && exp == exp_all && (ieee || man == man_all)) {
    v = (ieee && man == 0) ? INFINITY : std::nan("");
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
    case DType::i64:
      return std::nearbyint(x);
    case DType::i8:
      return std::isnan(x) ? 0.0 : std::clamp(std::nearbyint(x), kI8Min, kI8Max);
    default: {  // the 16-bit and fp8 formats, from their rows
      const DTypeInfo& d = *dtype_info(t);
      return round_to_format(x, d.man_bits + 1, 1 - d.bias, max_finite(t));
    }
  }
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

// The fp8 byte of round_to(t, x): a value past the largest finite one is an IEEE-style format's
// inf, or a finite one's NaN (it has no inf); NaN is the all-ones pattern of the sign (fnuz: 0x80,
// and a zero of either sign 0x00).
inline uint8_t double_to_fp8_bits(DType t, double x) {
  const DTypeInfo& d = *dtype_info(t);
  const int man_bits = d.man_bits, bias = d.bias;
  const bool ieee = d.encoding == Encoding::ieee;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double r = round_to(t, x);
  const double a = std::fabs(r);
  if (d.encoding == Encoding::fnuz) {
    if (std::isnan(r) || std::isinf(a)) return 0x80;
    if (a == 0.0) return 0x00;
  }
  if (std::isnan(r) || (!ieee && std::isinf(a))) return sign | 0x7f;
  if (std::isinf(a)) return static_cast<uint8_t>(sign | (((1 << d.exp_bits) - 1) << man_bits));
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
