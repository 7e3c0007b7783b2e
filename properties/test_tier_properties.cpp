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

}  // namespace
}  // namespace dcp::props
