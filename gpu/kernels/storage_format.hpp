// storage_format.hpp — the storage formats of the production path and rounding into them
// (oracle::DType is the oracle's own, independent list; properties/dcp_bridge.hpp maps them).
//
// Queries, partials and outputs are stored in fp32, fp16 or bf16; KV caches also in fp8 (OCP
// E4M3 and E5M2, as PyTorch's float8_e4m3fn and float8_e5m2; E4M3FNUZ, AMD MI300's fp8, as
// float8_e4m3fnuz) or int8 codes (-128 .. 127, meant
// times their scale, as LMDeploy's and TensorRT-LLM's int8 caches); arithmetic is fp32. A KV cache
// holds its elements in their format (2 bytes a bf16 key component, 1 an fp8 one: load_element,
// store_element); queries, partials and outputs are floats already rounded to their format (round
// to nearest even, as a GPU's conversion instructions do), so a stored value is an exact float.
// Rounding into fp8 saturates: a finite value beyond the largest (448, 57344, 240) and an
// infinity become the largest of their sign, as engines' quantizing writes clamp (and as a GPU's
// `satfinite` conversion does); a NaN stays a NaN. Rounding into int8 rounds to the nearest
// integer (ties to even) and saturates at -128 and 127, as a GPU's cvt.rni.sat.s8 does (a NaN: 0).
//
//   float x = round_to(StorageFormat::bf16, 1.00390625f);   // 1.0f (ties to even)
//   store_element(StorageFormat::bf16, cache, i, x);        // its 16 bits at element i
//   round_to(StorageFormat::f8e4m3, 1000.0f);               // 448.0f (saturated)
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "gpu/kernels/hd.hpp"
#include "gpu/kernels/names.hpp"

namespace dcp::gpu {

enum class StorageFormat { f32, f16, bf16, f8e4m3, f8e5m2, i8, f8e4m3fnuz };

inline constexpr EnumName<StorageFormat> kFormatNames[] = {
    {StorageFormat::f32, "f32", "fp32"},
    {StorageFormat::f16, "f16", "fp16"},
    {StorageFormat::bf16, "bf16"},
    {StorageFormat::f8e4m3, "fp8e4m3", "f8e4m3", "e4m3"},
    {StorageFormat::f8e5m2, "fp8e5m2", "f8e5m2", "e5m2"},
    {StorageFormat::i8, "int8", "i8"},
    {StorageFormat::f8e4m3fnuz, "fp8e4m3fnuz", "f8e4m3fnuz", "e4m3fnuz"}};
inline std::string_view format_name(StorageFormat d) { return name_in(kFormatNames, d); }

// How an fp8 byte means a number: IEEE-style (the all-ones exponent is inf and NaN: E5M2);
// finite (no inf; one NaN per sign, S.1111.111: OCP E4M3); fnuz (no inf, no -0: 0x80 is the one
// NaN, the all-ones exponent a normal one: E4M3FNUZ).
enum class Fp8Encoding { ieee, finite, fnuz };
// An fp8 format: stored significand bits, exponent bias, its largest finite value, its encoding.
// man_bits 0: not fp8.
struct Fp8Bits {
  int man_bits = 0, bias = 0;
  float largest = 0.0f;
  Fp8Encoding encoding = Fp8Encoding::ieee;
};
// Each format's facts in one row: its bytes, whether only a KV cache holds it (fp8, int8 codes,
// meant times a scale where it has one), and for fp8 its encoding. With kFormatNames and
// with_format below, a new format is a row in each (and its element codec, for a new kind).
struct FormatFacts {
  int bytes;
  bool cache_only;
  Fp8Bits fp8;
};
DCP_HD constexpr FormatFacts format_facts(StorageFormat d) {
  switch (d) {
    case StorageFormat::f32:
      return {4, false, {}};
    case StorageFormat::f16:
      return {2, false, {}};
    case StorageFormat::bf16:
      return {2, false, {}};
    case StorageFormat::f8e4m3:  // 1.75 * 2^8: S.1111.111 is the NaN
      return {1, true, {3, 7, 448.0f, Fp8Encoding::finite}};
    case StorageFormat::f8e5m2:  // 1.75 * 2^15: the all-ones exponent is inf and NaN
      return {1, true, {2, 15, 57344.0f, Fp8Encoding::ieee}};
    case StorageFormat::i8:
      return {1, true, {}};
    case StorageFormat::f8e4m3fnuz:  // 1.875 * 2^7: the all-ones exponent is a normal one
      return {1, true, {3, 8, 240.0f, Fp8Encoding::fnuz}};
  }
  return {4, false, {}};
}

// A format as a type: fn(FormatTag<F>{}) runs fn with F known at compile time.
template <StorageFormat F>
struct FormatTag {
  static constexpr StorageFormat value = F;
};
// fn(FormatTag<d>{}): the one switch that turns a run-time format into a compile-time one
// (load_element, store_element, round_to, the attention body's instantiations).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Fn>
DCP_HD decltype(auto) with_format(StorageFormat d, Fn&& fn) {
  switch (d) {
    case StorageFormat::f16:
      return fn(FormatTag<StorageFormat::f16>{});
    case StorageFormat::bf16:
      return fn(FormatTag<StorageFormat::bf16>{});
    case StorageFormat::f8e4m3:
      return fn(FormatTag<StorageFormat::f8e4m3>{});
    case StorageFormat::f8e5m2:
      return fn(FormatTag<StorageFormat::f8e5m2>{});
    case StorageFormat::i8:
      return fn(FormatTag<StorageFormat::i8>{});
    case StorageFormat::f8e4m3fnuz:
      return fn(FormatTag<StorageFormat::f8e4m3fnuz>{});
    case StorageFormat::f32:
      break;
  }
  return fn(FormatTag<StorageFormat::f32>{});
}

DCP_HD constexpr bool is_fp8(StorageFormat d) { return format_facts(d).fp8.man_bits > 0; }
// A format only a KV cache holds (fp8, int8), its elements meant times a scale where it has one.
DCP_HD constexpr bool is_cache_only(StorageFormat d) { return format_facts(d).cache_only; }
// A KV cache's format: a value format, fp8 (fp8e4m3 / e4m3, fp8e5m2 / e5m2, ...) or int8.
inline std::optional<StorageFormat> parse_kv_format(std::string_view s) {
  return parse_in(kFormatNames, s);
}
// A value format (queries, partials, outputs, the P cast, the merge): f32, f16 or bf16.
inline std::optional<StorageFormat> parse_format(std::string_view s) {
  const std::optional<StorageFormat> f = parse_kv_format(s);
  return f && !is_cache_only(*f) ? f : std::nullopt;
}
// What the parsers accept, for refusals and help: "f32, f16 or bf16"; with fp8 and int8 for a KV
// cache. The quantized caches' alone: "fp8e4m3, fp8e5m2 or int8".
inline std::string format_names(bool kv) {
  return names_in(kFormatNames, [kv](StorageFormat f) { return kv || !is_cache_only(f); });
}
inline std::string cache_format_names() { return names_in(kFormatNames, is_cache_only); }

// fp32 -> bf16 -> fp32, round to nearest even; NaN stays NaN, overflow gives inf.
DCP_HD inline float round_bf16(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  if ((b & 0x7f800000u) == 0x7f800000u) {  // inf or NaN: keep (quiet a NaN)
    if (b & 0x007fffffu) b |= 0x00400000u;
    b &= 0xffff0000u;
  } else {
    b += 0x7fffu + ((b >> 16) & 1u);
    b &= 0xffff0000u;
  }
  float y;
  memcpy(&y, &b, sizeof y);
  return y;
}

// fp32 -> fp16 -> fp32, round to nearest even, including fp16 subnormals and overflow to inf.
DCP_HD inline float round_f16(float x) {
  // fp16: 10 fraction bits, exponents -14..15, subnormal spacing 2^-24, largest 65504.
  const float ax = fabsf(x);
  if (!(ax == ax) || ax == INFINITY) return x;
  if (ax >= 65520.0f) return x < 0 ? -INFINITY : INFINITY;  // 65504 + half an ulp rounds up
  int e;
  frexpf(ax, &e);                                   // ax = f * 2^e, f in [0.5, 1)
  const int q = e - 11 < -24 ? -24 : e - 11;        // spacing exponent: 11 significant bits
  const float r = ldexpf(rintf(ldexpf(x, -q)), q);  // rintf rounds ties to even
  return r;
}

inline constexpr uint32_t kFloatBias = 127;

// fp32 -> fp8 -> fp32: round to nearest even with `bits` significand bits and subnormals below
// 2^emin, saturating at +-largest (an infinity too); NaN stays NaN.
DCP_HD inline float round_fp8(float x, int bits, int emin, float largest) {
  const float ax = fabsf(x);
  if (!(ax == ax)) return x;
  if (ax >= largest) return x < 0 ? -largest : largest;
  int e;
  frexpf(ax, &e);  // ax = f * 2^e, f in [0.5, 1)
  const int q = e - bits < emin - bits + 1 ? emin - bits + 1 : e - bits;  // spacing exponent
  return ldexpf(rintf(ldexpf(x, -q)), q);  // ties to even; |x| < largest rounds to <= largest
}
DCP_HD inline float round_fp8(float x, const Fp8Bits& f) {
  return round_fp8(x, f.man_bits + 1, 1 - f.bias, f.largest);
}

// fp32 -> int8 -> fp32: the nearest integer (ties to even), saturated at -128 and 127; NaN gives 0.
inline constexpr float kI8Min = -128.0f, kI8Max = 127.0f;
DCP_HD inline float round_i8(float x) {
  if (!(x == x)) return 0.0f;
  const float r = rintf(x);
  return r < kI8Min ? kI8Min : r > kI8Max ? kI8Max : r;
}

// x rounded to F (round to nearest even; fp8 and int8 saturate).
template <StorageFormat F>
DCP_HD inline float round_as(float x) {
  if constexpr (F == StorageFormat::bf16) {
    return round_bf16(x);
  } else if constexpr (F == StorageFormat::f16) {
    return round_f16(x);
  } else if constexpr (is_fp8(F)) {
    return round_fp8(x, format_facts(F).fp8);
  } else if constexpr (F == StorageFormat::i8) {
    return round_i8(x);
  } else {
    return x;
  }
}
DCP_HD inline float round_to(StorageFormat d, float x) {
  return with_format(d, [x](auto f) { return round_as<decltype(f)::value>(x); });
}

// ---- Elements as held in memory: f32 as a float, f16 and bf16 as their 16-bit patterns, fp8 as
// its byte, int8 as a signed byte -----------------------------------------------------------------

DCP_HD inline int64_t format_bytes(StorageFormat d) { return format_facts(d).bytes; }

// The float of a bf16 pattern: its 16 bits are the float's upper half.
DCP_HD inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t w = static_cast<uint32_t>(b) << 16;
  float y;
  memcpy(&y, &w, sizeof y);
  return y;
}

// The float of an f16 pattern (exact: f16's 11 significant bits and exponents -24..15 fit).
DCP_HD inline float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: man * 2^-24
    const float m = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -m : m;
  }
  const uint32_t w = e == 0x1fu ? sign | 0x7f800000u | (man << 13)          // inf, NaN
                                : sign | ((e + 112u) << 23) | (man << 13);  // 127 - 15 = 112
  float y;
  memcpy(&y, &w, sizeof y);
  return y;
}

// The float of an fp8 byte of encoding f (exact): subnormals m * 2^(1 - bias - man_bits); a
// finite encoding's S.1111.111 is NaN, an IEEE-style one's all-ones exponent inf or NaN, fnuz's
// 0x80 NaN.
DCP_HD inline float fp8_bits_to_float(uint8_t b, const Fp8Bits& f) {
  const uint32_t m = static_cast<uint32_t>(f.man_bits);
  const uint32_t exp_all = (1u << (7u - m)) - 1u, man_all = (1u << m) - 1u;
  const uint32_t e = (b >> m) & exp_all, man = b & man_all;
  const bool ieee = f.encoding == Fp8Encoding::ieee;
  if (f.encoding == Fp8Encoding::fnuz && b == 0x80u) return NAN;
  float a;
  if (f.encoding != Fp8Encoding::fnuz && e == exp_all && (ieee || man == man_all)) {
    a = !ieee || man != 0 ? NAN : INFINITY;
  } else if (e == 0) {
    a = ldexpf(static_cast<float>(man), 1 - f.bias - f.man_bits);
  } else {
    const uint32_t w =
        ((e + kFloatBias - static_cast<uint32_t>(f.bias)) << 23) | (man << (23u - m));
    memcpy(&a, &w, sizeof a);
  }
  return (b & 0x80u) ? -a : a;
}

// The bf16 pattern of round_bf16(x).
DCP_HD inline uint16_t float_to_bf16_bits(float x) {
  const float r = round_bf16(x);
  uint32_t w;
  memcpy(&w, &r, sizeof w);
  return static_cast<uint16_t>(w >> 16);
}

// The f16 pattern of round_f16(x).
DCP_HD inline uint16_t float_to_f16_bits(float x) {
  const float r = round_f16(x);
  uint32_t w;
  memcpy(&w, &r, sizeof w);
  const uint16_t sign = static_cast<uint16_t>((w >> 16) & 0x8000u);
  const uint32_t e = (w >> 23) & 0xffu;
  if (e == 0xffu) return static_cast<uint16_t>(sign | ((w & 0x007fffffu) ? 0x7e00u : 0x7c00u));
  if (e < 113u) {  // below 2^-14: an f16 subnormal (or zero), |r| / 2^-24 an exact integer
    const float a = fabsf(r) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(a));
  }
  return static_cast<uint16_t>(sign | ((e - 112u) << 10) | ((w >> 13) & 0x3ffu));
}

// The fp8 byte of round_fp8(x, f) (a NaN: S.1111.111, fnuz's 0x80; saturated, so never an inf;
// fnuz has one zero, 0x00).
DCP_HD inline uint8_t float_to_fp8_bits(float x, const Fp8Bits& f) {
  const float r = round_fp8(x, f);
  uint32_t w;
  memcpy(&w, &r, sizeof w);
  const bool fnuz = f.encoding == Fp8Encoding::fnuz;
  const uint8_t sign = static_cast<uint8_t>((w >> 24) & 0x80u);
  if (!(r == r)) return fnuz ? uint8_t{0x80u} : static_cast<uint8_t>(sign | 0x7fu);
  const float a = fabsf(r);
  if (fnuz && a == 0.0f) return 0x00u;
  const int emin = 1 - f.bias;
  if (a < ldexpf(1.0f, emin))  // a subnormal (or zero): a / 2^(emin - man_bits) an exact integer
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(ldexpf(a, f.man_bits - emin)));
  const uint32_t m = static_cast<uint32_t>(f.man_bits);
  const uint32_t e = ((w >> 23) & 0xffu) - (kFloatBias - static_cast<uint32_t>(f.bias));
  return static_cast<uint8_t>(sign | (e << m) | ((w >> (23u - m)) & ((1u << m) - 1u)));
}

// Element i of an array of F's elements at p, as a float (exact); F fixed at compile time, so
// that a loop over a row's components has no per-element dispatch.
template <StorageFormat F>
DCP_HD inline float load_as(const void* p, int64_t i) {
  if constexpr (F == StorageFormat::f32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (F == StorageFormat::bf16) {
    return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
  } else if constexpr (F == StorageFormat::f16) {
    return f16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
  } else if constexpr (is_fp8(F)) {
    return fp8_bits_to_float(static_cast<const uint8_t*>(p)[i], format_facts(F).fp8);
  } else {
    return static_cast<float>(static_cast<const int8_t*>(p)[i]);
  }
}

// x rounded to F (round_as) and stored as element i of an array of F's elements at p.
template <StorageFormat F>
DCP_HD inline void store_as(void* p, int64_t i, float x) {
  if constexpr (F == StorageFormat::f32) {
    static_cast<float*>(p)[i] = x;
  } else if constexpr (F == StorageFormat::bf16) {
    static_cast<uint16_t*>(p)[i] = float_to_bf16_bits(x);
  } else if constexpr (F == StorageFormat::f16) {
    static_cast<uint16_t*>(p)[i] = float_to_f16_bits(x);
  } else if constexpr (is_fp8(F)) {
    static_cast<uint8_t*>(p)[i] = float_to_fp8_bits(x, format_facts(F).fp8);
  } else {
    static_cast<int8_t*>(p)[i] = static_cast<int8_t>(round_i8(x));
  }
}

// The same with the format chosen at run time.
DCP_HD inline float load_element(StorageFormat d, const void* p, int64_t i) {
  return with_format(d, [p, i](auto f) { return load_as<decltype(f)::value>(p, i); });
}
DCP_HD inline void store_element(StorageFormat d, void* p, int64_t i, float x) {
  with_format(d, [p, i, x](auto f) { store_as<decltype(f)::value>(p, i, x); });
}

}  // namespace dcp::gpu
