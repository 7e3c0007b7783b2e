// storage_format.hpp — the storage formats of the production path and rounding into them
// (oracle::DType is the oracle's own, independent list; properties/dcp_bridge.hpp maps them).
//
// KV caches, queries and outputs are stored in fp32, fp16 or bf16; arithmetic is fp32. The host
// device keeps every value as a float already rounded to its storage format (round to nearest
// even, as a GPU's conversion instructions do), so a stored bf16 value is an exact float.
//
//   float x = round_to(StorageFormat::bf16, 1.00390625f);   // 1.0f (ties to even)
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

}  // namespace dcp::gpu
