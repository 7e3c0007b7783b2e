// The fast tier (double-double) agrees with the certify tier (MPFR, 266 bits) to >= 100 bits,
// measured against each row's condition-aware scale (oracle/agreement.hpp), on random small
// cases of every variant.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "oracle/agreement.hpp"
#include "properties/rc_gen.hpp"

namespace dcp::props {
namespace {

constexpr double kRequiredBits = 100.0;

RC_GTEST_PROP(OracleTiers, FastAgreesWithCertifyTo100Bits, ()) {
  SpecLimits lim{.max_head_dim = 16, .max_v_dim = 8, .max_seq = 24};
  const CaseSpec spec = *gen_case_spec(lim);
  const oracle::Case c = make_case(spec);
  RC_ASSERT(oracle::validate(c).ok());
  const auto fast = oracle::attend_rows<oracle::dd>(c, nullptr, true);
  const auto cert = oracle::attend_rows<oracle::certify_real>(c, nullptr, true);
  const double bits = oracle::agreement_bits(c, fast, cert);
  RC_LOG() << describe(spec) << "\nagreement: " << bits << " bits\n";
  RC_ASSERT(bits >= kRequiredBits);
}

// An int8 cache's values (7-bit codes times f32 scales, up to 31 significand bits) times an f32 q
// round in double: the fast tier adds those products exactly all the same (oracle/attention.cpp,
// products_exact). Before it did, 1 random case in 10 agreed to only 55-70 bits.
TEST(OracleTiers, Int8CachesAgreeTo100BitsThoughTheirProductsRoundInDouble) {
  double worst = oracle::kMaxAgreementBits;
  for (const ValueStyle values : {ValueStyle::normal, ValueStyle::peaked, ValueStyle::wide,
                                  ValueStyle::ties, ValueStyle::extreme})
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const CaseSpec spec{.tokens = 2,
                          .q_heads = 4,
                          .kv_heads = 2,
                          .head_dim = 13,
                          .v_dim = 5,
                          .seq = 12,
                          .q_dtype = oracle::DType::f32,
                          .kv_dtype = oracle::DType::i8,
                          .kv_scale = KvScale::per_head,
                          .lse_base = oracle::LseBase::two,
                          .values = values,
                          .seed = seed};
      const oracle::Case c = make_case(spec);
      ASSERT_TRUE(oracle::validate(c).ok());
      const auto fast = oracle::attend_rows<oracle::dd>(c, nullptr, true);
      const auto cert = oracle::attend_rows<oracle::certify_real>(c, nullptr, true);
      worst = std::min(worst, oracle::agreement_bits(c, fast, cert));
    }
  EXPECT_GE(worst, kRequiredBits);
}

}  // namespace
}  // namespace dcp::props
