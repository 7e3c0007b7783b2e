// compare.hpp — checks computed attention against the oracle's reference within derived bounds.
//
// Hygiene rules (docs/tolerances.md, "Comparing"): shapes must match; NaN anywhere fails; where
// the reference LSE is -inf (nothing visible, no sink) the LSE must be -inf and O exactly 0;
// a finite reference never accepts an infinite result; every element is judged against its own
// bound and the report names the worst element with got / expected / bound.
//
//   Expected<Comparison> cmp = compare(o, lse, ref, bound);
//   std::cout << cmp->summary();   // "O: max err/bound 0.013 at (t=0, h=3, i=17) ..."
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "oracle/attention.hpp"
#include "oracle/status.hpp"
#include "oracle/tensor.hpp"
#include "oracle/tolerance.hpp"

namespace dcp::oracle {

struct Worst {
  std::array<int64_t, 3> index{-1, -1, -1};  // (t, h, i) for O; (t, h, -1) for LSE
  double got = 0.0, expected = 0.0, error = 0.0, bound = 0.0;
  double ratio = 0.0;  // error / bound; inf when bound is 0 and error is not, or non-finite
};

// Each element is judged at both tiers (docs/tolerances.md §10): against the sound bound
// (violations: FAILED) and against the statistical one (suspects, a superset of the violations).
struct Comparison {
  int64_t o_elements = 0, o_violations = 0;
  int64_t lse_elements = 0, lse_violations = 0;
  Worst o_worst, lse_worst;
  int64_t o_suspects = 0, lse_suspects = 0;  // elements over the statistical bound
  Worst o_worst_stat, lse_worst_stat;        // largest error / statistical bound
  bool pass() const { return o_violations == 0 && lse_violations == 0; }
  bool pass_statistical() const { return o_suspects == 0 && lse_suspects == 0; }
  double max_ratio() const { return std::max(o_worst.ratio, lse_worst.ratio); }
  double max_stat_ratio() const { return std::max(o_worst_stat.ratio, lse_worst_stat.ratio); }
  std::string summary() const;              // the sound tier
  std::string statistical_summary() const;  // the statistical tier
};

// o_got [T, Hq, Dv], lse_got [T, Hq] in ref.base. Fails only on mismatched shapes. A bound
// without a statistical tier (o_stat empty) is its own.
Expected<Comparison> compare(const Tensor<double>& o_got, const Tensor<double>& lse_got,
                             const Attention& ref, const Bound& bound);

}  // namespace dcp::oracle
