// names.hpp — an enum's names in one table: the name it is printed as, and the other spellings a
// parser accepts, so that printing and parsing cannot disagree and a new value is one row.
//
//   inline constexpr EnumName<ReduceOrder> kReduceOrderNames[] = {
//       {ReduceOrder::sequential, "seq", "sequential"}, ...};
//   name_in(kReduceOrderNames, ReduceOrder::pairwise);    // "pair"
//   parse_in(kReduceOrderNames, "pairwise");              // ReduceOrder::pairwise
//   names_in(kReduceOrderNames);                          // "seq, pair or rand" (refusals)
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dcp::gpu {

template <class E>
struct EnumName {
  E value;
  std::string_view name;                     // printed, and parsed
  std::string_view alias = {}, alias2 = {};  // also parsed
};

template <class E, size_t K>
constexpr std::string_view name_in(const EnumName<E> (&table)[K], E v) {
  for (const EnumName<E>& n : table)
    if (n.value == v) return n.name;
  return "?";
}

template <class E, size_t K>
constexpr std::optional<E> parse_in(const EnumName<E> (&table)[K], std::string_view s) {
  for (const EnumName<E>& n : table)
    if (!s.empty() && (s == n.name || s == n.alias || s == n.alias2)) return n.value;
  return std::nullopt;
}

// The printed names of the values that pass `keep`, "a, b or c", in the table's order.
template <class E, size_t K, class Keep>
std::string names_in(const EnumName<E> (&table)[K], Keep keep) {
  size_t left = 0;
  for (const EnumName<E>& n : table) left += keep(n.value) ? 1 : 0;
  std::string out;
  for (const EnumName<E>& n : table) {
    if (!keep(n.value)) continue;
    --left;
    out += std::string(out.empty() ? "" : left == 0 ? " or " : ", ") + std::string(n.name);
  }
  return out;
}
template <class E, size_t K>
std::string names_in(const EnumName<E> (&table)[K]) {
  return names_in(table, [](E) { return true; });
}

}  // namespace dcp::gpu
