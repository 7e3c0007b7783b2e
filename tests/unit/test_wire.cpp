// The one wire format of judgements between a job's processes (harness/wire.hpp): every field of
// a judged part and of a rank's judgement comes back as it went, NaN and infinity included, and a
// message cut short, run on or naming a term that does not exist is refused, not misread.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "harness/wire.hpp"

namespace dcp::harness {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

oracle::Worst worst(double seed, int64_t d) {
  oracle::Worst w;
  w.index = {7, 3, d};
  w.got = seed, w.expected = seed / 3.0, w.error = 1e-300 * seed, w.bound = seed * seed;
  w.ratio = seed + 0.5;
  return w;
}

oracle::PartCheck sample_part(std::optional<int64_t> rank) {
  oracle::PartCheck p;
  p.rank = rank;
  p.kappa = 0.0123;
  p.cmp.o_elements = 1 << 20, p.cmp.o_violations = 3, p.cmp.lse_elements = 4096;
  p.cmp.lse_violations = 1, p.cmp.o_suspects = 5, p.cmp.lse_suspects = 2;
  p.cmp.o_worst = worst(2.0, 11);
  p.cmp.lse_worst = worst(-4.0, -1);
  p.cmp.lse_worst.ratio = kInf;  // a bound of 0 with an error
  p.cmp.o_worst_stat = worst(8.0, 0);
  p.cmp.lse_worst_stat = worst(16.0, -1);
  p.cmp.lse_worst_stat.got = kNaN;
  for (size_t i = 0; i < oracle::kOBoundTermNames.size(); ++i)
    p.worst_terms.o.push_back({oracle::kOBoundTermNames[i], 1e-7 * static_cast<double>(i)});
  p.worst_terms.lse.push_back({oracle::kLseBoundTermNames[5], 2.5e-6});  // "merge" alone
  return p;
}

void expect_same(const oracle::Worst& a, const oracle::Worst& b) {
  EXPECT_EQ(a.index, b.index);
  for (const auto& [x, y] :
       {std::pair{a.got, b.got}, std::pair{a.expected, b.expected}, std::pair{a.error, b.error},
        std::pair{a.bound, b.bound}, std::pair{a.ratio, b.ratio}})
    EXPECT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << x << " came back as " << y;
}

void expect_same(const std::vector<oracle::BoundTerm>& a, const std::vector<oracle::BoundTerm>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_STREQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].value, b[i].value);
  }
}

TEST(Wire, JudgedPartsComeBackWhole) {
  const std::vector<IndexedPart> sent = {{0, sample_part(std::nullopt)}, {9, sample_part(3)}};
  const auto back = decode_parts(encode_parts(sent));
  ASSERT_TRUE(back) << back.status().message();
  ASSERT_EQ(back->size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    const oracle::PartCheck &a = sent[i].part, &b = (*back)[i].part;
    EXPECT_EQ(sent[i].index, (*back)[i].index);
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.kappa, b.kappa);
    for (int64_t oracle::Comparison::*n :
         {&oracle::Comparison::o_elements, &oracle::Comparison::o_violations,
          &oracle::Comparison::lse_elements, &oracle::Comparison::lse_violations,
          &oracle::Comparison::o_suspects, &oracle::Comparison::lse_suspects})
      EXPECT_EQ(a.cmp.*n, b.cmp.*n);
    for (oracle::Worst oracle::Comparison::*w :
         {&oracle::Comparison::o_worst, &oracle::Comparison::lse_worst,
          &oracle::Comparison::o_worst_stat, &oracle::Comparison::lse_worst_stat})
      expect_same(a.cmp.*w, b.cmp.*w);
    expect_same(a.worst_terms.o, b.worst_terms.o);
    expect_same(a.worst_terms.lse, b.worst_terms.lse);
  }
  const auto none = decode_parts(encode_parts({}));
  ASSERT_TRUE(none) << none.status().message();
  EXPECT_TRUE(none->empty());
}

// Each of a rank's judgement's flags, changed alone from its default, comes back changed: a flag
// the codec dropped would come back as the default.
constexpr bool props::DcpCheck::*kFlags[] = {&props::DcpCheck::pass,
                                             &props::DcpCheck::pass_statistical,
                                             &props::DcpCheck::backend_error,
                                             &props::DcpCheck::oracle_error,
                                             &props::DcpCheck::unjudgeable,
                                             &props::DcpCheck::judged_pass,
                                             &props::DcpCheck::judged_pass_statistical,
                                             &props::DcpCheck::interrupted};
TEST(Wire, EveryFieldOfARanksJudgementTravels) {
  const props::DcpCheck base;
  std::vector<props::DcpCheck> one_each;
  for (bool props::DcpCheck::*flag : kFlags) {
    props::DcpCheck c;
    c.*flag = !(base.*flag);
    one_each.push_back(c);
  }
  for (const props::DcpCheck& c : one_each) {
    const auto back = decode_check(encode_check(c));
    ASSERT_TRUE(back) << back.status().message();
    for (bool props::DcpCheck::*flag : kFlags) EXPECT_EQ((*back).*flag, c.*flag);
  }
  props::DcpCheck c;
  c.max_ratio = kInf, c.max_stat_ratio = 0.75, c.comparisons = 123456789012;
  c.report = std::string("rank 2: partial o 1/64 over bound\n") + '\0' + "binary tail";
  const auto back = decode_check(encode_check(c));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->max_ratio, kInf);
  EXPECT_EQ(back->max_stat_ratio, 0.75);
  EXPECT_EQ(back->comparisons, c.comparisons);
  EXPECT_EQ(back->report, c.report);
}

TEST(Wire, DamagedMessagesAreRefused) {
  const std::vector<uint8_t> part = encode_parts(std::vector<IndexedPart>{{2, sample_part(1)}});
  for (const size_t cut : {size_t{0}, size_t{3}, part.size() / 2, part.size() - 1}) {
    const auto back = decode_parts(std::span(part).first(cut));
    ASSERT_FALSE(back) << "cut to " << cut << " bytes";
    EXPECT_NE(back.status().message().find("ends before its fields do"), std::string::npos)
        << back.status().message();
  }
  std::vector<uint8_t> longer = part;
  longer.push_back(0);
  const auto extra = decode_parts(longer);
  ASSERT_FALSE(extra);
  EXPECT_NE(extra.status().message().find("1 bytes after its fields"), std::string::npos)
      << extra.status().message();

  // The LSE's one term is "merge", the last 16 bytes but 8 are its place in the table: 5.
  std::vector<uint8_t> bad_term = part;
  const size_t at = bad_term.size() - 16;
  ASSERT_EQ(bad_term[at], 5);
  bad_term[at] = 8;
  const auto named = decode_parts(bad_term);
  ASSERT_FALSE(named);
  EXPECT_NE(named.status().message().find("a bound term numbered 8, expected 0 to 7"),
            std::string::npos)
      << named.status().message();

  // The LSE's term count (the 8 bytes before its one term): a count no part can have, refused
  // before anything is read for it.
  std::vector<uint8_t> many = part;
  const int64_t huge = int64_t{1} << 40;
  std::memcpy(many.data() + many.size() - 24, &huge, sizeof huge);
  const auto counted = decode_parts(many);
  ASSERT_FALSE(counted);
  EXPECT_NE(counted.status().message().find("bound terms, expected at most 8"), std::string::npos)
      << counted.status().message();

  const std::vector<uint8_t> check = encode_check(props::DcpCheck{});
  const auto cut = decode_check(std::span(check).first(check.size() - 1));
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.status().message().find("a rank's judgement"), std::string::npos);
}

}  // namespace
}  // namespace dcp::harness
