// The oracle's 16-bit widening and rounding (oracle/dtype.hpp) against Eigen's bfloat16 and half,
// which users' float64 pipelines rely on: every bit pattern widened, and rounding to nearest even
// on every bf16/f16 value, every midpoint between neighbours and the floats just around them.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "oracle/dtype.hpp"

namespace {

using dcp::oracle::DType;

double eigen_bf16(uint16_t b) {
  return static_cast<double>(static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(b)));
}
double eigen_f16(uint16_t h) {
  return static_cast<double>(static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(h)));
}

// Both NaN, or equal with the same sign (zeros included).
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

TEST(DtypeEigen, EveryBf16AndF16BitPatternWidensAsEigenDoes) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    ASSERT_TRUE(same(dcp::oracle::bf16_bits_to_double(bits), eigen_bf16(bits))) << "bf16 " << b;
    ASSERT_TRUE(same(dcp::oracle::f16_bits_to_double(bits), eigen_f16(bits))) << "f16 " << b;
  }
}

// x (a float) rounded by the oracle and by Eigen's conversion from float agree, bit for bit.
void expect_rounds_alike(float x) {
  if (std::isnan(x)) return;  // NaN payloads are not compared
  const uint16_t ours_bf16 = dcp::oracle::double_to_bf16_bits(x);
  const uint16_t eigen_bf16_bits = Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x));
  ASSERT_EQ(ours_bf16, eigen_bf16_bits) << "bf16 of " << x;
  const uint16_t ours_f16 = dcp::oracle::double_to_f16_bits(x);
  const uint16_t eigen_f16_bits = Eigen::numext::bit_cast<uint16_t>(Eigen::half(x));
  ASSERT_EQ(ours_f16, eigen_f16_bits) << "f16 of " << x;
}

TEST(DtypeEigen, RoundingToNearestEvenMatchesEigenAtEveryTie) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    for (DType t : {DType::bf16, DType::f16}) {
      const auto bits = static_cast<uint16_t>(b);
      const double lo = t == DType::bf16 ? dcp::oracle::bf16_bits_to_double(bits)
                                         : dcp::oracle::f16_bits_to_double(bits);
      const auto up = static_cast<uint16_t>(b + 1 > 0xffff ? b : b + 1);
      const double hi = t == DType::bf16 ? dcp::oracle::bf16_bits_to_double(up)
                                         : dcp::oracle::f16_bits_to_double(up);
      if (!std::isfinite(lo) || !std::isfinite(hi) || std::signbit(lo) != std::signbit(hi))
        continue;
      const float mid = static_cast<float>((lo + hi) / 2);  // exact: both are floats' halves
      ASSERT_NO_FATAL_FAILURE(expect_rounds_alike(static_cast<float>(lo)));
      ASSERT_NO_FATAL_FAILURE(expect_rounds_alike(mid));
      ASSERT_NO_FATAL_FAILURE(expect_rounds_alike(std::nextafter(mid, 0.0f)));
      ASSERT_NO_FATAL_FAILURE(expect_rounds_alike(std::nextafter(mid, INFINITY)));
    }
  }
  std::mt19937 rng(7);  // and floats anywhere, overflow and subnormals included
  for (int i = 0; i < 1'000'000; ++i)
    ASSERT_NO_FATAL_FAILURE(
        expect_rounds_alike(std::bit_cast<float>(static_cast<uint32_t>(rng()))));
}

// The bit tests of representable() agree with rounding: x is a value of t iff round_to(t, x) == x.
TEST(DtypeEigen, RepresentableBitTestsAgreeWithRounding) {
  std::mt19937_64 rng(11);
  std::vector<double> xs = {0.0,      -0.0,        65504.0,  65520.0,     0x1p-24,
                            0x1p-25,  3 * 0x1p-25, 0x1p-14,  0x1.ff8p-15, 0x1p-126,
                            0x1p-133, 0x1p-134,    0x1p-149, 1e300,       -3.0};
  for (int i = 0; i < 2'000'000; ++i) {
    const auto f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    xs.push_back(f);                                                               // any float
    xs.push_back(dcp::oracle::bf16_bits_to_double(static_cast<uint16_t>(rng())));  // bf16 values
    xs.push_back(dcp::oracle::f16_bits_to_double(static_cast<uint16_t>(rng())));   // f16 values
    xs.push_back(std::bit_cast<double>(rng()));                                    // any double
  }
  for (double x : xs)
    for (DType t : {DType::f32, DType::bf16, DType::f16})
      ASSERT_EQ(dcp::oracle::representable(t, x),
                !std::isfinite(x) || dcp::oracle::round_to(t, x) == x)
          << dcp::oracle::dtype_name(t) << " " << x;
}

}  // namespace
