// agreement.hpp — how many bits two extended-precision computations of one case agree to.
//
// Used to cross-check the fast tier against the certify tier, and merged shards against full
// attention. Each row is measured against its condition-aware scale: an absolute logit error e
// moves the LSE by at most e and O_i by at most 2 e max_j |v_ji|, and an extended-precision
// logit carries an error proportional to max(1, |s|). So O_i is measured against
// max_j |v_ji| * max(1, max_j |s_j|) and the LSE (natural units) against max(1, max_j |s_j|),
// j over the row's visible keys and the sink. Rows that are empty in either must be empty in
// both, with O exactly 0. The result is the minimum over elements, capped at kMaxAgreementBits.
//
//   auto fast = attend_rows<dd>(c, nullptr, true);
//   auto cert = attend_rows<certify_real>(c, nullptr, true);
//   double bits = agreement_bits(c, fast, cert);     // >= 100 expected on small cases
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "oracle/attention.hpp"
#include "oracle/real.hpp"

namespace dcp::oracle {

inline constexpr double kMaxAgreementBits = 400.0;

// Per-row scales (o_scale, lse_scale) as described above, row-major over (t, h).
std::vector<std::pair<double, double>> agreement_scales(const Case& c);

// A value of any tier as certify_real, exactly (a dd is hi + lo).
inline certify_real as_certify(double x) { return certify_real(x); }
inline certify_real as_certify(const dd& x) { return certify_real(x.hi) + certify_real(x.lo); }
inline certify_real as_certify(const certify_real& x) { return x; }

template <class RealA, class RealB>
double agreement_bits(const Case& c, const std::vector<MergeState<RealA>>& a,
                      const std::vector<MergeState<RealB>>& b) {
  const auto scales = agreement_scales(c);
  double bits = kMaxAgreementBits;
  auto take = [&](const certify_real& diff, double scale) {
    const double d = to_double(abs(diff));
    if (d == 0.0) return;
    bits = std::min(bits, std::isfinite(d) ? -std::log2(d / scale) : 0.0);
  };
  for (size_t r = 0; r < a.size(); ++r) {
    const auto oa = a[r].output();
    const auto ob = b[r].output();
    if (a[r].empty() || b[r].empty()) {
      if (a[r].empty() != b[r].empty()) bits = 0.0;
      continue;
    }
    take(as_certify(oa.lse) - as_certify(ob.lse), scales[r].second);
    for (size_t i = 0; i < oa.o.size(); ++i) {
      take(as_certify(oa.o[i]) - as_certify(ob.o[i]), scales[r].first);
    }
  }
  return bits;
}

}  // namespace dcp::oracle
