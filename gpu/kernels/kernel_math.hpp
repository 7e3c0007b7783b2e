// kernel_math.hpp — the arithmetic choices a DCP kernel makes besides its storage formats, as the
// production path's kernels offer them: which exponential, whether P is rounded before P.V,
// tf32 operands, and the formats partials are stored and summed in. Every choice is one the
// oracle's claim vocabulary states (properties/dcp_bridge.cpp maps KernelMath to it), so a run
// with any of them is judged within the bound derived for exactly that arithmetic.
//
//   KernelMath m;  m.exp = ExpImpl::poly3;  m.p_cast = StorageFormat::bf16;
//   m.partial = StorageFormat::bf16;  m.merge = StorageFormat::bf16;   // a bf16 pipeline
//   float w = exp2_poly3(-3.25f);   // 2^-3.25 within kExp2Poly3RelErr
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "gpu/kernels/hd.hpp"
#include "gpu/kernels/names.hpp"
#include "gpu/kernels/storage_format.hpp"

namespace dcp::gpu {

// How a kernel raises its LSE base: the math library's expf/exp2f (within 2 ulp), or exp2_poly3,
// a cubic polynomial of the kind vectorized 16-bit kernels use, within kExp2Poly3RelErr.
enum class ExpImpl { libm, poly3 };

inline constexpr EnumName<ExpImpl> kExpImplNames[] = {{ExpImpl::libm, "libm"},
                                                      {ExpImpl::poly3, "poly3"}};
inline std::string_view exp_impl_name(ExpImpl e) { return name_in(kExpImplNames, e); }
inline std::optional<ExpImpl> parse_exp_impl(std::string_view s) {
  return parse_in(kExpImplNames, s);
}

// 2^f ~ c0 + c1 f + c2 f^2 + c3 f^3 on f in [-1/2, 1/2]: the relative-error minimax cubic (Lawson
// iterations on a grid of 2*10^5 points), coefficients rounded to fp32. Its own relative error is
// at most 7.48e-5, at the equioscillation points; evaluated with three fmaf (one rounding each,
// |f| <= 1/2 and every partial result in [0.24, 1.42], so at most 4 u_s = 2.4e-7 more) and scaled
// by 2^n exactly, the result is within 7.51e-5. kExp2Poly3RelErr rounds that up;
// tests/unit/test_kernel_math.cpp checks every fp32 f of [-1/2, 1/2] (at a stride of 32 bit
// patterns) against it, and that the bound is attained to within 2%.
inline constexpr float kExp2Poly3C0 = 0.99992807535f;
inline constexpr float kExp2Poly3C1 = 0.69326098604f;
inline constexpr float kExp2Poly3C2 = 0.24261109199f;
inline constexpr float kExp2Poly3C3 = 0.05517164615f;
inline constexpr double kExp2Poly3RelErr = 7.6e-5;

// 2^y: y = n + f with n = rint(y) and f = y - n exact (|f| <= 1/2), the cubic in f, times 2^n
// (ldexpf: exact for normal results, one rounding in the subnormal range, inf above 2^128). NaN
// stays NaN; below -150 the result is 0, as the math library's.
DCP_HD inline float exp2_poly3(float y) {
  if (!(y == y)) return y;
  if (y >= 128.0f) return INFINITY;
  if (y < -150.0f) return 0.0f;
  const float n = rintf(y);
  const float f = y - n;
  const float p = fmaf(fmaf(fmaf(kExp2Poly3C3, f, kExp2Poly3C2), f, kExp2Poly3C1), f, kExp2Poly3C0);
  return ldexpf(p, static_cast<int>(n));
}

// fp32 -> tf32 -> fp32 as tensor cores take their operands (cvt.rna.tf32.f32): 10 stored
// significand bits, round to nearest with ties away from zero (u = 2^-11); inf and NaN kept.
DCP_HD inline float round_tf32(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  if ((b & 0x7f800000u) != 0x7f800000u) b = (b + 0x1000u) & 0xffffe000u;
  float y;
  memcpy(&y, &b, sizeof y);
  return y;
}

// A product's operand as the multiplier takes it: rounded to tf32 on tf32 tensor cores.
DCP_HD inline float product_operand(bool tf32, float x) { return tf32 ? round_tf32(x) : x; }

// The arithmetic of one DCP step's kernels beyond the storage formats of q, KV and the output.
struct KernelMath {
  ExpImpl exp = ExpImpl::libm;  // every base^x: attention weights, rescales, merge weights
  // P rounded to this before P.V, in the numerator only, as FlashAttention rounds P for its
  // 16-bit MMA (f32: not rounded).
  StorageFormat p_cast = StorageFormat::f32;
  bool tf32 = false;  // both operands of every q.k and P.V product rounded to tf32
  // The format a rank's partial O_r is stored in by its attention kernel (its LSE stays fp32).
  StorageFormat partial = StorageFormat::f32;
  // ag_rs only: the reduce-scatter's format, its inputs base^(L_r - L) O_r and every partial sum
  // rounded to it, as a bf16 reduce-scatter sums (a2a merges locally in fp32).
  StorageFormat merge = StorageFormat::f32;
};

}  // namespace dcp::gpu
