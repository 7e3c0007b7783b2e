// convention.hpp — the three conventions every part of the suite must agree on, in one place.
//
// 1. LSE base. An LSE is ln Z ("base e") or log2 Z ("base 2"), where Z is the softmax
//    denominator. Every tensor or value that holds an LSE says which (LseBase). Merging must use
//    the matching pair: exp/log for base e, exp2/log2 for base 2. L2 = L * log2(e).
// 2. Empty shard. A shard (or a whole row) with no visible key and no sink has Z = 0: its LSE
//    is -inf and its output is 0 (never NaN). -inf is the identity of the merge; +inf and NaN
//    are never valid LSEs.
// 3. Sink. A per-head sink logit sigma_h adds exp(sigma_h) to the denominator Z of the whole
//    group exactly once, and nothing to the numerator. A sharded computation counts it in
//    exactly one place (one rank, or the merge), never per rank.
//
//   LseBase b = LseBase::two;
//   double l2 = lse_from_natural(b, l_e);    // l_e * log2(e)
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/text.hpp"

namespace dcp::oracle {

enum class LseBase { e, two };

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// log2(e) and ln(2) rounded to double; the oracle's high-precision tiers carry their own
// extended-precision values of these constants.
inline constexpr double kLog2e = 1.4426950408889634074;
inline constexpr double kLn2 = 0.69314718055994530942;

// The LSE of an empty shard or a fully masked row, in either base.
inline constexpr double kEmptyLse = kNegInf;

// Each base's name, printed and parsed (result metadata, the CLI's --lse-base), in one list.
struct LseBaseName {
  LseBase value;
  std::string_view name;
};
inline constexpr LseBaseName kLseBases[] = {{LseBase::e, "e"}, {LseBase::two, "2"}};

inline std::string_view lse_base_name(LseBase b) {
  for (const LseBaseName& n : kLseBases)
    if (n.value == b) return n.name;
  return "?";
}

inline std::optional<LseBase> parse_lse_base(std::string_view s) {
  for (const LseBaseName& n : kLseBases)
    if (n.name == s) return n.value;
  return std::nullopt;
}

// "e or 2": the names, for refusals and help.
inline std::string lse_base_names() {
  std::vector<std::string_view> names;
  for (const LseBaseName& n : kLseBases) names.push_back(n.name);
  return choices_text(names);
}

// Converts an LSE in natural-log units to the given base (empty stays empty).
inline double lse_from_natural(LseBase b, double l_e) {
  return b == LseBase::e ? l_e : l_e * kLog2e;
}
inline double lse_to_natural(LseBase b, double l) { return b == LseBase::e ? l : l * kLn2; }

}  // namespace dcp::oracle
