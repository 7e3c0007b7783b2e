// merge.hpp — the LSE merge of partial attention results, as the production path computes it.
//
// A partial is (O [Dv], L) with L in the kernel's LSE base. Merging partials i:
//   M = max_i L_i,  w_i = base^(L_i - M),  O = sum_i w_i O_i / sum_i w_i,  L = M + log_base(sum
//   w_i)
// computed pairwise on running states (m, z, n): m the running max (base units), z the sum of
// weights relative to m, n [Dv] the weighted sum of outputs relative to m. The empty partial
// (L = -inf) has weight exactly 0 and never produces NaN, even when every partial is empty.
//
// The order of the pairwise merges is a ReduceOrder: sequential (left to right), pairwise (a
// balanced tree) or random (a seeded random binary tree). Any order gives the same exact result;
// the fp32 results differ only by rounding.
//
//   MergeAcc acc = MergeAcc::from_partial(l_r);                 // per partial
//   merge_into(base, acc_a, n_a, acc_b, n_b, dv);               // a <- a (+) b (base: an
//                                                               // LseBase or an Exponential)
//   float l = finish(base, acc, n, dv);                         // n <- O, returns L
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "gpu/kernels/convention.hpp"
#include "gpu/kernels/hd.hpp"
#include "gpu/kernels/names.hpp"
#include "gpu/kernels/storage_format.hpp"

namespace dcp::gpu {

// The scalar part of a running merge state; its numerator n [Dv] lives beside it.
struct MergeAcc {
  float m = kEmptyLseF;  // running max LSE, base units; -inf: nothing merged yet
  float z = 0.0f;        // sum of base^(L_i - m)
  DCP_HD static MergeAcc from_partial(float lse) {
    return is_empty_lse(lse) ? MergeAcc{} : MergeAcc{lse, 1.0f};
  }
};

// a (+)= b. n_a, n_b: the states' numerators [dv]. A side that is empty contributes weight 0
// (its numerator is not read, so a NaN there cannot leak).
DCP_HD inline void merge_into(Exponential base, MergeAcc& a, float* n_a, const MergeAcc& b,
                              const float* n_b, int64_t dv) {
  if (is_empty_lse(b.m)) return;
  if (is_empty_lse(a.m)) {
    a = b;
    for (int64_t i = 0; i < dv; ++i) n_a[i] = n_b[i];
    return;
  }
  const float m = a.m > b.m ? a.m : b.m;
  const float wa = pow_base(base, a.m - m), wb = pow_base(base, b.m - m);
  a.z = a.z * wa + b.z * wb;
  for (int64_t i = 0; i < dv; ++i) n_a[i] = n_a[i] * wa + n_b[i] * wb;
  a.m = m;
}

// Turns a state into its output: n <- n / z (0 when empty), returns L = m + log_base(z).
DCP_HD inline float finish(Exponential base, const MergeAcc& a, float* n, int64_t dv) {
  if (is_empty_lse(a.m)) {
    for (int64_t i = 0; i < dv; ++i) n[i] = 0.0f;
    return kEmptyLseF;
  }
  for (int64_t i = 0; i < dv; ++i) n[i] = n[i] / a.z;
  return a.m + log_base(base.base, a.z);
}

enum class ReduceOrder { sequential, pairwise, random };

inline constexpr EnumName<ReduceOrder> kReduceOrderNames[] = {
    {ReduceOrder::sequential, "seq", "sequential"},
    {ReduceOrder::pairwise, "pair", "pairwise"},
    {ReduceOrder::random, "rand", "random"}};
inline std::string_view reduce_order_name(ReduceOrder o) { return name_in(kReduceOrderNames, o); }
inline std::optional<ReduceOrder> parse_reduce_order(std::string_view s) {
  return parse_in(kReduceOrderNames, s);
}

// How a reduce-scatter sums the N blocks it receives: the tree of its adds (reduce_slots) and the
// format every partial sum is rounded to (f32: fp32 adds; bf16: a bf16 reduce-scatter's).
struct SumSpec {
  ReduceOrder order = ReduceOrder::sequential;
  uint64_t seed = 0;  // the random order's
  StorageFormat accum = StorageFormat::f32;
};

// Calls step(dst, src) — "fold slot src into slot dst" — n - 1 times so that n slots end up in
// one, following the order; returns the slot holding the result (0 when n <= 1).
template <class Step>
int64_t reduce_slots(int64_t n, ReduceOrder order, uint64_t seed, Step&& step) {
  if (n <= 1) return 0;
  switch (order) {
    case ReduceOrder::sequential:
      for (int64_t i = 1; i < n; ++i) step(0, i);
      return 0;
    case ReduceOrder::pairwise:
      for (int64_t stride = 1; stride < n; stride *= 2)
        for (int64_t i = 0; i + stride < n; i += 2 * stride) step(i, i + stride);
      return 0;
    case ReduceOrder::random: {
      std::mt19937_64 rng(seed);
      std::vector<int64_t> live(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) live[static_cast<size_t>(i)] = i;
      while (live.size() > 1) {
        std::uniform_int_distribution<size_t> pick(0, live.size() - 1);
        const size_t a = pick(rng);
        size_t b = pick(rng);
        while (b == a) b = pick(rng);
        step(live[a], live[b]);  // which operand is the destination is random too
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(b));
      }
      return live[0];
    }
  }
  return 0;
}

}  // namespace dcp::gpu
