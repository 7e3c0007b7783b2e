// storage_format.hpp — the storage formats of the production path and rounding into them
// (oracle::DType is the oracle's own, independent list; properties/dcp_bridge.hpp maps them).
//
// KV caches, queries and outputs are stored in fp32, fp16 or bf16; arithmetic is fp32. A KV cache
// holds its elements in their format (2 bytes a bf16 key component: load_element, store_element);
// queries, partials and outputs are floats already rounded to their format (round to nearest
// even, as a GPU's conversion instructions do), so a stored bf16 value is an exact float.
//
//   float x = round_to(StorageFormat::bf16, 1.00390625f);   // 1.0f (ties to even)
//   store_element(StorageFormat::bf16, cache, i, x);        // its 16 bits at element i
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "gpu/kernels/hd.hpp"

namespace dcp::gpu {

enum class StorageFormat { f32, f16, bf16 };

inline std::string_view format_name(StorageFormat d) {
  return d == StorageFormat::f32 ? "f32" : d == StorageFormat::f16 ? "f16" : "bf16";
}
inline std::optional<StorageFormat> parse_format(std::string_view s) {
  if (s == "f32" || s == "fp32") return StorageFormat::f32;
  if (s == "f16" || s == "fp16") return StorageFormat::f16;
  if (s == "bf16") return StorageFormat::bf16;
  return std::nullopt;
}

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

DCP_HD inline float round_to(StorageFormat d, float x) {
  return d == StorageFormat::f32 ? x : d == StorageFormat::bf16 ? round_bf16(x) : round_f16(x);
}

// ---- Elements as held in memory: f32 as a float, f16 and bf16 as their 16-bit patterns --------

DCP_HD inline int64_t format_bytes(StorageFormat d) { return d == StorageFormat::f32 ? 4 : 2; }

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

// Element i of an array of F's elements at p, as a float (exact); F fixed at compile time, so
// that a loop over a row's components has no per-element dispatch.
template <StorageFormat F>
DCP_HD inline float load_as(const void* p, int64_t i) {
  if constexpr (F == StorageFormat::f32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (F == StorageFormat::bf16) {
    return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
  } else {
    return f16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
  }
}

// The same with the format chosen at run time.
DCP_HD inline float load_element(StorageFormat d, const void* p, int64_t i) {
  return d == StorageFormat::f32    ? load_as<StorageFormat::f32>(p, i)
         : d == StorageFormat::bf16 ? load_as<StorageFormat::bf16>(p, i)
                                    : load_as<StorageFormat::f16>(p, i);
}

// x rounded to d (round_to) and stored as element i of an array of d's elements at p.
DCP_HD inline void store_element(StorageFormat d, void* p, int64_t i, float x) {
  if (d == StorageFormat::f32)
    static_cast<float*>(p)[i] = x;
  else
    static_cast<uint16_t*>(p)[i] =
        d == StorageFormat::bf16 ? float_to_bf16_bits(x) : float_to_f16_bits(x);
}

}  // namespace dcp::gpu
