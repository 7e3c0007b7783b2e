// merge.hpp — the merge monoid of partial attention results.
//
// A MergeState summarizes the keys of one shard for one (token, head) row:
//   m  the largest logit seen (in the state's LSE base units), -inf for the empty shard
//   z  sum over the shard's keys of base^(s_j - m)              (the shifted denominator)
//   n  sum over the shard's keys of base^(s_j - m) * v_j, [Dv]   (the shifted numerator)
// so that the shard's output is O = n / z and its LSE is L = m + log_base(z). Combining two
// states rescales both to the larger m and adds: this is associative and commutative up to
// rounding, the empty state (m = -inf, z = 0, n = 0) is its identity, and any reduction tree
// gives the same exact result (docs/case-model.md, "The merge").
//
//   auto a = MergeState<dd>::from_partial(o_r, l_r, LseBase::e);
//   auto all = reduce(states, ReductionTree::pairwise);   // or sequential / random(seed)
//   auto [o, l] = all.output();
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "oracle/convention.hpp"
#include "oracle/real.hpp"

namespace dcp::oracle {

template <class Real>
struct MergeState {
  using Ops = RealOps<Real>;
  LseBase base = LseBase::e;  // units of m (and of the LSE this state reports)
  Real m = Ops::neg_inf();    // running max logit, base units; -inf: empty
  Real z = Real(0);           // sum of base^(s - m)
  std::vector<Real> n;        // [Dv] sum of base^(s - m) * v

  static MergeState identity(int64_t dv, LseBase b) {
    MergeState s;
    s.base = b;
    s.n.assign(dv, Real(0));
    return s;
  }
  // A partial (O_r [Dv], L_r in base b) as a state: m = L_r, z = 1, n = O_r. L_r = -inf is the
  // empty shard, whatever O_r holds.
  static MergeState from_partial(const std::vector<Real>& o, const Real& lse, LseBase b) {
    MergeState s = identity(static_cast<int64_t>(o.size()), b);
    if (Ops::is_neg_inf(lse)) return s;
    s.m = lse;
    s.z = Real(1);
    s.n = o;
    return s;
  }
  bool empty() const { return Ops::is_neg_inf(m); }

  // base^x and log_base(x) in Real precision.
  Real pow_base(const Real& x) const {
    using std::exp;
    return base == LseBase::e ? exp(x) : exp(x * Ops::ln2());
  }
  Real log_base(const Real& x) const {
    using std::log;
    return base == LseBase::e ? log(x) : log(x) / Ops::ln2();
  }

  // O = n / z and L = m + log_base(z); the empty state gives O = 0, L = -inf.
  struct Output {
    std::vector<Real> o;
    Real lse;
  };
  Output output() const {
    Output out{std::vector<Real>(n.size(), Real(0)), Ops::neg_inf()};
    if (empty()) return out;
    for (size_t i = 0; i < n.size(); ++i) out.o[i] = n[i] / z;
    out.lse = m + log_base(z);
    return out;
  }

  // The same state expressed in the other base (m scaled by log2(e) or ln 2; z, n unchanged).
  MergeState in_base(LseBase b) const {
    MergeState s = *this;
    s.base = b;
    if (b == base || empty()) return s;
    s.m = b == LseBase::two ? m / Ops::ln2() : m * Ops::ln2();
    return s;
  }
};

// a (+) b: rescale both to max(m_a, m_b) and add. Both must share base and Dv.
template <class Real>
MergeState<Real> combine(const MergeState<Real>& a, const MergeState<Real>& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  MergeState<Real> r = a;
  r.m = a.m < b.m ? b.m : a.m;
  const Real sa = a.pow_base(a.m - r.m);
  const Real sb = a.pow_base(b.m - r.m);
  r.z = a.z * sa + b.z * sb;
  for (size_t i = 0; i < r.n.size(); ++i) r.n[i] = a.n[i] * sa + b.n[i] * sb;
  return r;
}

// The order in which N states are merged. random uses `seed` to build a uniformly shuffled
// binary tree: repeatedly combine two random entries of the working list.
enum class ReductionTree { sequential, pairwise, random };

template <class Real>
MergeState<Real> reduce(std::vector<MergeState<Real>> states, ReductionTree tree, uint64_t seed = 0,
                        int64_t dv = 0, LseBase base = LseBase::e) {
  if (states.empty()) return MergeState<Real>::identity(dv, base);
  switch (tree) {
    case ReductionTree::sequential: {
      MergeState<Real> acc = states[0];
      for (size_t i = 1; i < states.size(); ++i) acc = combine(acc, states[i]);
      return acc;
    }
    case ReductionTree::pairwise: {
      while (states.size() > 1) {
        std::vector<MergeState<Real>> next;
        for (size_t i = 0; i + 1 < states.size(); i += 2)
          next.push_back(combine(states[i], states[i + 1]));
        if (states.size() % 2) next.push_back(states.back());
        states = std::move(next);
      }
      return states[0];
    }
    case ReductionTree::random: {
      std::mt19937_64 rng(seed);
      while (states.size() > 1) {
        std::uniform_int_distribution<size_t> pick(0, states.size() - 1);
        const size_t i = pick(rng);
        size_t j = pick(rng);
        while (j == i) j = pick(rng);
        // Operand order is random too, so commutativity is exercised.
        MergeState<Real> c = combine(states[i], states[j]);
        states[std::min(i, j)] = std::move(c);
        states.erase(states.begin() + static_cast<std::ptrdiff_t>(std::max(i, j)));
      }
      return states[0];
    }
  }
  return states[0];
}

}  // namespace dcp::oracle
