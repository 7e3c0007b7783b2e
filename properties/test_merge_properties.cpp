// The merge monoid (oracle/merge.hpp): its laws, and that sharded attention merged over any tree
// equals full attention for every variant; plus the two negatives the design names: averaging
// partials without LSE weights is wrong, and a gated linear recurrence does not merge.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

#include "oracle/agreement.hpp"
#include "oracle/compare.hpp"
#include "oracle/merge.hpp"
#include "oracle/tolerance.hpp"
#include "properties/rc_gen.hpp"

namespace dcp::props {
namespace {

using oracle::dd;
using oracle::LseBase;
using State = oracle::MergeState<dd>;

// A few dd roundings per combine, and exp of arguments up to |100| (error ~100 * 2^-106):
// two computations of one merge agree to well over 90 bits of their scale.
constexpr double kLawBits = 90.0;
constexpr int64_t kDv = 3;

// A partial (O_r, L_r) as a state; one in five is the empty shard (L = -inf, O = NaN garbage,
// which the convention says must never leak).
rc::Gen<State> gen_state(LseBase base) {
  return rc::gen::exec([base] {
    const bool empty = *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
    std::vector<dd> o(kDv);
    for (auto& x : o) x = dd(*rc::gen::inRange<int>(-1000, 1001) / 100.0);
    if (empty) {
      for (auto& x : o) x = dd(NAN);
      return State::from_partial(o, dd(-INFINITY), base);
    }
    const double l = *rc::gen::inRange<int>(-5000, 5001) / 100.0;
    return State::from_partial(o, dd(l), base);
  });
}

// Bits to which two states' outputs agree: O against the largest |O| of the inputs, the LSE
// against max(1, the largest |LSE| of the inputs).
double law_bits(const State& a, const State& b, const std::vector<State>& inputs) {
  double o_scale = 0.0, l_scale = 1.0;
  for (const State& s : inputs) {
    if (s.empty()) continue;
    const auto out = s.output();
    for (const dd& x : out.o) o_scale = std::max(o_scale, std::fabs(oracle::to_double(x)));
    l_scale = std::max(l_scale, std::fabs(oracle::to_double(out.lse)));
  }
  if (a.empty() || b.empty()) return a.empty() == b.empty() ? oracle::kMaxAgreementBits : 0.0;
  const auto oa = a.output(), ob = b.output();
  double bits = oracle::kMaxAgreementBits;
  auto take = [&](const dd& d, double scale) {
    const double e = std::fabs(oracle::to_double(d));
    if (e > 0.0) bits = std::min(bits, -std::log2(e / std::max(scale, 1e-300)));
  };
  take(oa.lse - ob.lse, l_scale);
  for (int i = 0; i < kDv; ++i) take(oa.o[i] - ob.o[i], o_scale);
  return bits;
}

RC_GTEST_PROP(MergeMonoid, Associative, ()) {
  const auto base = *rc::gen::element(LseBase::e, LseBase::two);
  const State a = *gen_state(base), b = *gen_state(base), c = *gen_state(base);
  const State left = combine(combine(a, b), c);
  const State right = combine(a, combine(b, c));
  RC_ASSERT(law_bits(left, right, {a, b, c}) >= kLawBits);
}

RC_GTEST_PROP(MergeMonoid, Commutative, ()) {
  const auto base = *rc::gen::element(LseBase::e, LseBase::two);
  const State a = *gen_state(base), b = *gen_state(base);
  RC_ASSERT(law_bits(combine(a, b), combine(b, a), {a, b}) >= kLawBits);
}

RC_GTEST_PROP(MergeMonoid, EmptyShardIsTheIdentityAndNeverLeaksNaN, ()) {
  const auto base = *rc::gen::element(LseBase::e, LseBase::two);
  const State a = *gen_state(base);
  const State e = State::from_partial(std::vector<dd>(kDv, dd(NAN)), dd(-INFINITY), base);
  for (const State& r : {combine(a, e), combine(e, a)}) {
    RC_ASSERT(r.empty() == a.empty());
    const auto out = r.output();
    for (const dd& x : out.o) RC_ASSERT(!std::isnan(oracle::to_double(x)));
    if (!a.empty()) RC_ASSERT(law_bits(r, a, {a}) >= oracle::kMaxAgreementBits);
  }
  const auto empty_out = e.output();
  RC_ASSERT(oracle::to_double(empty_out.lse) == -INFINITY);
  for (const dd& x : empty_out.o) RC_ASSERT(oracle::to_double(x) == 0.0);
}

RC_GTEST_PROP(MergeMonoid, MaxShiftInvariant, ()) {
  // (m, z, n) and (m + d, z b^-d, n b^-d) are the same partial: merging either gives one result.
  const auto base = *rc::gen::element(LseBase::e, LseBase::two);
  const State a = *gen_state(base), b = *gen_state(base);
  RC_PRE(!a.empty());
  const double d = *rc::gen::inRange<int>(-3000, 3001) / 100.0;
  State shifted = a;
  shifted.m = a.m + dd(d);
  const dd f = a.pow_base(dd(-d));
  shifted.z = a.z * f;
  for (auto& x : shifted.n) x = x * f;
  RC_ASSERT(law_bits(combine(shifted, b), combine(a, b), {a, b}) >= kLawBits);
}

RC_GTEST_PROP(MergeMonoid, BaseTwoMergeEqualsBaseEMerge, ()) {
  // Merging base-2 LSEs with exp2/log2 equals merging the same partials in base e with exp/log.
  const int n = *rc::gen::inRange(1, 9);
  std::vector<State> e_states, two_states;
  for (int i = 0; i < n; ++i) {
    const State s = *gen_state(LseBase::e);
    e_states.push_back(s);
    two_states.push_back(s.in_base(LseBase::two));
  }
  const State e = reduce(e_states, oracle::ReductionTree::pairwise, 0, kDv, LseBase::e);
  const State two = reduce(two_states, oracle::ReductionTree::pairwise, 0, kDv, LseBase::two);
  RC_ASSERT(law_bits(two.in_base(LseBase::e), e, e_states) >= kLawBits);
}

// For every variant: cut the visible keys into random disjoint shards (some empty), put the sink
// on one of them, merge over a random tree, and compare with full attention.
RC_GTEST_PROP(MergeMonoid, ShardedAttentionMergesToFullAttention, ()) {
  SpecLimits lim{.max_head_dim = 24, .max_v_dim = 12, .max_seq = 120};
  const CaseSpec spec = *gen_case_spec(lim);
  const oracle::Case c = make_case(spec);
  const int64_t shards = *rc::gen::inRange<int64_t>(1, 9);
  const auto owner = *rc::gen::container<std::vector<int64_t>>(
      static_cast<size_t>(c.seq()), rc::gen::inRange<int64_t>(0, shards));
  const int64_t sink_shard = *rc::gen::inRange<int64_t>(0, shards);
  const auto tree =
      *rc::gen::element(oracle::ReductionTree::sequential, oracle::ReductionTree::pairwise,
                        oracle::ReductionTree::random);
  const uint64_t tree_seed = *rc::gen::arbitrary<uint64_t>();

  const auto full = oracle::attend_rows<dd>(c, nullptr, true);
  std::vector<std::vector<State>> per_shard;
  for (int64_t r = 0; r < shards; ++r) {
    per_shard.push_back(oracle::attend_rows<dd>(
        c, [&](int64_t p) { return owner[p] == r; }, r == sink_shard));
  }
  std::vector<State> merged(full.size());
  for (size_t x = 0; x < full.size(); ++x) {
    std::vector<State> parts;
    for (const auto& s : per_shard) parts.push_back(s[x]);
    merged[x] = reduce(parts, tree, tree_seed, c.v_dim, LseBase::e);
  }
  const double bits = oracle::agreement_bits(c, merged, full);
  RC_LOG() << describe(spec) << " shards=" << shards << "\nagreement " << bits << " bits\n";
  RC_ASSERT(bits >= kLawBits);
}

// Negative: the unweighted mean of partial outputs is not the merge. Two shards, one token each,
// v = 1 and v = 0 (Dv = 1), logits s1 and s0 with |s1 - s0| >= 1: each shard's O_r is exactly
// its v, so the mean is 1/2 whatever the logits, while the truth is sigmoid(s1 - s0), at least
// 0.23 away. The derived fp32 bound (about 1e-6 here) rejects the mean on every such case.
RC_GTEST_PROP(MergeNegatives, UnweightedMeanOfPartialsIsWrong, ()) {
  const int gap_hundredths = *rc::gen::inRange(100, 1001) * *rc::gen::element(-1, 1);
  oracle::Case c;
  c.q = oracle::Tensor<double>({1, 1, 1}, 1.0);
  c.k = oracle::Tensor<double>({2, 1, 1});
  c.k.data = {0.0, oracle::round_to(oracle::DType::f32, gap_hundredths / 100.0)};
  c.v = oracle::Tensor<double>({2, 1, 1});
  c.v.data = {0.0, 1.0};
  c.v_dim = 1;
  c.scale = 1.0;
  auto ref = oracle::reference(c);
  RC_ASSERT(ref.ok());
  oracle::Arithmetic a;
  a.shards = 2;
  auto bound = oracle::derive_bound(c, *ref, a);
  RC_ASSERT(bound.ok());
  oracle::Tensor<double> mean_o({1, 1, 1}, 0.5);
  // Give the mean its best chance: the true LSE.
  const auto cmp = oracle::compare(mean_o, ref->lse, *ref, *bound);
  RC_ASSERT(cmp.ok());
  RC_LOG() << cmp->summary() << "\n";
  RC_ASSERT(!cmp->pass());
  RC_ASSERT(std::fabs(ref->o.data[0] - 0.5) >= 0.23);
}

// Negative: a gated linear recurrence h_t = a_t h_{t-1} + k_t v_t (the state-space / linear-
// attention family) does not merge by adding per-shard states. With positive terms and gates in
// (0, 1), a key whose later neighbours live on other ranks keeps a larger local decay factor than
// its global one, so the merged state is strictly larger than the true state.
RC_GTEST_PROP(MergeNegatives, GatedLinearRecurrenceDoesNotMerge, ()) {
  const int64_t S = *rc::gen::inRange<int64_t>(2, 64);
  const int64_t N = *rc::gen::inRange<int64_t>(2, 9);
  std::vector<double> gate(S), kv(S);
  for (int64_t t = 0; t < S; ++t) {
    gate[t] = *rc::gen::inRange(50, 100) / 100.0;  // in [0.5, 0.99]
    kv[t] = *rc::gen::inRange(1, 100) / 10.0;      // > 0
  }
  double full = 0.0;
  for (int64_t t = 0; t < S; ++t) full = gate[t] * full + kv[t];
  double merged = 0.0;
  for (int64_t r = 0; r < N; ++r) {
    double h = 0.0;
    for (int64_t t = r; t < S; t += N) h = gate[t] * h + kv[t];  // round-robin owner t mod N
    merged += h;
  }
  RC_LOG() << "full " << full << " merged " << merged << "\n";
  RC_ASSERT(merged > full);
}

}  // namespace
}  // namespace dcp::props
