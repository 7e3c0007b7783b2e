// Unit tests of the double-double type against the certify tier (MPFR, 266 bits).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "oracle/real.hpp"

namespace dcp::oracle {
namespace {

certify_real as_cert(const dd& x) { return certify_real(x.hi) + certify_real(x.lo); }

// -log2 of the relative error of x against the exact value.
double rel_bits(const dd& x, const certify_real& exact) {
  const certify_real err = abs(as_cert(x) - exact);
  if (err == 0) return 300.0;
  return -boost::multiprecision::log2(err / abs(exact)).convert_to<double>();
}

TEST(DoubleDouble, TwoSumAndTwoProdAreErrorFree) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  for (int i = 0; i < 10000; ++i) {
    const double a = u(rng), b = u(rng) * std::ldexp(1.0, static_cast<int>(rng() % 60) - 30);
    const dd s = two_sum(a, b);
    EXPECT_EQ(certify_real(s.hi) + certify_real(s.lo), certify_real(a) + certify_real(b));
    const dd p = two_prod(a, b);
    EXPECT_EQ(certify_real(p.hi) + certify_real(p.lo), certify_real(a) * certify_real(b));
  }
}

TEST(DoubleDouble, ArithmeticKeeps100Bits) {
  std::mt19937_64 rng(2);
  std::normal_distribution<double> n(0.0, 10.0);
  double worst = 300.0;
  for (int i = 0; i < 5000; ++i) {
    const dd a = dd(n(rng)) + dd(n(rng) * 1e-17), b = dd(n(rng)) + dd(n(rng) * 1e-17);
    const certify_real ca = as_cert(a), cb = as_cert(b);
    worst = std::min(worst, rel_bits(a * b, ca * cb));
    worst = std::min(worst, rel_bits(a / b, ca / cb));
    // Addition is accurate relative to |a| + |b| (cancellation is exact-input limited).
    const certify_real e = abs(as_cert(a + b) - (ca + cb)) / (abs(ca) + abs(cb));
    if (e != 0) worst = std::min(worst, -boost::multiprecision::log2(e).convert_to<double>());
  }
  EXPECT_GE(worst, 100.0);
}

TEST(DoubleDouble, ExpLogTanhKeep100Bits) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-90.0, 20.0);
  double worst_exp = 300, worst_log = 300, worst_tanh = 300, worst_expm1 = 300;
  for (int i = 0; i < 5000; ++i) {
    const dd x = dd(u(rng)) + dd(u(rng) * 1e-18);
    const certify_real cx = as_cert(x);
    worst_exp = std::min(worst_exp, rel_bits(exp(x), boost::multiprecision::exp(cx)));
    const dd y = abs(x) + 1e-3;
    // log is accurate in absolute terms: measure against max(1, |log y|).
    const certify_real ly = boost::multiprecision::log(as_cert(y));
    const certify_real le = abs(as_cert(log(y)) - ly) / std::max(certify_real(1), abs(ly));
    if (le != 0)
      worst_log = std::min(worst_log, -boost::multiprecision::log2(le).convert_to<double>());
    const dd small = x * 0.05;
    worst_tanh =
        std::min(worst_tanh, rel_bits(tanh(small), boost::multiprecision::tanh(as_cert(small))));
    const dd tiny = x * 1e-4;
    worst_expm1 =
        std::min(worst_expm1, rel_bits(expm1(tiny), boost::multiprecision::expm1(as_cert(tiny))));
  }
  EXPECT_GE(worst_exp, 100.0);
  EXPECT_GE(worst_log, 100.0);
  EXPECT_GE(worst_tanh, 100.0);
  EXPECT_GE(worst_expm1, 100.0);
}

TEST(DoubleDouble, ExpEdges) {
  EXPECT_EQ(to_double(exp(dd(0.0))), 1.0);
  EXPECT_EQ(to_double(exp(dd(-800.0))), 0.0);
  EXPECT_TRUE(std::isinf(to_double(exp(dd(800.0)))));
  EXPECT_TRUE(std::isinf(to_double(log(dd(0.0)))));
  EXPECT_LT(to_double(log(dd(0.0))), 0.0);
  EXPECT_EQ(to_double(tanh(dd(50.0))), 1.0);
  EXPECT_EQ(to_double(tanh(dd(-50.0))), -1.0);
}

}  // namespace
}  // namespace dcp::oracle
