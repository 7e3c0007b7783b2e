// The derived bounds (oracle/tolerance.hpp) from both sides, using the fp32 implementation model:
// soundness — every correct variant (any order, FMA, tile, exp2 folding, approximate intrinsics,
// P cast, output format, shard count and layout, ag_rs or a2a) is inside the bound on every case;
// sensitivity — each planted bug is outside it on ordinary random data, wherever the bug moves the
// output by more than twice the bound.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "oracle/compare.hpp"
#include "properties/rc_gen.hpp"
#include "properties/suite.hpp"

namespace dcp::props {
namespace {

// A correct variant of the model is inside the bound its claim gets (and gets one).
void check_within_bound(const CaseSpec& spec, const ModelConfig& m) {
  const oracle::Case c = make_case(spec);
  auto ref = oracle::reference(c);
  RC_ASSERT(ref.ok());
  auto bound = oracle::derive_bound(c, *ref, claim_of(m));
  RC_LOG() << describe(spec) << "\n" << describe(m) << "\n";
  if (!bound.ok()) RC_LOG() << bound.status().message() << "\n";
  RC_ASSERT(bound.ok());
  const ModelOutput out = run_fp32_model(c, m);
  auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
  RC_ASSERT(cmp.ok());
  RC_LOG() << cmp->summary() << "\n" << cmp->statistical_summary() << "\n";
  RC_ASSERT(cmp->pass());
  RC_ASSERT(cmp->pass_statistical());
}

RC_GTEST_PROP(ToleranceSoundness, EveryCorrectFp32VariantIsWithinTheBound, ()) {
  const CaseSpec spec = *gen_case_spec(SpecLimits{});
  check_within_bound(spec, *gen_model_config_for(spec));
}

// The largest |bugged - correct| / bound over the output's elements (O and LSE), against the
// sound bound or the statistical one.
double effect_over_bound(const ModelOutput& bugged, const ModelOutput& correct,
                         const oracle::Bound& bound, BoundTier tier = BoundTier::sound) {
  double worst = 0.0;
  auto scan = [&](const oracle::Tensor<double>& a, const oracle::Tensor<double>& b,
                  const oracle::Tensor<double>& bnd) {
    for (int64_t i = 0; i < a.numel(); ++i) {
      const size_t k = static_cast<size_t>(i);
      const double d = std::fabs(a.data[k] - b.data[k]);
      // A non-finite difference (an infinite or NaN LSE on one side) is an effect beyond any
      // bound.
      worst = std::max(worst, std::isfinite(d) ? d / bnd.data[k] : INFINITY);
    }
  };
  const bool stat = tier == BoundTier::statistical;
  scan(bugged.o, correct.o, stat ? bound.o_stat : bound.o);
  scan(bugged.lse, correct.lse, stat ? bound.lse_stat : bound.lse);
  return worst;
}

// Ordinary random data: N(0, 1) fp32 inputs, causal, no window or top-k, at least two keys per
// shard-able row, a sink when the bug is about sinks.
void check_bug_is_caught(Bug bug) {
  ModelConfig m;
  m.bug = bug;
  const bool needs_merge = bug == Bug::merge_base_mismatch || bug == Bug::merge_unweighted_mean ||
                           bug == Bug::sink_on_every_rank;
  m.shards = needs_merge ? *rc::gen::inRange<int64_t>(2, 9) : *rc::gen::inRange<int64_t>(1, 9);
  m.interleave = *rc::gen::inRange<int64_t>(1, 5);
  const CaseSpec s = draw_bug_case(m.shards, m.interleave,
                                   bug == Bug::sink_missing || bug == Bug::sink_on_every_rank);
  m.base2 = *rc::gen::arbitrary<bool>();
  m.merge = *rc::gen::element(Merge::ag_rs, Merge::a2a);
  m.seed = *rc::gen::arbitrary<uint64_t>();
  const oracle::Case c = make_case(s);
  auto ref = oracle::reference(c);
  RC_ASSERT(ref.ok());
  auto bound = oracle::derive_bound(c, *ref, claim_of(m));
  RC_ASSERT(bound.ok());
  const ModelOutput out = run_fp32_model(c, m);
  // A bug can be seen only where its effect exceeds the rounding a correct run may show. The
  // correct model is within the bound (soundness), so where the bugged and the correct model
  // differ by more than twice the bound the bugged one must fail; a case where the bug's effect
  // stays below that everywhere (an unweighted mean of partials whose weights happen to be
  // nearly equal) cannot be caught by any judge and is set aside.
  ModelConfig correct = m;
  correct.bug = Bug::none;
  const ModelOutput ok = run_fp32_model(c, correct);
  RC_PRE(effect_over_bound(out, ok, *bound) > 2.0);
  auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
  RC_ASSERT(cmp.ok());
  RC_LOG() << describe(s) << "\n" << describe(m) << "\n" << cmp->summary() << "\n";
  RC_ASSERT(!cmp->pass());
}

RC_GTEST_PROP(ToleranceSensitivity, DroppedTokenFails, ()) { check_bug_is_caught(Bug::drop_token); }
RC_GTEST_PROP(ToleranceSensitivity, DuplicatedTokenFails, ()) {
  check_bug_is_caught(Bug::duplicate_token);
}
RC_GTEST_PROP(ToleranceSensitivity, MergeWithWrongBaseFails, ()) {
  check_bug_is_caught(Bug::merge_base_mismatch);
}
RC_GTEST_PROP(ToleranceSensitivity, LseInWrongBaseFails, ()) {
  check_bug_is_caught(Bug::lse_out_wrong_base);
}
RC_GTEST_PROP(ToleranceSensitivity, MissingSinkFails, ()) {
  check_bug_is_caught(Bug::sink_missing);
}
RC_GTEST_PROP(ToleranceSensitivity, SinkOnEveryShardFails, ()) {
  check_bug_is_caught(Bug::sink_on_every_rank);
}
RC_GTEST_PROP(ToleranceSensitivity, UnweightedMeanFails, ()) {
  check_bug_is_caught(Bug::merge_unweighted_mean);
}

// An arithmetic the claim leaves out is caught: `plant` gives the model a coarser arithmetic,
// `unclaim` takes its term out of the claim, and wherever that moves the output by more than twice
// the bound (of `tier`) the check must fail at that tier. So none of these terms can be dropped.
template <class Plant, class Unclaim>
void check_unclaimed_is_caught(int64_t min_shards, int64_t max_shards, Plant plant, Unclaim unclaim,
                               BoundTier tier = BoundTier::sound) {
  ModelConfig m;
  m.shards = *rc::gen::inRange<int64_t>(min_shards, max_shards + 1);
  m.interleave = *rc::gen::inRange<int64_t>(1, 5);
  m.base2 = *rc::gen::arbitrary<bool>();
  m.merge = *rc::gen::element(Merge::ag_rs, Merge::a2a);
  m.seed = *rc::gen::arbitrary<uint64_t>();
  const ModelConfig exact = m;
  plant(m);
  const CaseSpec spec = draw_bug_case(m.shards, m.interleave, false);
  const oracle::Case c = make_case(spec);
  auto ref = oracle::reference(c);
  RC_ASSERT(ref.ok());
  oracle::Arithmetic unclaimed = claim_of(m);
  unclaim(unclaimed);
  auto bound = oracle::derive_bound(c, *ref, unclaimed);
  RC_ASSERT(bound.ok());
  const ModelOutput out = run_fp32_model(c, m);
  RC_PRE(effect_over_bound(out, run_fp32_model(c, exact), *bound, tier) > 2.0);
  auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
  RC_ASSERT(cmp.ok());
  RC_LOG() << describe(spec) << "\n"
           << describe(m) << "\n"
           << cmp->summary() << "\n"
           << cmp->statistical_summary() << "\n";
  const bool caught = tier == BoundTier::sound ? !cmp->pass() : !cmp->pass_statistical();
  RC_ASSERT(caught);
}

// A kernel whose own exp (or log) is 10^-3 off, every result low by all of it as a biased
// polynomial is: enough to move the LSE past a bound of ordinary fp32 rounding.
constexpr double kApprox = 1e-3;

RC_GTEST_PROP(ToleranceSensitivity, UnclaimedApproximateExpFails, ()) {
  check_unclaimed_is_caught(
      1, 8,
      [](ModelConfig& m) {
        m.exp_rel_err = kApprox;
        m.approx_systematic = true;
      },
      [](oracle::Arithmetic& a) { a.exp_rel_err.reset(); });
}
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedApproximateLogFails, ()) {
  check_unclaimed_is_caught(
      1, 8,
      [](ModelConfig& m) {
        m.log_rel_err = kApprox;
        m.approx_systematic = true;
      },
      [](oracle::Arithmetic& a) { a.log_rel_err.reset(); });
}
// A bf16 reduce-scatter (products and partial sums rounded to bf16) claimed as an fp32 one.
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedBf16MergeFails, ()) {
  check_unclaimed_is_caught(
      2, 4, [](ModelConfig& m) { m.merge_accum = oracle::DType::bf16; },
      [](oracle::Arithmetic& a) { a.merge_accum = oracle::DType::f32; });
}
// The merge's weight sum (the merged LSE's, a2a's denominator) in bf16, claimed as fp32 beside
// an fp32 sum of the outputs: merge_lse_accum cannot be left out.
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedBf16LseMergeFails, ()) {
  check_unclaimed_is_caught(
      2, 8, [](ModelConfig& m) { m.merge_lse_accum = oracle::DType::bf16; },
      [](oracle::Arithmetic& a) { a.merge_lse_accum = oracle::DType::f32; });
}
// An exponential of its own (the merge's, the rescales') 10^-3 off, every result low, claimed as
// the library's (its word at 2^-22): the word cannot be left out.
void check_unclaimed_own_exp(int64_t min_shards, int64_t max_shards,
                             std::optional<double> ModelConfig::*model,
                             std::optional<double> oracle::Arithmetic::*word) {
  check_unclaimed_is_caught(
      min_shards, max_shards,
      [model](ModelConfig& m) {
        m.*model = kApprox;
        m.approx_systematic = true;
      },
      [word](oracle::Arithmetic& a) { a.*word = 0x1p-22; });
}
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedApproximateMergeExpFails, ()) {
  check_unclaimed_own_exp(2, 8, &ModelConfig::merge_exp_rel_err,
                          &oracle::Arithmetic::merge_exp_rel_err);
}
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedApproximateRescaleExpFails, ()) {
  check_unclaimed_own_exp(1, 4, &ModelConfig::rescale_exp_rel_err,
                          &oracle::Arithmetic::rescale_exp_rel_err);
}
// Partials exchanged in bf16, claimed as fp32 ones.
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedBf16PartialsFail, ()) {
  check_unclaimed_is_caught(
      2, 8, [](ModelConfig& m) { m.partial = oracle::DType::bf16; },
      [](oracle::Arithmetic& a) { a.partial_o = oracle::DType::f32; });
}

// A claim term that cannot be dropped, on a fixed case: the model's output is inside the bound of
// its own claim (an expectation) and is counted when it leaves the bound of the claim `weaken`
// makes. Returns 1 when the weakened bound was violated.
template <class Weaken>
int violated_when_weakened(const oracle::Case& c, const ModelConfig& m, Weaken weaken) {
  auto ref = oracle::reference(c);
  if (!ref) {
    ADD_FAILURE() << ref.status().message();
    return 0;
  }
  const ModelOutput out = run_fp32_model(c, m);
  oracle::Arithmetic a = claim_of(m);
  for (bool weakened : {false, true}) {
    if (weakened) weaken(a);
    auto bound = oracle::derive_bound(c, *ref, a);
    if (!bound) {
      ADD_FAILURE() << bound.status().message();
      return 0;
    }
    auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
    if (!cmp) {
      ADD_FAILURE() << cmp.status().message();
      return 0;
    }
    if (weakened) return cmp->pass() ? 0 : 1;
    EXPECT_TRUE(cmp->pass()) << describe(m) << ": " << cmp->summary();
  }
  return 0;
}

// TF32 products (both operands rounded to 10 stored bits) claimed as fp32 ones.
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedTf32Fails, ()) {
  check_unclaimed_is_caught(
      1, 8, [](ModelConfig& m) { m.tf32 = true; }, [](oracle::Arithmetic& a) { a.tf32 = false; });
}

constexpr uint64_t kPairwiseSeeds = 20;

// Flush to zero: an f16 output in f16's subnormal range (below 2^-14) may become 0, which only
// the ftz claim admits. Values of about 10^-5 put O there; the kernel that flushes passes with
// the claim and fails without it.
TEST(ToleranceSensitivity, UnclaimedFlushToZeroFails) {
  // N(0, 1) values times this are mostly below 2^-14 = 6.1e-5, f16's smallest normal.
  constexpr double kIntoF16Subnormals = 1e-5;
  int violated = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    CaseSpec spec{.q_heads = 2, .seq = 64, .seed = seed};
    oracle::Case c = make_case(spec);
    for (double& v : c.v.data) v = static_cast<double>(static_cast<float>(v * kIntoF16Subnormals));
    ModelConfig m;
    m.out = oracle::DType::f16;
    m.ftz = true;
    m.seed = seed;
    violated += violated_when_weakened(c, m, [](oracle::Arithmetic& a) { a.ftz = false; });
  }
  RecordProperty("cases_violated_of_10", violated);
  EXPECT_GT(violated, 0) << "an unclaimed flush to zero was never caught";
}

// Partials joined two at a time in a chain over 16 ranks, each merge's state stored in f16 and
// the weights summed in bf16 (a cascade of 16-bit (O, LSE) states): inside the bound that claims
// it (merge_depth 15), and caught on some cases by the bound of one merge of f16 partials.
TEST(ToleranceSensitivity, UnclaimedPairwiseMergeFails) {
  int violated = 0;
  for (uint64_t seed = 1; seed <= kPairwiseSeeds; ++seed) {
    CaseSpec spec{.q_heads = 4, .seq = 256, .seed = seed};
    ModelConfig m;
    m.shards = 16;
    m.merge = Merge::pairwise;
    m.partial = oracle::DType::bf16;
    m.seed = seed;
    violated += violated_when_weakened(make_case(spec), m,
                                       [](oracle::Arithmetic& a) { a.merge_depth = 0; });
  }
  RecordProperty("cases_violated", violated);
  EXPECT_GT(violated, 0) << "a pairwise merge claimed as one merge was never caught";
}

// An fp8 or int8 cache (docs/tolerances.md §3, §4): the oracle takes stored value times scale as
// exact, and the kernel's folded scales cost one rounding each (by token: the K scale's product
// with the softmax scale per key, each V element's dequantizing product). Every correct variant on
// fp8 or int8 K/V with scales of every grain, fp8 P casts and fp8 outputs among them, gets a bound
// and is inside it (the general soundness property draws these too, more rarely).
RC_GTEST_PROP(ToleranceSoundness, Fp8CachesWithScalesAreWithinTheBound, ()) {
  SpecLimits lim;
  lim.max_seq = 120;
  CaseSpec spec = *gen_case_spec(lim);
  spec.kv_dtype = *rc::gen::elementOf(oracle::quantized_dtypes());  // fp8 and int8 codes
  spec.kv_scale = *rc::gen::element(KvScale::none, KvScale::per_tensor, KvScale::per_head,
                                    KvScale::per_token, KvScale::per_token_head);
  ModelConfig m = *gen_model_config_for(spec);
  m.p_cast = *rc::gen::element(std::optional<oracle::DType>(), std::optional(oracle::DType::bf16),
                               std::optional(oracle::DType::f8e4m3));
  check_within_bound(spec, m);
}

// An fp8 P cast on rows whose logits spread over tens of units (the `wide` style): many weights
// fall below E4M3's smallest normal 2^-6 (E5M2's 2^-14), where a cast loses up to half a
// subnormal step, not a relative u_p. This is the property that fails when the cast's subnormal
// floor (docs/tolerances.md §4) is left out of the bound.
RC_GTEST_PROP(ToleranceSoundness, Fp8PCastOfWideRowsIsWithinTheBound, ()) {
  SpecLimits lim;
  lim.max_seq = 64;
  CaseSpec spec = *gen_case_spec(lim);
  spec.values = ValueStyle::wide;
  // Many rows of several keys each: each row gives the floor a chance to be needed.
  spec.tokens = 3;
  spec.q_heads = 4 * spec.kv_heads;
  spec.seq = std::max<int64_t>(spec.seq, 8);
  ModelConfig m = *gen_model_config_for(spec);
  m.p_cast = *rc::gen::elementOf(fp8_dtypes<oracle::DType>());
  check_within_bound(spec, m);
}

// A kernel that rounds the dequantized keys and values to bf16 before its products (instead of
// folding the scales into the softmax scale and the output) is within the bound of its claim
// (kv_dequant bf16), and caught on an ordinary fp8 case without it: the term cannot be dropped.
TEST(ToleranceSensitivity, UnclaimedRoundingOfDequantizedFp8Fails) {
  int violated = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    CaseSpec spec{.q_heads = 2,
                  .head_dim = 32,
                  .v_dim = 16,
                  .seq = 64,
                  .kv_dtype = oracle::DType::f8e4m3,
                  .kv_scale = KvScale::per_head,
                  .seed = seed};
    const oracle::Case c = make_case(spec);
    ModelConfig m;
    m.seed = seed;
    auto ref = oracle::reference(c);
    ASSERT_TRUE(ref.ok());
    auto bound = oracle::derive_bound(c, *ref, claim_of(m));
    ASSERT_TRUE(bound.ok()) << bound.status().message();
    auto judged = [&](const ModelConfig& variant) {
      const ModelOutput out = run_fp32_model(c, variant);
      auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
      EXPECT_TRUE(cmp.ok());
      return cmp.ok() && cmp->pass();
    };
    EXPECT_TRUE(judged(m)) << describe(spec);
    m.dequantize_to = oracle::DType::bf16;
    violated += judged(m) ? 0 : 1;
    auto claimed = oracle::derive_bound(c, *ref, claim_of(m));
    ASSERT_TRUE(claimed.ok()) << claimed.status().message();
    auto cmp = oracle::compare(run_fp32_model(c, m).o, run_fp32_model(c, m).lse, *ref, *claimed);
    ASSERT_TRUE(cmp.ok());
    EXPECT_TRUE(cmp->pass() && cmp->pass_statistical()) << describe(spec);
  }
  RecordProperty("cases_violated_of_10", violated);
  EXPECT_GT(violated, 0) << "a bf16 rounding of the dequantized cache was never caught";
}

// The statistical tier's own terms (docs/tolerances.md §10) cannot be dropped either: a P cast
// to bf16, and an exp 10^-3 low on every result, left out of the claim, are SUSPECT (or FAILED)
// wherever they move the output by more than twice the statistical bound.
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedPCastIsSuspect, ()) {
  check_unclaimed_is_caught(
      1, 8, [](ModelConfig& m) { m.p_cast = oracle::DType::bf16; },
      [](oracle::Arithmetic& a) { a.p_cast.reset(); }, BoundTier::statistical);
}
RC_GTEST_PROP(ToleranceSensitivity, UnclaimedApproximateExpIsSuspect, ()) {
  check_unclaimed_is_caught(
      1, 8,
      [](ModelConfig& m) {
        m.exp_rel_err = kApprox;
        m.approx_systematic = true;
      },
      [](oracle::Arithmetic& a) { a.exp_rel_err.reset(); }, BoundTier::statistical);
}

// An exponential's mean and its spread (docs/tolerances.md §10), on rows of 4,096 keys where the
// spread's share of the LSE, lambda sqrt(sum_j P_j^2) of the exp's error, is a fifth of it. Errors
// drawn at random about a mean of zero, claimed so (exp_bias at the library's), are inside the
// statistical bound of the LSE, and so is a biased exp (every result low by 1e-2) claimed with its
// bias under a larger largest error; the biased exp claimed unbiased is SUSPECT. So neither the
// mean nor the spread can be left out; with a small mean the split is over twice tighter.
TEST(ToleranceSoundness, AnExpsMeanAndSpreadBoundTheLseOfLongRows) {
  // The planted exponential's relative error (the kernel's arithmetic, not a tolerance: every
  // verdict below is against the oracle's derived bounds). It moves the LSE of a random row by
  // about 1e-4, of a biased one by 1e-2.
  constexpr double kExpErr = 1e-2;
  struct Config {
    bool systematic;
    double claimed_err, claimed_bias;
    bool passes;
  };
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const CaseSpec spec{.q_heads = 2, .seq = 4096, .seed = seed};
    const oracle::Case c = make_case(spec);
    auto ref = oracle::reference(c);
    ASSERT_TRUE(ref.ok());
    for (const Config& k : {Config{false, kExpErr, 0.0, true}, Config{true, kExpErr, 0.0, false},
                            Config{true, 2.0 * kExpErr, kExpErr, true}}) {
      ModelConfig m;
      m.exp_rel_err = kExpErr;
      m.approx_systematic = k.systematic;
      m.rescale_exp_rel_err = 0.0;  // the rescales in the library's exp, as PyTorch's CPU kernel
      m.tile = 512;
      m.seed = seed;
      oracle::Arithmetic claim = claim_of(m);
      // Each claimed on top of the library's exp and the perturbation (2^-22), as claim_of does.
      claim.exp_rel_err = (1.0 + k.claimed_err) * (1.0 + 0x1p-22) - 1.0;
      claim.exp_bias = (1.0 + k.claimed_bias) * (1.0 + 0x1p-22) - 1.0;
      auto bound = oracle::derive_bound(c, *ref, claim);
      ASSERT_TRUE(bound.ok()) << bound.status().message();
      auto whole = claim;
      whole.exp_bias.reset();
      auto charged = oracle::derive_bound(c, *ref, whole);
      ASSERT_TRUE(charged.ok()) << charged.status().message();
      const ModelOutput out = run_fp32_model(c, m);
      auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
      ASSERT_TRUE(cmp.ok());
      EXPECT_TRUE(cmp->pass()) << describe(m) << ": " << cmp->summary();
      EXPECT_EQ(cmp->pass_statistical(), k.passes)
          << describe(m) << " claimed bias " << k.claimed_bias << ": "
          << cmp->statistical_summary();
      for (int64_t r = 0; k.claimed_bias < kExpErr && r < bound->lse_stat.numel(); ++r)
        EXPECT_LT(bound->lse_stat.data[static_cast<size_t>(r)],
                  0.5 * charged->lse_stat.data[static_cast<size_t>(r)]);
    }
  }
}

// An exp_bias at or above the exponential's largest error says nothing: the bounds of both tiers
// are those of the claim without it (no split, no extra event in the false-alarm count).
TEST(ToleranceSoundness, AnExpBiasAtItsLargestErrorChangesNothing) {
  const oracle::Case c = make_case(CaseSpec{.q_heads = 2, .seq = 512, .seed = 5});
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  ModelConfig m;
  m.exp_rel_err = kApprox;
  m.approx_systematic = true;
  oracle::Arithmetic without = claim_of(m), at = without, above = without;
  without.exp_bias.reset();
  at.exp_bias = *without.exp_rel_err;
  above.exp_bias = 2.0 * *without.exp_rel_err;
  auto plain = oracle::derive_bound(c, *ref, without);
  ASSERT_TRUE(plain.ok());
  for (const oracle::Arithmetic& a : {at, above}) {
    auto b = oracle::derive_bound(c, *ref, a);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->o.data, plain->o.data);
    EXPECT_EQ(b->lse.data, plain->lse.data);
    EXPECT_EQ(b->o_stat.data, plain->o_stat.data);
    EXPECT_EQ(b->lse_stat.data, plain->lse_stat.data);
  }
}

// Tensor-core sums (docs/tolerances.md §10): every add of long rows truncated, one partial, claimed
// accum_rounding any: inside the statistical bound, whose accumulation term charges the adds'
// bias (K u_s) whole: the softmax denominator's adds all lose weight, so a row of 4,096 keys
// moves its LSE by about 2,000 u_s where the bias-free lambda u_s sqrt(K) is about 470 u_s.
TEST(ToleranceSoundness, TruncatingSumsOfLongRowsAreWithinTheStatisticalBound) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    CaseSpec spec{.q_heads = 2, .seq = 4096, .seed = seed};
    ModelConfig m;
    m.truncate = true;
    m.tile = 64;
    m.seed = seed;
    const oracle::Case c = make_case(spec);
    auto ref = oracle::reference(c);
    ASSERT_TRUE(ref.ok());
    auto bound = oracle::derive_bound(c, *ref, claim_of(m));
    ASSERT_TRUE(bound.ok()) << bound.status().message();
    const ModelOutput out = run_fp32_model(c, m);
    auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
    ASSERT_TRUE(cmp.ok());
    EXPECT_TRUE(cmp->pass()) << describe(m) << ": " << cmp->summary();
    EXPECT_TRUE(cmp->pass_statistical()) << describe(m) << ": " << cmp->statistical_summary();
  }
}

// The merge is bounded exactly (docs/tolerances.md §5): bf16 partials summed in bf16 over up to
// 64 ranks (any layout, ag_rs or a2a) get a bound, never a refusal, and the model of such a
// kernel is inside it.
RC_GTEST_PROP(ToleranceSoundness, Bf16MergesOfUpTo64RanksAreJudged, ()) {
  SpecLimits lim;
  lim.max_seq = 120;
  lim.max_tokens = 2;
  const CaseSpec spec = *gen_case_spec(lim);
  ModelConfig m = *gen_model_config_for(spec);
  m.shards = *rc::gen::inRange<int64_t>(2, 65);
  m.partial = *rc::gen::element(oracle::DType::bf16, oracle::DType::f16, oracle::DType::f32);
  m.merge_accum = oracle::DType::bf16;
  // One merge of all of them: a chain of 64 pairwise bf16 merges may be refused (§5).
  if (m.merge == Merge::pairwise) m.merge = Merge::a2a;
  check_within_bound(spec, m);
}

// The merge's terms scale with the exact partials of the layout (docs/tolerances.md §5): sound for
// the kernel's own layout, and not a quantity that can be shrunk. Judged as if all keys were one
// partial (A = |sum_j P_j v_j|), correct bf16 merges of 8 ranks leave the bound on some cases.
TEST(ToleranceSensitivity, ExactPartialsOfTheLayoutCannotBeShrunk) {
  int violated = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CaseSpec spec{.q_heads = 4, .head_dim = 32, .v_dim = 32, .seq = 512, .seed = seed};
    ModelConfig m;
    m.shards = 8;
    m.interleave = 1 + static_cast<int64_t>(seed % 4);
    m.tile = 128;
    m.partial = oracle::DType::bf16;
    m.merge_accum = oracle::DType::bf16;
    m.seed = seed;
    violated += violated_when_weakened(make_case(spec), m, [&](oracle::Arithmetic& a) {
      a.layout = oracle::Ownership{8, 1, std::vector<int64_t>(spec.seq, 0)};  // every key on rank 0
    });
  }
  RecordProperty("cases_violated_of_40", violated);
  EXPECT_GT(violated, 0) << "a bound from one partial's |O| would hold on every case: the exact "
                            "partials' term would not be needed";
}

// A layout or a pairwise tree that does not fit the case is refused by name (a tree D merges deep
// joins at most 2^D partials).
TEST(ToleranceRefusal, NamesALayoutOrATreeThatDoesNotFit) {
  CaseSpec spec;
  spec.seq = 16;
  const oracle::Case c = make_case(spec);
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  oracle::Arithmetic a;
  a.shards = 4;
  auto refused = [&](const oracle::Ownership& own, const std::string& what) {
    a.layout = own;
    auto b = oracle::derive_bound(c, *ref, a);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find(what), std::string::npos) << b.status().message();
    EXPECT_FALSE(b.status().unjudgeable()) << "a layout that does not fit is bad input";
  };
  refused({8, 1, {}}, "layout of 8 ranks; expected shards = 4: one partial per rank");
  refused({2, 1, {}}, "layout of 2 ranks; expected shards = 4: one partial per rank");
  refused({4, 1, std::vector<int64_t>(15, 0)}, "tensor 'owner': 15 entries; expected one per key");
  std::vector<int64_t> owner(16, 1);
  owner[3] = 4;
  refused({4, 1, owner}, "tensor 'owner': entry 3 is 4; expected a rank in [0, 4)");
  owner[3] = 2;
  a.layout = oracle::Ownership{4, 1, owner};
  EXPECT_TRUE(oracle::derive_bound(c, *ref, a).ok());
  a.merge_depth = 1;
  auto b = oracle::derive_bound(c, *ref, a);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("merge_depth 1 cannot join 4 partials two at a time"),
            std::string::npos)
      << b.status().message();
  a.merge_depth = 2;  // a balanced tree
  EXPECT_TRUE(oracle::derive_bound(c, *ref, a).ok());
}

// A claim too coarse for the first-order bound is refused with kappa and the term responsible; a
// merge whose sum alone may be off by half is refused by name.
// A kernel's exponential 10^-4 off over 2,000 keys: with any tiling (tile 1) the rescales charge
// it once a key, (1 + 10^-4)^2000 - 1 = 0.22, and the refusal says so and names the tile claim;
// with the kernel's own blocks of 512 keys the same claim is bounded.
TEST(ToleranceRefusal, RescalesOfAnyTilingNameTheTileClaim) {
  CaseSpec spec{.head_dim = 16, .v_dim = 16, .seq = 2000};
  const oracle::Case c = make_case(spec);
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  oracle::Arithmetic a;
  a.exp_rel_err = 1e-4;
  auto b = oracle::derive_bound(c, *ref, a);
  ASSERT_FALSE(b.ok());
  const std::string why = b.status().message();
  EXPECT_NE(why.find("of which the online-softmax rescales"), std::string::npos) << why;
  EXPECT_NE(why.find("2000 of them with tile 1 (any tiling: one per key)"), std::string::npos)
      << why;
  EXPECT_NE(why.find("claim the kernel's keys per online-softmax block (tile)"), std::string::npos)
      << why;
  a.tile = 512;
  EXPECT_TRUE(oracle::derive_bound(c, *ref, a).ok()) << "tile 512: 4 rescales";
}

TEST(ToleranceRefusal, NamesKappaAndTheClaimTermResponsible) {
  CaseSpec spec;
  spec.seq = 64;
  const oracle::Case c = make_case(spec);
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  oracle::Arithmetic a;
  a.exp_rel_err = 0.2;
  auto b = oracle::derive_bound(c, *ref, a);
  ASSERT_FALSE(b.ok());
  const std::string why = b.status().message();
  EXPECT_NE(why.find("kappa = "), std::string::npos) << why;
  EXPECT_NE(why.find("> 0.1 (mostly the key weights (exp_rel_err"), std::string::npos) << why;
  // A refusal to judge, which a suite may draw past, not an error of the input.
  EXPECT_TRUE(b.status().unjudgeable());
  a.exp_rel_err.reset();
  a.shards = 64;
  a.merge_accum = oracle::DType::bf16;
  EXPECT_TRUE(oracle::derive_bound(c, *ref, a).ok()) << "64 bf16 partials are bounded";
  a.shards = 128;
  b = oracle::derive_bound(c, *ref, a);
  ASSERT_FALSE(b.ok());
  // The claim's fields named, and the figure that is not below 1/2: 128 x 2^-8 = 1/2, so
  // gamma = 1/2 / (1 - 1/2) = 1.
  EXPECT_NE(b.status().message().find("the merge of 128 partials (the claim's dcp_size x splits"),
            std::string::npos)
      << b.status().message();
  EXPECT_NE(b.status().message().find("summed in merge_accum BF16 cannot be bounded: its error "
                                      "factor gamma_N(u_m) = N u_m / (1 - N u_m) is 1, not below "
                                      "0.5"),
            std::string::npos)
      << b.status().message();
}

// The model's output on case c against the bound of its own claim; nullopt, with the failure
// recorded, where the oracle gives no reference, bound or comparison.
std::optional<oracle::Comparison> judged_on_its_claim(const oracle::Case& c, const ModelConfig& m) {
  auto ref = oracle::reference(c);
  if (!ref) {
    ADD_FAILURE() << ref.status().message();
    return std::nullopt;
  }
  auto bound = oracle::derive_bound(c, *ref, claim_of(m));
  if (!bound) {
    ADD_FAILURE() << bound.status().message();
    return std::nullopt;
  }
  const ModelOutput out = run_fp32_model(c, m);
  auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
  if (!cmp) {
    ADD_FAILURE() << cmp.status().message();
    return std::nullopt;
  }
  return *cmp;
}

// Four keys of ones under q = 64 at components t < leads and 64 e at the rest (Dk = dim).
oracle::Case leading_dot_case(int64_t dim, int64_t leads, double e) {
  CaseSpec spec;
  spec.head_dim = dim;
  spec.seq = 4;
  oracle::Case c = make_case(spec);
  for (int64_t i = 0; i < dim; ++i) c.q.data[static_cast<size_t>(i)] = 64.0 * (i < leads ? 1.0 : e);
  std::fill(c.k.data.begin(), c.k.data.end(), 1.0);
  return c;
}

// The dot product's nodes (docs/tolerances.md §3): each add rounds its partial sum, so an error
// grows with every node's magnitude, not with the products' alone. q = 64 (1, e, ..., e) on keys of
// ones, e just under half an ulp of 1: summed left to right every add after the first rounds
// back to 64, losing 64e, 127 times, as the node bound u sum_l T_l allows, a bound the LSE of 4
// equal keys then reaches within a small factor (the exponential's and the log's few ulps aside).
TEST(ToleranceSensitivity, EveryNodeOfTheDotIsCharged) {
  const double e = std::ldexp(1.0, -24) * (1.0 - std::ldexp(1.0, -10));
  // Left to right, round to nearest (claimed).
  const std::optional<oracle::Comparison> cmp =
      judged_on_its_claim(leading_dot_case(128, 1, e), ModelConfig{});
  ASSERT_TRUE(cmp);
  RecordProperty("lse_error_over_bound", std::to_string(cmp->lse_worst.ratio));
  EXPECT_TRUE(cmp->pass()) << cmp->summary();
  EXPECT_GT(cmp->lse_worst.ratio, 0.5) << cmp->summary();
}

// A dot claimed in W lanes (dot_lanes) is charged its lanes' partial sums: over Dk = 512, q = 64
// at component t < W (each lane's first) and 64 e after, on keys of ones: each lane holds 64 and,
// summed left to right, rounds back to it at each of its 512 / W - 1 adds, losing 64 e each time,
// as the lanes' node bound allows, a bound the LSE then reaches within a small factor (the same
// dot bounded in any order is charged about 64 W at each node).
TEST(ToleranceSensitivity, EveryNodeOfALaneIsCharged) {
  constexpr int64_t kDim = 512;
  const double e = std::ldexp(1.0, -24) * (1.0 - std::ldexp(1.0, -10));
  for (const int64_t lanes : {1, 2, 4, 8}) {
    ModelConfig m;  // round to nearest (claimed), in `lanes` lanes (claimed)
    m.dot_lanes = lanes;
    const std::optional<oracle::Comparison> cmp =
        judged_on_its_claim(leading_dot_case(kDim, lanes, e), m);
    ASSERT_TRUE(cmp);
    EXPECT_TRUE(cmp->pass()) << lanes << " lanes: " << cmp->summary();
    EXPECT_GT(cmp->lse_worst.ratio, 0.5) << lanes << " lanes: " << cmp->summary();
  }
}

// A claimed order is one the kernel keeps: with the lead 64 at component 0 alone, W lanes lose
// the 128 / W - 1 products of lane 0 and their bound charges those nodes; a dot summed left to
// right holds 64 through all 127 adds and loses every product, beyond the W lanes' bound (about
// twice it at W = 2, more with more lanes).
TEST(ToleranceSensitivity, UnclaimedDotOrderFails) {
  constexpr int64_t kDim = 128;
  const double e = std::ldexp(1.0, -24) * (1.0 - std::ldexp(1.0, -10));
  const oracle::Case c = leading_dot_case(kDim, 1, e);
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  for (const int64_t claimed : {2, 4, 8, 16}) {
    ModelConfig m;
    m.dot_lanes = claimed;
    auto bound = oracle::derive_bound(c, *ref, claim_of(m));
    ASSERT_TRUE(bound.ok()) << bound.status().message();
    for (const int64_t lanes : {claimed, int64_t{1}}) {
      ModelConfig run = m;
      run.dot_lanes = lanes;
      const ModelOutput out = run_fp32_model(c, run);
      auto cmp = oracle::compare(out.o, out.lse, *ref, *bound);
      ASSERT_TRUE(cmp.ok());
      EXPECT_EQ(cmp->pass(), lanes == claimed)
          << "claimed " << claimed << " lanes, summed in " << lanes << ": " << cmp->summary();
    }
  }
}

// Two ranks of 5 and 3 keys (N = 2, interleave 5, S = 8) under q = 0: weights 5/8 and 3/8, and
// each rank's partial exactly its keys' shared value, a and b, values of `f` of magnitude in
// [1, 2) and random sign in each of the 4 heads' 256 components.
oracle::Case scaled_merge_case(oracle::DType f, uint64_t seed) {
  CaseSpec spec{.q_heads = 4, .kv_heads = 4, .v_dim = 256, .seq = 8, .seed = seed};
  oracle::Case c = make_case(spec);
  std::fill(c.q.data.begin(), c.q.data.end(), 0.0);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(1.0, 2.0);
  const auto draw = [&] { return oracle::round_to(f, (rng() % 2 ? 1.0 : -1.0) * mag(rng)); };
  for (int64_t h = 0; h < spec.kv_heads; ++h)
    for (int64_t i = 0; i < spec.v_dim; ++i) {
      const double a = draw(), b = draw();
      for (int64_t j = 0; j < spec.seq; ++j)
        c.v.data[static_cast<size_t>((j * spec.kv_heads + h) * spec.v_dim + i)] = j < 5 ? a : b;
    }
  return c;
}

// The scaled form (merge_form scaled, docs/tolerances.md §5) is charged half an ulp of each term's
// and each node's binade, and its output store nothing: a bf16 (or f16) reduce-scatter of 5a/8 and
// 3b/8, a and b in its format (fp32 partials, the library's exponential), rounds each term and
// their sum, and over 1,024 components some element loses nearly all of those half ulps in one
// direction: over 0.9 of its bound (the rest of the bound, fp32 arithmetic, is a small part of
// it; bounded as without the word, u times each value and the output's store, it reaches about
// 0.66 in bf16 and 0.69 in f16).
TEST(ToleranceSensitivity, EveryRoundingOfAScaledMergeIsCharged) {
  for (const oracle::DType sum : {oracle::DType::bf16, oracle::DType::f16}) {
    ModelConfig m;
    m.shards = 2;
    m.interleave = 5;
    m.merge = Merge::ag_rs;
    m.claim_scaled = true;
    m.merge_accum = sum;
    m.out = sum;
    m.perturb = false;
    const std::optional<oracle::Comparison> cmp = judged_on_its_claim(scaled_merge_case(sum, 1), m);
    ASSERT_TRUE(cmp);
    RecordProperty("o_error_over_bound_" + std::string(oracle::dtype_name(sum)),
                   std::to_string(cmp->o_worst.ratio));
    EXPECT_TRUE(cmp->pass()) << cmp->summary();
    EXPECT_GT(cmp->o_worst.ratio, 0.9) << oracle::dtype_name(sum) << ": " << cmp->summary();
  }
}

// The merge's weights are charged on the partials' spread about the output (docs/tolerances.md §5,
// V): two ranks of 319 keys (interleave 319), rank 0's at logit 0 and rank 1's at 2^-11, so L_0 =
// ln 319 and L_1 = ln 319 + 2^-11, 0.486 and 0.502 of a bf16 ulp above the grid in [4, 8): stored
// as bf16 partial LSEs they round down and up by about half an ulp, 0.015 each, weight errors of
// opposite sign. Each rank's values are one value per component, a and b = a (1 - d), d in
// [2^-6, 2^-3], so the partials sit close to the output, Dev_i = |a - b| / 2, and a merge of the
// stored LSEs (in double, stored to fp32) moves O by 0.0154 Dev_i, about half of what C = 2^-8
// L_mag charges the weights. Charged on Q + |O_i| = 2|a|, 4 / d times Dev_i, it reads 0.015 or
// less.
TEST(ToleranceSensitivity, MergeWeightsAreChargedOnThePartialsSpread) {
  constexpr int64_t kRankKeys = 319, kDv = 256;
  CaseSpec spec{.head_dim = 16, .v_dim = kDv, .seq = 2 * kRankKeys};
  oracle::Case c = make_case(spec);
  std::fill(c.q.data.begin(), c.q.data.end(), 0.0);
  c.q.data[0] = 1.0;  // s_j = k_j0 / 4 (tau = 1/4)
  std::fill(c.k.data.begin(), c.k.data.end(), 0.0);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> mag(1.0, 2.0), gap(0x1p-6, 0x1p-3);
  std::vector<double> a(kDv), b(kDv);
  for (int64_t i = 0; i < kDv; ++i) {
    a[i] = oracle::round_to(oracle::DType::f32, (rng() % 2 ? 1.0 : -1.0) * mag(rng));
    b[i] = oracle::round_to(oracle::DType::f32, a[i] * (1.0 - gap(rng)));
  }
  for (int64_t j = 0; j < spec.seq; ++j) {
    const bool rank1 = j >= kRankKeys;
    c.k.data[static_cast<size_t>(j * spec.head_dim)] = rank1 ? 0x1p-9 : 0.0;
    for (int64_t i = 0; i < kDv; ++i)
      c.v.data[static_cast<size_t>(j * kDv + i)] = rank1 ? b[i] : a[i];
  }
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  oracle::Arithmetic claim;
  claim.shards = 2;
  claim.layout = oracle::Ownership{2, kRankKeys, {}};
  claim.partial_lse = oracle::DType::bf16;
  auto bound = oracle::derive_bound(c, *ref, claim);
  ASSERT_TRUE(bound.ok()) << bound.status().message();
  // The partials as exchanged: O_r exact, L_r stored in bf16; merged in double, stored in fp32.
  const std::array<double, 2> lse = {
      oracle::round_to(oracle::DType::bf16, std::log(double{kRankKeys})),
      oracle::round_to(oracle::DType::bf16, 0x1p-11 + std::log(double{kRankKeys}))};
  ASSERT_LT(lse[0], std::log(double{kRankKeys}) - 0.015);
  ASSERT_GT(lse[1], 0x1p-11 + std::log(double{kRankKeys}) + 0.015);
  const double top = std::max(lse[0], lse[1]);
  const double w0 = std::exp(lse[0] - top), w1 = std::exp(lse[1] - top);
  oracle::Tensor<double> o = ref->o, l = ref->lse;
  for (int64_t i = 0; i < kDv; ++i)
    o.data[static_cast<size_t>(i)] =
        oracle::round_to(oracle::DType::f32, (w0 * a[i] + w1 * b[i]) / (w0 + w1));
  l.data[0] = oracle::round_to(oracle::DType::f32, top + std::log(w0 + w1));
  auto cmp = oracle::compare(o, l, *ref, *bound);
  ASSERT_TRUE(cmp.ok()) << cmp.status().message();
  RecordProperty("o_error_over_bound", std::to_string(cmp->o_worst.ratio));
  EXPECT_TRUE(cmp->pass()) << cmp->summary();
  EXPECT_GT(cmp->o_worst.ratio, 0.4) << cmp->summary();
}

// Each partial's sums hold only its own keys (docs/tolerances.md §4): with the layout claimed, the
// accumulation's gamma counts the busiest partial's keys, not the row's. An fp32 accumulation (adds
// that may truncate: u = 2^-23) of 300,000 keys in one partial in tiles of 64 is refused for kappa
// (300,000 adds and 4,689 rescales: 3 gamma_304689(2^-23) = 0.109); the same keys over 8 ranks of
// 37,500 each are bounded; over 8 partials of a partition the claim does not name (split-KV) every
// key may be in one of them, and the refusal stays.
TEST(ToleranceRefusal, AccumulationCountsTheBusiestPartialsKeys) {
  constexpr int64_t kKeys = 300000;
  CaseSpec spec;
  spec.seq = kKeys;
  const oracle::Case c = make_case(spec);
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  oracle::Arithmetic a;
  a.tile = 64;  // few rescales: the key weights stay small
  auto refused_for_all_keys = [&](const std::string& why) {
    auto b = oracle::derive_bound(c, *ref, a);
    ASSERT_FALSE(b.ok()) << why;
    EXPECT_NE(b.status().message().find("mostly the accumulation of 300000 terms in accum F32"),
              std::string::npos)
        << b.status().message();
  };
  refused_for_all_keys("one partial of every key");
  a.shards = 8;
  refused_for_all_keys("an unnamed partition may put every key in one partial");
  a.layout = oracle::Ownership{8, 1, {}};
  EXPECT_TRUE(oracle::derive_bound(c, *ref, a).ok()) << "8 ranks of 37500 keys";
  a.layout = oracle::Ownership{8, 64, {}};
  EXPECT_TRUE(oracle::derive_bound(c, *ref, a).ok()) << "interleave 64: 8 ranks of 37500 keys";
  a.layout = oracle::Ownership{8, 1, std::vector<int64_t>(kKeys, 5)};
  refused_for_all_keys("an owner map that puts every key on rank 5");
}

// What bound_terms reports is the bound, split (oracle/tolerance.hpp): in every row of a random
// case and claim, at an element of O and at the LSE, the named terms are finite, nonnegative and
// sum to derive_bound's value. The sum telescopes: each term after the first three is the increment
// of one step, so in double it is off by a few roundings of the bound (8 adds and the
// second-order product's two, each 2^-53 of at most the bound): 16 u_double bounds it.
constexpr double kTermsSumRel = 16.0 * 0x1p-53;

void check_terms(const std::vector<oracle::BoundTerm>& terms,
                 const std::array<const char*, 8>& names, double bound, const char* what) {
  RC_ASSERT(terms.size() == names.size());
  double sum = 0.0;
  for (size_t x = 0; x < terms.size(); ++x) {
    RC_LOG() << what << " " << terms[x].name << " " << terms[x].value << "\n";
    RC_ASSERT(std::string(terms[x].name) == names[x]);
    RC_ASSERT(std::isfinite(terms[x].value) && terms[x].value >= 0.0);
    sum += terms[x].value;
  }
  RC_LOG() << what << " sum " << sum << " bound " << bound << "\n";
  RC_ASSERT(std::fabs(sum - bound) <= kTermsSumRel * bound);
}

RC_GTEST_PROP(BoundTerms, SumToTheBoundInEveryRow, ()) {
  const CaseSpec spec = *gen_case_spec(SpecLimits{});
  const ModelConfig m = *gen_model_config_for(spec);
  const oracle::Case c = make_case(spec);
  auto ref = oracle::reference(c);
  RC_ASSERT(ref.ok());
  const oracle::Arithmetic a = claim_of(m);
  auto bound = oracle::derive_bound(c, *ref, a);
  RC_ASSERT(bound.ok());
  RC_LOG() << describe(spec) << "\n" << describe(m) << "\n";
  // Every row, at one component i drawn for the case (a row's terms cost a row's bound).
  const int64_t Hq = c.q_heads(), dv = c.v_dim, i = *rc::gen::inRange<int64_t>(0, dv);
  for (int64_t t = 0; t < c.tokens(); ++t) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t r = t * Hq + h;
      auto terms = oracle::bound_terms(c, *ref, a, t, h, i);
      RC_ASSERT(terms.ok());
      if (std::isinf(ref->lse.data[r])) {  // sees nothing: bound 0, no terms
        RC_ASSERT(terms->o.empty() && terms->lse.empty() && bound->o.data[r * dv + i] == 0.0);
        continue;
      }
      check_terms(terms->o, oracle::kOBoundTermNames, bound->o.data[r * dv + i], "o");
      check_terms(terms->lse, oracle::kLseBoundTermNames, bound->lse.data[r], "lse");
    }
  }
}

TEST(BoundTerms, AnElementOutsideTheCaseIsRefused) {
  const oracle::Case c = make_case(CaseSpec{});
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  auto terms = oracle::bound_terms(c, *ref, oracle::Arithmetic{}, 0, c.q_heads(), 0);
  ASSERT_FALSE(terms.ok());
  EXPECT_NE(terms.status().message().find("outside the case's [T, Hq, Dv]"), std::string::npos)
      << terms.status().message();
}

}  // namespace
}  // namespace dcp::props
