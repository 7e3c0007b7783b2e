// dd.hpp — double-double arithmetic: the oracle's fast extended-precision tier.
//
// A dd value is the unevaluated sum hi + lo with |lo| <= ulp(hi)/2, about 106 significand bits
// (unit roundoff u_dd ~ 2^-106, Dekker 1971; Hida, Li & Bailey 2001). Sums and products are
// built from error-free transformations:
//   two_sum(a, b)  = (s, e) with s = fl(a + b) and s + e == a + b exactly     (Knuth, 6 flops)
//   two_prod(a, b) = (p, e) with p = fl(a * b) and p + e == a * b exactly     (one FMA)
// exp/expm1/log/tanh below are accurate to a few u_dd relative (exp, expm1, tanh) or absolute
// (log) for the arguments attention produces; see docs/oracle.md for the derivations.
//
//   dd x = dd(1.0) / dd(3.0);
//   dd y = exp(x) - dd(1.0);       // ~32 correct digits
//   double d = to_double(y);
//
// The build uses strict ISO C++ (-ffp-contract=off), so no compiler contraction perturbs the
// error-free transformations.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>

namespace dcp::oracle {

struct dd {
  double hi = 0.0;  // the value rounded to double
  double lo = 0.0;  // the rounding error of hi: hi + lo is the value, |lo| <= ulp(hi) / 2

  constexpr dd() = default;
  constexpr dd(double h) : hi(h), lo(0.0) {}  // NOLINT: exact widening, implicit by design
  constexpr dd(double h, double l) : hi(h), lo(l) {}
};

// --- error-free transformations ------------------------------------------------------------

inline dd two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  const double e = (a - (s - bb)) + (b - bb);
  return {s, e};
}

// Requires |a| >= |b| (or a == 0).
inline dd fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}

inline dd two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}

// --- arithmetic ------------------------------------------------------------------------------

inline dd operator-(const dd& a) { return {-a.hi, -a.lo}; }

// Accurate addition (the "IEEE" variant): error <= 3 u_dd |a + b|.
inline dd operator+(const dd& a, const dd& b) {
  dd s = two_sum(a.hi, b.hi);
  const dd t = two_sum(a.lo, b.lo);
  s.lo += t.hi;
  s = fast_two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return fast_two_sum(s.hi, s.lo);
}

inline dd operator+(const dd& a, double b) {
  dd s = two_sum(a.hi, b);
  s.lo += a.lo;
  return fast_two_sum(s.hi, s.lo);
}

inline dd operator-(const dd& a, const dd& b) { return a + (-b); }
inline dd operator-(const dd& a, double b) { return a + (-b); }

inline dd operator*(const dd& a, const dd& b) {
  dd p = two_prod(a.hi, b.hi);
  p.lo += a.hi * b.lo + a.lo * b.hi;
  return fast_two_sum(p.hi, p.lo);
}

inline dd operator*(const dd& a, double b) {
  dd p = two_prod(a.hi, b);
  p.lo += a.lo * b;
  return fast_two_sum(p.hi, p.lo);
}

inline dd operator/(const dd& a, const dd& b) {
  const double q1 = a.hi / b.hi;
  dd r = a - b * q1;
  const double q2 = r.hi / b.hi;
  r = r - b * q2;
  const double q3 = r.hi / b.hi;
  return fast_two_sum(q1, q2) + q3;
}

inline dd& operator+=(dd& a, const dd& b) { return a = a + b; }
inline dd& operator+=(dd& a, double b) { return a = a + b; }
inline dd& operator-=(dd& a, const dd& b) { return a = a - b; }
inline dd& operator*=(dd& a, const dd& b) { return a = a * b; }
inline dd& operator/=(dd& a, const dd& b) { return a = a / b; }

inline bool operator<(const dd& a, const dd& b) {
  return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}
inline bool operator>(const dd& a, const dd& b) { return b < a; }
inline bool operator<=(const dd& a, const dd& b) { return !(b < a); }
inline bool operator>=(const dd& a, const dd& b) { return !(a < b); }
inline bool operator==(const dd& a, const dd& b) { return a.hi == b.hi && a.lo == b.lo; }

inline double to_double(const dd& a) { return a.hi + a.lo; }
inline dd abs(const dd& a) { return a.hi < 0.0 || (a.hi == 0.0 && a.lo < 0.0) ? -a : a; }
inline dd ldexp(const dd& a, int e) { return {std::ldexp(a.hi, e), std::ldexp(a.lo, e)}; }
inline bool isfinite(const dd& a) { return std::isfinite(a.hi); }

inline dd sqrt(const dd& a) {
  if (a.hi <= 0.0) return dd(std::sqrt(a.hi));
  const double x = std::sqrt(a.hi);  // one Newton step doubles the correct bits
  const dd x2 = two_prod(x, x);
  return fast_two_sum(x, to_double(a - x2) / (2.0 * x));
}

// --- constants (each the nearest dd, computed at 400 bits) ----------------------------------

inline constexpr dd kDdLn2{0.6931471805599453094, 2.3190468138462996e-17};
// ln 2 split as hi + mid + lo where hi has 32 significant bits, so k * hi is exact for |k| < 2^21;
// used for the argument reduction in exp.
inline constexpr double kLn2Hi = 0.6931471803691238;  // floor(ln2 * 2^32) / 2^32
inline constexpr double kLn2Mid = 1.9082149292705877e-10;
inline constexpr double kLn2Lo = 1.1612227229362532e-26;  // ln2 - hi - mid, rounded
inline constexpr dd kDdLog2e{1.4426950408889634, 2.0355273740931033e-17};

// 1/k! for k = 2 .. 11, each the nearest dd (from the exact rationals: within 2^-106 relative).
inline constexpr dd kInvFactorial[] = {dd(0.5, 0.0),                                        // 1/2!
                                       dd(0.16666666666666666, 9.25185853854297e-18),       // 1/3!
                                       dd(0.041666666666666664, 2.3129646346357427e-18),    // 1/4!
                                       dd(0.008333333333333333, 1.1564823173178714e-19),    // 1/5!
                                       dd(0.001388888888888889, -5.300543954373577e-20),    // 1/6!
                                       dd(0.0001984126984126984, 1.7209558293420705e-22),   // 1/7!
                                       dd(2.48015873015873e-05, 2.1511947866775882e-23),    // 1/8!
                                       dd(2.7557319223985893e-06, -1.858393274046472e-22),  // 1/9!
                                       dd(2.755731922398589e-07, 2.3767714622250297e-23),   // 1/10!
                                       dd(2.505210838544172e-08, -1.448814070935912e-24)};  // 1/11!

// expm1(r) for |r| <= 0.35: Taylor series on r / 2^kHalvings, then kHalvings doublings by
// expm1(2y) = expm1(y) * (2 + expm1(y)), which keeps the relative accuracy of small results.
// With |r / 2^6| <= 5.5e-3 the terms stop mattering at degree 11: 5.5e-3^12 / 12! < 2^-110.
namespace detail {
// 1/I! + y (1/(I+1)! + y (...)): the Horner steps written out (no loop), so that loops over many
// independent arguments vectorize (attention.cpp's fast tier).
template <int I>
inline dd horner_inv_factorial(const dd& y) {
  if constexpr (I + 1 == static_cast<int>(std::size(kInvFactorial))) {
    return kInvFactorial[I];
  } else {
    return kInvFactorial[I] + y * horner_inv_factorial<I + 1>(y);
  }
}
// expm1(2^N y) from e = expm1(y), by N doublings.
template <int N>
inline dd double_expm1(const dd& e) {
  if constexpr (N == 0) {
    return e;
  } else {
    return double_expm1<N - 1>(e * (e + 2.0));
  }
}
}  // namespace detail

[[gnu::always_inline]] inline dd expm1_reduced(const dd& r) {
  constexpr int kHalvings = 6;
  constexpr double kScale = 1.0 / (1 << kHalvings);  // a power of two: exactly ldexp(r, -6)
  const dd y(r.hi * kScale, r.lo * kScale);
  // expm1(y) = y + y^2 (1/2! + y (1/3! + ... + y / 11!)): Horner on the dd coefficients.
  return detail::double_expm1<kHalvings>(y + (y * y) * detail::horner_inv_factorial<0>(y));
}

// exp overflows double beyond ln(DBL_MAX) ~ 709.78; below -745.13 the result is under half the
// smallest subnormal.
inline constexpr double kExpOverflow = 709.78;
inline constexpr double kExpUnderflow = -745.2;

// exp(x) for kExpUnderflow <= x.hi <= kExpOverflow, without a branch, so that loops over many
// arguments vectorize (the fast tier, attention.cpp): k = x.hi / ln 2 rounded to an integer by the
// 1.5 * 2^52 trick (ties to even, as nearbyint), r = x - k ln2 with ln2 carried to ~130 bits
// (k * kLn2Hi is exact, the rest is two_prod exact), and the scaling by 2^k in two steps of
// in-range powers of two (the first exact, the second the one rounding ldexp would make, into the
// subnormals too).
[[gnu::always_inline]] inline dd exp_in_range(const dd& x) {
  constexpr double kRoundMagic = 6755399441055744.0;  // 1.5 * 2^52
  const double k = (x.hi / kDdLn2.hi + kRoundMagic) - kRoundMagic;
  dd r = x - dd(k * kLn2Hi);
  r = r - two_prod(k, kLn2Mid);
  r = r - dd(k * kLn2Lo);
  const dd e = expm1_reduced(r) + 1.0;
  const auto ki = static_cast<int64_t>(k);  // in [-1076, 1024]: each half a normal power of two
  const auto pow2 = [](int64_t j) {
    return std::bit_cast<double>(static_cast<uint64_t>(j + 1023) << 52);
  };
  const double s1 = pow2(ki / 2), s2 = pow2(ki - ki / 2);
  return {(e.hi * s1) * s2, (e.lo * s1) * s2};
}

inline dd exp(const dd& x) {
  if (std::isnan(x.hi)) return dd(x.hi);
  if (x.hi > kExpOverflow) return dd(std::numeric_limits<double>::infinity());
  if (x.hi < kExpUnderflow) return dd(0.0);
  return exp_in_range(x);
}

inline dd expm1(const dd& x) {
  constexpr double kDirect = 0.34;  // below this, the reduced series needs no k ln2 shift
  if (std::fabs(x.hi) <= kDirect) return expm1_reduced(x);
  return exp(x) - 1.0;
}

// Natural log: one Newton step y <- y + x exp(-y) - 1 from the double estimate; the error after
// it is ~ (2^-53)^2 / 2 plus the rounding of the step, i.e. a few u_dd absolute.
inline dd log(const dd& x) {
  if (x.hi <= 0.0) {
    return dd(x.hi == 0.0 ? -std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN());
  }
  if (std::isinf(x.hi)) return x;
  const dd y(std::log(x.hi));
  return y + x * exp(-y) - 1.0;
}

// tanh via expm1, accurate relative to |tanh x| for small x and absolute near +-1.
inline dd tanh(const dd& x) {
  constexpr double kSaturate = 40.0;  // 1 - tanh(40) = 2e-35 < 2^-110
  const bool neg = x.hi < 0.0;
  const dd a = neg ? -x : x;
  dd t;
  if (a.hi > kSaturate) {
    t = dd(1.0);
  } else {
    const dd e = expm1(a * 2.0);
    t = e / (e + 2.0);
  }
  return neg ? -t : t;
}

}  // namespace dcp::oracle
