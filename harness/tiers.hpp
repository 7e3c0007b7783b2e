// tiers.hpp — the names of the oracle's tiers (fast: double-double, certify: MPFR) and of the
// bound's tiers that decide pass (sound: over it is FAILED; statistical: over it is SUSPECT, which
// fails too), as flags, keywords and reports spell them: one list each.
//
//   parse_tier("certify") == oracle::Tier::certify;   bound_name(props::BoundTier::sound) ==
//   "sound" tier_names() == {"fast", "certify"}                // for a flag's accepted values
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oracle/attention.hpp"
#include "properties/suite.hpp"

namespace dcp::harness {

inline constexpr std::pair<oracle::Tier, std::string_view> kTierNames[] = {
    {oracle::Tier::fast, "fast"}, {oracle::Tier::certify, "certify"}};
inline constexpr std::pair<props::BoundTier, std::string_view> kBoundNames[] = {
    {props::BoundTier::sound, "sound"}, {props::BoundTier::statistical, "statistical"}};

namespace detail {
template <class E, size_t K>
constexpr std::string_view name_in(const std::pair<E, std::string_view> (&table)[K], E v) {
  for (const auto& [e, name] : table)
    if (e == v) return name;
  return "?";
}
template <class E, size_t K>
constexpr std::optional<E> parse_in(const std::pair<E, std::string_view> (&table)[K],
                                    std::string_view s) {
  for (const auto& [e, name] : table)
    if (name == s) return e;
  return std::nullopt;
}
template <class E, size_t K>
std::vector<std::string> names_in(const std::pair<E, std::string_view> (&table)[K]) {
  std::vector<std::string> out;
  for (const auto& [e, name] : table) out.emplace_back(name);
  return out;
}
}  // namespace detail

constexpr std::string_view tier_name(oracle::Tier t) { return detail::name_in(kTierNames, t); }
constexpr std::optional<oracle::Tier> parse_tier(std::string_view s) {
  return detail::parse_in(kTierNames, s);
}
inline std::vector<std::string> tier_names() { return detail::names_in(kTierNames); }

constexpr std::string_view bound_name(props::BoundTier b) {
  return detail::name_in(kBoundNames, b);
}
constexpr std::optional<props::BoundTier> parse_bound(std::string_view s) {
  return detail::parse_in(kBoundNames, s);
}
inline std::vector<std::string> bound_names() { return detail::names_in(kBoundNames); }

}  // namespace dcp::harness
