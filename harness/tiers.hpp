// tiers.hpp — the names of the oracle's tiers (fast: double-double, certify: MPFR) and of the
// bound's tiers that decide pass (sound: over it is FAILED; statistical: over it is SUSPECT, which
// fails too), as flags, keywords and reports spell them: one table each (gpu/kernels/names.hpp).
//
//   parse_tier("certify") == oracle::Tier::certify;
//   bound_name(props::BoundTier::sound) == "sound";
//   tier_names() == {"fast", "certify"};  // a flag's accepted values
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/kernels/names.hpp"
#include "oracle/attention.hpp"
#include "properties/suite.hpp"

namespace dcp::harness {

inline constexpr gpu::EnumName<oracle::Tier> kTierNames[] = {{oracle::Tier::fast, "fast"},
                                                             {oracle::Tier::certify, "certify"}};
inline constexpr gpu::EnumName<props::BoundTier> kBoundNames[] = {
    {props::BoundTier::sound, "sound"}, {props::BoundTier::statistical, "statistical"}};

constexpr std::string_view tier_name(oracle::Tier t) { return gpu::name_in(kTierNames, t); }
constexpr std::optional<oracle::Tier> parse_tier(std::string_view s) {
  return gpu::parse_in(kTierNames, s);
}
constexpr std::string_view bound_name(props::BoundTier b) { return gpu::name_in(kBoundNames, b); }
constexpr std::optional<props::BoundTier> parse_bound(std::string_view s) {
  return gpu::parse_in(kBoundNames, s);
}

// A table's names, in order: a flag's accepted values.
template <class E, size_t K>
std::vector<std::string> name_list(const gpu::EnumName<E> (&table)[K]) {
  std::vector<std::string> out;
  for (const gpu::EnumName<E>& n : table) out.emplace_back(n.name);
  return out;
}
inline std::vector<std::string> tier_names() { return name_list(kTierNames); }
inline std::vector<std::string> bound_names() { return name_list(kBoundNames); }

}  // namespace dcp::harness
