// real.hpp — the oracle's two precision tiers and the operations the attention and merge
// templates need from a scalar type.
//
//   fast tier:    dd            (double-double, ~106 bits; oracle/dd.hpp)
//   certify tier: certify_real  (MPFR through Boost.Multiprecision, 266 bits = 80 decimal digits)
//
//   certify_real x = exp(certify_real(1) / 3);   double d = to_double(x);
// The certify tier cross-checks the fast tier on small cases (properties/test_tier_properties.cpp).
#pragma once

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <limits>

#include "oracle/convention.hpp"
#include "oracle/dd.hpp"

namespace dcp::oracle {

inline constexpr unsigned kCertifyDigits10 = 80;  // 80 digits = 266 bits >= the required 200
using certify_real =
    boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<kCertifyDigits10>,
                                  boost::multiprecision::et_off>;

inline double to_double(double x) { return x; }
inline double to_double(const certify_real& x) { return x.convert_to<double>(); }

// Scalar traits: constants and the exact multiply-accumulate of two input values.
template <class Real>
struct RealOps;

template <>
struct RealOps<double> {
  static double ln2() { return kLn2; }
  static double neg_inf() { return -std::numeric_limits<double>::infinity(); }
  static bool is_neg_inf(double x) { return x == neg_inf(); }
};

template <>
struct RealOps<dd> {
  static dd ln2() { return kDdLn2; }
  static dd neg_inf() { return dd(-std::numeric_limits<double>::infinity()); }
  static bool is_neg_inf(const dd& x) { return x.hi == -std::numeric_limits<double>::infinity(); }
};

template <>
struct RealOps<certify_real> {
  static certify_real ln2() { return boost::multiprecision::log(certify_real(2)); }
  static certify_real neg_inf() { return -std::numeric_limits<certify_real>::infinity(); }
  static bool is_neg_inf(const certify_real& x) { return boost::multiprecision::isinf(x) && x < 0; }
};

// Frees the calling thread's MPFR caches (constants such as ln 2), which MPFR keeps per thread
// and never releases on its own; worker threads that computed in certify_real call it last.
struct FreeMpfrThreadCache {
  void operator()() const { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }
};

}  // namespace dcp::oracle
