// The fast tier's blocked kernel (oracle/attention.cpp): rows whose keys span several blocks,
// merged in key order, still agree with the certify tier to >= 100 bits; a watch sees every (row,
// key) pair of the attention and of its bound, and stops either when asked.
#include <gtest/gtest.h>

#include "oracle/agreement.hpp"
#include "oracle/tolerance.hpp"
#include "properties/case_gen.hpp"

namespace dcp::props {
namespace {

constexpr double kRequiredBits = 100.0;

CaseSpec long_spec(uint64_t seed) {
  return CaseSpec{.tokens = 2,
                  .q_heads = 4,
                  .kv_heads = 2,
                  .head_dim = 12,
                  .v_dim = 6,
                  .seq = 5000,  // several blocks of at least 1024 keys per (token, KV head)
                  .q_dtype = oracle::DType::bf16,
                  .kv_dtype = oracle::DType::bf16,
                  .seed = seed};
}

TEST(FastTier, SeveralKeyBlocksAgreeWithCertifyTo100Bits) {
  std::vector<CaseSpec> specs;
  CaseSpec plain = long_spec(1);
  specs.push_back(plain);
  CaseSpec masked = long_spec(2);
  masked.window = 3000;
  masked.sink = true;
  masked.explicit_pos = true;
  specs.push_back(masked);
  CaseSpec capped = long_spec(3);
  capped.softcap = 30.0;
  capped.lse_base = oracle::LseBase::two;
  capped.values = ValueStyle::peaked;
  specs.push_back(capped);
  CaseSpec latent = long_spec(4);
  latent.kv_heads = 1;
  latent.shared_latent = true;
  latent.topk = 2000;
  specs.push_back(latent);
  for (const CaseSpec& spec : specs) {
    const oracle::Case c = make_case(spec);
    ASSERT_TRUE(oracle::validate(c).ok());
    const auto fast = oracle::attend_rows<oracle::dd>(c, nullptr, true);
    const auto cert = oracle::attend_rows<oracle::certify_real>(c, nullptr, true);
    EXPECT_GE(oracle::agreement_bits(c, fast, cert), kRequiredBits) << describe(spec);
  }
}

TEST(FastTier, AWatchSeesEveryPairAndStopsWhenAsked) {
  const oracle::Case c = make_case(long_spec(5));
  int64_t last = 0, total = 0;
  oracle::Watch count;
  count.progress = [&](int64_t done, int64_t all) {
    EXPECT_GT(done, last);  // never concurrently, always forward
    last = done;
    total = all;
  };
  ASSERT_TRUE(oracle::attend_rows_watched(c, nullptr, true, count).ok());
  EXPECT_EQ(last, total);
  int64_t visible = 0;
  for (int64_t t = 0; t < c.tokens(); ++t)
    visible += static_cast<int64_t>(oracle::visible_keys(c, t).size());
  EXPECT_EQ(total, visible * c.q_heads());

  int polls = 0;
  oracle::Watch stop;
  stop.stop = [&] { return ++polls > 1; };  // after the first block
  const auto stopped = oracle::attend_rows_watched(c, nullptr, true, stop);
  ASSERT_FALSE(stopped.ok());
  EXPECT_NE(stopped.status().message().find("interrupted"), std::string::npos);
  EXPECT_FALSE(oracle::reference(c, oracle::Tier::fast, stop).ok());
}

TEST(FastTier, TheBoundsWatchSeesEveryPairAndStopsWhenAsked) {
  const oracle::Case c = make_case(long_spec(6));
  const auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  oracle::Arithmetic a;
  int64_t last = 0, total = 0, calls = 0;
  oracle::Watch count;
  count.progress = [&](int64_t done, int64_t all) {
    EXPECT_GT(done, last);
    last = done;
    total = all;
    ++calls;
  };
  const auto watched = oracle::derive_bound(c, *ref, a, count);
  ASSERT_TRUE(watched.ok()) << watched.status().message();
  int64_t visible = 0;
  for (int64_t t = 0; t < c.tokens(); ++t)
    visible += static_cast<int64_t>(oracle::visible_keys(c, t).size());
  EXPECT_EQ(total, visible * c.q_heads());
  EXPECT_EQ(last, total);
  EXPECT_EQ(calls, c.tokens() * c.q_heads());  // a row at a time
  const auto plain = oracle::derive_bound(c, *ref, a);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(watched->o.data, plain->o.data);  // watching changes nothing

  int polls = 0;
  oracle::Watch stop;
  stop.stop = [&] { return ++polls > 1; };  // after the first row
  const auto stopped = oracle::derive_bound(c, *ref, a, stop);
  ASSERT_FALSE(stopped.ok());
  EXPECT_NE(stopped.status().message().find("interrupted"), std::string::npos);
}

}  // namespace
}  // namespace dcp::props
