// The kernels' own arithmetic (gpu/kernels/kernel_math.hpp): exp2_poly3 within the relative
// error the production path claims for it (and not far inside it, so the claim is not loose), and
// the tf32 rounding of product operands.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "gpu/kernels/convention.hpp"
#include "gpu/kernels/kernel_math.hpp"

namespace dcp::gpu {
namespace {

float from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

double rel_err(float got, double exact) { return std::fabs(static_cast<double>(got) / exact - 1); }

// Every 32nd fp32 bit pattern of [-1/2, 1/2] (6.6*10^7 arguments, both signs, down to the
// subnormals), scaled by 2^n for n across the normal range: the cubic's error is a function of
// the reduced argument alone, and the scaling is exact while the result is normal.
TEST(KernelMath, Exp2Poly3IsWithinItsStatedRelativeErrorAndNotFarInside) {
  constexpr uint32_t kStride = 32;
  const uint32_t half = 0x3f000000u;  // 0.5f
  double worst = 0.0;
  float worst_f = 0.0f;
  for (uint32_t b = 0; b <= half; b += kStride)
    for (const float f : {from_bits(b), -from_bits(b)}) {
      const double e = rel_err(exp2_poly3(f), std::exp2(static_cast<double>(f)));
      if (e > worst) worst = e, worst_f = f;
    }
  EXPECT_LE(worst, kExp2Poly3RelErr) << "at f = " << worst_f;
  EXPECT_GE(worst, 0.98 * kExp2Poly3RelErr) << "the stated error is loose: worst " << worst;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> frac(-0.5f, 0.5f);
  for (int n = -125; n <= 127; ++n)
    for (int i = 0; i < 64; ++i) {
      const float y = static_cast<float>(n) + frac(rng);
      if (y < -126.0f || y >= 127.5f) continue;  // normal results only
      EXPECT_LE(rel_err(exp2_poly3(y), std::exp2(static_cast<double>(y))), kExp2Poly3RelErr)
          << "at y = " << y;
    }
}

TEST(KernelMath, Exp2Poly3SpecialValuesAndUnderflowAreTheMathLibrarys) {
  EXPECT_TRUE(std::isnan(exp2_poly3(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(exp2_poly3(INFINITY), INFINITY);
  EXPECT_EQ(exp2_poly3(128.0f), INFINITY);
  EXPECT_EQ(exp2_poly3(-INFINITY), 0.0f);
  EXPECT_EQ(exp2_poly3(-151.0f), 0.0f);
  // Subnormal results: the scaled cubic, rounded once (within half of 2^-149 more).
  const float y = -140.3f;
  EXPECT_LE(std::fabs(exp2_poly3(y) - std::exp2(static_cast<double>(y))),
            kExp2Poly3RelErr * std::exp2(static_cast<double>(y)) + std::ldexp(1.0, -150));
}

// A base-e poly3 exponential is the base-2 cubic of x log2(e): within the cubic's error plus the
// product's one rounding, |x log2 e| u ln 2 relative (the oracle's exponent-argument term). The
// test's own double arithmetic (about 1e-16) needs no slack: the cubic stays 1.2e-6 inside
// kExp2Poly3RelErr.
TEST(KernelMath, BaseEPoly3ExponentialAddsOneArgumentRounding) {
  const Exponential e{LseBase::e, ExpImpl::poly3};
  for (float x = -80.0f; x <= 0.0f; x += 0.01171875f) {
    const double arg = std::fabs(static_cast<double>(x) * 1.4426950408889634) *
                       std::ldexp(1.0, -24) * std::log(2.0);
    EXPECT_LE(rel_err(pow_base(e, x), std::exp(static_cast<double>(x))),
              (1 + kExp2Poly3RelErr) * std::exp(arg) - 1)
        << "at x = " << x;
  }
}

TEST(KernelMath, RoundTf32KeepsTenBitsWithTiesAwayFromZero) {
  const float one = 1.0f, ulp = std::ldexp(1.0f, -10);  // tf32's spacing at 1
  EXPECT_EQ(round_tf32(one + ulp / 2), one + ulp);      // a tie goes away from zero
  EXPECT_EQ(round_tf32(-(one + ulp / 2)), -(one + ulp));
  EXPECT_EQ(round_tf32(one + ulp / 4), one);
  EXPECT_EQ(round_tf32(one + 3 * ulp / 4), one + ulp);
  EXPECT_EQ(round_tf32(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(round_tf32(std::numeric_limits<float>::quiet_NaN())));
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits(0, 0x7f7fffffu);  // every finite positive float
  for (int i = 0; i < 100000; ++i) {
    const float x = from_bits(bits(rng));
    const float r = round_tf32(x);
    uint32_t rb;
    std::memcpy(&rb, &r, sizeof rb);
    EXPECT_EQ(rb & 0x1fffu, 0u) << x;  // 13 low significand bits cleared
    if (std::isnormal(x) && std::isfinite(r)) {
      EXPECT_LE(rel_err(r, x), std::ldexp(1.0, -11)) << x;  // u = 2^-11
    }
  }
}

}  // namespace
}  // namespace dcp::gpu
