// `dcp-verify check`'s judgement of external results (oracle/check.hpp), driven through the
// result-file bytes: every correct implementation passes (the fp32 model in any variant, the
// host path with any N, interleave, order, split-KV and output dtype, with or without partials);
// wrong merges and a lost token fail, and a per-rank bug is pinned on that rank; malformed
// result files are refused with a message naming the tensor or key.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "oracle/check.hpp"
#include "oracle/safetensors.hpp"
#include "oracle/shard.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/rc_gen.hpp"
#include "properties/result_gen.hpp"

namespace dcp::props {
namespace {

using oracle::DcpResult;
using oracle::StFile;

// The result as `check` sees it: written to safetensors bytes and read back.
oracle::Expected<DcpResult> through_file(const DcpResult& r, const oracle::Case& c) {
  const std::vector<uint8_t> bytes = oracle::serialize_safetensors(oracle::result_to_file(r, c));
  auto f = oracle::parse_safetensors(bytes.data(), bytes.size(), "result");
  if (!f) return f.status();
  return oracle::result_from_file(*f, c, "result");
}

oracle::ResultCheck check_via_file(const DcpResult& r, const oracle::Case& c) {
  auto back = through_file(r, c);
  if (!back) RC_FAIL(back.status().message());
  auto chk = oracle::check_result(c, *back);
  if (!chk) RC_FAIL(chk.status().message());
  return *chk;
}

std::string worst_text(const oracle::ResultCheck& chk) {
  const auto& p = chk.parts[chk.worst_part()];
  return (p.rank ? "rank " + std::to_string(*p.rank) : std::string("output")) + ": " +
         p.cmp.summary();
}

RC_GTEST_PROP(CheckResult, CorrectModelResultPasses, ()) {
  const CaseSpec s = *gen_case_spec(SpecLimits{});
  const ModelConfig m = *gen_model_config_for(s);
  const bool partials = *rc::gen::arbitrary<bool>();
  const oracle::Case c = make_case(s);
  const oracle::ResultCheck chk = check_via_file(model_result(c, m, partials), c);
  RC_CLASSIFY(partials, "partials");
  RC_ASSERT(chk.parts.size() == (partials ? static_cast<size_t>(m.shards) + 1 : 1u));
  if (!chk.pass()) RC_FAIL(describe(s) + "\n" + describe(m) + "\n" + worst_text(chk));
}

RC_GTEST_PROP(CheckResult, CorrectHostResultPasses, ()) {
  SpecLimits production;
  production.fp8 = false;
  CaseSpec s = *gen_case_spec(production);
  gpu::DcpConfig cfg;
  std::vector<int64_t> divisors;  // one DCP group of N ranks shares the Hq heads
  for (int64_t d = 1; d <= s.q_heads; ++d)
    if (s.q_heads % d == 0) divisors.push_back(d);
  const int64_t n = *rc::gen::elementOf(divisors);
  cfg.tp_size = n;
  cfg.layout = {n, *rc::gen::inRange<int64_t>(1, 6)};
  draw_step_options(cfg, s.lse_base);
  cfg.replicate_q = false;  // one group: every rank already holds every head
  cfg.out_dtype =
      *rc::gen::element(gpu::StorageFormat::f32, gpu::StorageFormat::bf16, gpu::StorageFormat::f16);
  const bool partials = *rc::gen::arbitrary<bool>();
  const oracle::Case c = make_case(s);
  auto r = host_result(c, cfg, make_chunks(s.seq, s.seed), partials);
  if (!r) RC_FAIL(r.status().message());
  // In memory, with the host's own (tighter: round-to-nearest adds) claim, and through the file,
  // with the claim a file can state.
  auto direct = oracle::check_result(c, *r);
  if (!direct) RC_FAIL(direct.status().message());
  if (!direct->pass()) RC_FAIL(describe(s) + "\n" + describe(cfg) + "\n" + worst_text(*direct));
  const oracle::ResultCheck chk = check_via_file(*r, c);
  if (!chk.pass()) RC_FAIL(describe(s) + "\n" + describe(cfg) + "\n" + worst_text(chk));
}

// The largest difference between two non-empty partial LSEs of one row.
double max_lse_spread(const DcpResult& r) {
  const int64_t n = r.dcp_size, rows = r.lse.numel();
  double spread = 0.0;
  for (int64_t row = 0; row < rows; ++row) {
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t k = 0; k < n; ++k) {
      const double l = r.lse_partial->data[static_cast<size_t>(k * rows + row)];
      if (std::isinf(l)) continue;
      lo = std::min(lo, l);
      hi = std::max(hi, l);
    }
    if (hi > lo) spread = std::max(spread, hi - lo);
  }
  return spread;
}

// The fp32 claim (no P cast, fp32 output): the bound a wrong merge must leave.
void wrong_result_fails(Bug bug) {
  ModelConfig m;
  m.shards = *rc::gen::inRange<int64_t>(2, 9);
  m.interleave = *rc::gen::inRange<int64_t>(1, 5);
  m.base2 = *rc::gen::arbitrary<bool>();
  m.merge = *rc::gen::element(Merge::ag_rs, Merge::a2a);
  m.reverse_merge = *rc::gen::arbitrary<bool>();
  m.seed = *rc::gen::arbitrary<uint64_t>();
  m.bug = bug;
  const CaseSpec s = draw_bug_case(m.shards, m.interleave, bug == Bug::sink_on_every_rank);
  const oracle::Case c = make_case(s);
  const DcpResult r = model_result(c, m, true);
  if (bug == Bug::merge_unweighted_mean) {
    // Averaging is right when the partials weigh the same: it must fail only where the LSEs
    // differ (0.1 moves a weight by >= 2.5% of the total, far beyond the fp32 bound).
    RC_PRE(max_lse_spread(r) > 0.1);
  }
  const oracle::ResultCheck chk = check_via_file(r, c);
  RC_LOG() << describe(s) << "\n" << describe(m) << "\n";
  RC_ASSERT(!chk.pass());
  if (bug == Bug::lost_token) {
    // Only the last rank lost a key: its partial, and no other, is named.
    RC_ASSERT(chk.failing_ranks() == std::vector<int64_t>{m.shards - 1});
  } else if (bug == Bug::sink_on_every_rank) {
    // Every rank but the sink's own (0) added the sink: exactly those are named.
    std::vector<int64_t> want;
    for (int64_t rank = 1; rank < m.shards; ++rank) want.push_back(rank);
    RC_ASSERT(chk.failing_ranks() == want);
  } else {
    // A wrong merge of correct partials: every partial passes, the output fails.
    RC_ASSERT(chk.failing_ranks().empty());
    RC_ASSERT(!chk.parts.front().cmp.pass());
  }
}

RC_GTEST_PROP(CheckResult, UnweightedAverageFails, ()) {
  wrong_result_fails(Bug::merge_unweighted_mean);
}
RC_GTEST_PROP(CheckResult, Base2LseMergedWithExpFails, ()) {
  wrong_result_fails(Bug::merge_base_mismatch);
}
RC_GTEST_PROP(CheckResult, LostTokenFailsOnItsRank, ()) { wrong_result_fails(Bug::lost_token); }
RC_GTEST_PROP(CheckResult, SinkOnEveryRankFailsOnThoseRanks, ()) {
  wrong_result_fails(Bug::sink_on_every_rank);
}

// Bad files: each refused with the offending tensor or key in the message.
class CheckResultFile : public ::testing::Test {
 protected:
  void SetUp() override {
    c = make_case(CaseSpec{
        .tokens = 2, .q_heads = 4, .kv_heads = 2, .head_dim = 8, .v_dim = 8, .seq = 30, .seed = 3});
    ModelConfig m;
    m.shards = 2;
    good = oracle::result_to_file(model_result(c, m, true), c);
  }
  std::string error_of(const StFile& f) const {
    auto r = oracle::result_from_file(f, c, "r.safetensors");
    return r.ok() ? std::string("(accepted)") : r.status().message();
  }
  oracle::Case c;
  StFile good;
};

TEST_F(CheckResultFile, GoodFileIsAccepted) {
  auto r = oracle::result_from_file(good, c, "r.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->dcp_size, 2);
  ASSERT_TRUE(r->o_partial.has_value());
  EXPECT_EQ(r->o_partial->shape, (oracle::Shape{2, 2, 4, 8}));
}

TEST_F(CheckResultFile, MalformedFilesAreRefusedByName) {
  StFile f = good;
  f.tensors.erase("lse");
  EXPECT_NE(error_of(f).find("missing tensor 'lse'"), std::string::npos) << error_of(f);
  f = good;
  f.tensors["o"].shape = {2, 4, 7};
  EXPECT_NE(error_of(f).find("tensor 'o': shape [2, 4, 7]; expected [2, 4, 8]"), std::string::npos)
      << error_of(f);
  f = good;
  f.metadata["acum"] = "f32";
  EXPECT_NE(error_of(f).find("unknown metadata 'acum'"), std::string::npos) << error_of(f);
  f = good;
  f.metadata.erase("interleave");
  EXPECT_NE(error_of(f).find("without metadata 'interleave'"), std::string::npos) << error_of(f);
  f = good;
  f.tensors.erase("lse_partial");
  EXPECT_NE(error_of(f).find("'o_partial' without 'lse_partial'"), std::string::npos)
      << error_of(f);
  f = good;
  f.metadata["dcp_size"] = "3";
  EXPECT_NE(error_of(f).find("tensor 'o_partial': shape [2, 2, 4, 8]; expected [3, 2, 4, 8]"),
            std::string::npos)
      << error_of(f);
  f = good;
  f.metadata["lse_base"] = "2";
  EXPECT_NE(error_of(f).find("the case's LSE base is \"e\""), std::string::npos) << error_of(f);
  f = good;
  f.metadata["sink_rank"] = "2";
  EXPECT_NE(error_of(f).find("metadata 'sink_rank' = \"2\""), std::string::npos) << error_of(f);
  f = good;
  f.metadata["p_cast"] = "fp8";
  EXPECT_NE(error_of(f).find("metadata 'p_cast' = \"fp8\"; expected f32, f16, bf16, f8_e4m3"),
            std::string::npos)
      << error_of(f);
  f = good;
  f.metadata["merge_accum"] = "f8_e4m3";
  EXPECT_NE(error_of(f).find("metadata 'merge_accum' = \"f8_e4m3\"; expected f32, f16 or bf16"),
            std::string::npos)
      << error_of(f);
  f = good;
  f.tensors["o"].dtype = oracle::DType::i64;
  f.tensors["o"].ints.assign(f.tensors["o"].values.size(), 0);
  f.tensors["o"].values.clear();
  EXPECT_NE(error_of(f).find("tensor 'o': dtype I64"), std::string::npos) << error_of(f);
}

// accum tf32, ftz and accum_rounding are read into the claim, written back alike, and refused by
// name when they say something else.
TEST_F(CheckResultFile, Tf32FlushToZeroAndRoundingAreReadAndChecked) {
  StFile f = good;
  f.metadata["accum"] = "tf32";
  f.metadata["ftz"] = "1";
  f.metadata["accum_rounding"] = "nearest";
  auto r = oracle::result_from_file(f, c, "r.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const oracle::Arithmetic* a : {&r->output_claim, &r->partial_claim}) {
    EXPECT_TRUE(a->tf32);
    EXPECT_EQ(a->accum, oracle::DType::f32);
    EXPECT_TRUE(a->ftz);
    EXPECT_FALSE(a->truncating_mma);
  }
  auto again = oracle::result_from_file(oracle::result_to_file(*r, c), c, "again");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->output_claim.tf32 && again->output_claim.ftz);
  EXPECT_FALSE(again->output_claim.truncating_mma);
  f.metadata["ftz"] = "yes";
  EXPECT_NE(error_of(f).find("metadata 'ftz' = \"yes\"; expected \"0\" or \"1\""),
            std::string::npos)
      << error_of(f);
  f.metadata["ftz"] = "0";
  f.metadata["accum_rounding"] = "down";
  EXPECT_NE(error_of(f).find("metadata 'accum_rounding' = \"down\"; expected \"nearest\" or "
                             "\"any\""),
            std::string::npos)
      << error_of(f);
}

TEST_F(CheckResultFile, ApproximateIntrinsicsAreReadAndRangeChecked) {
  StFile f = good;
  f.metadata["exp_rel_err"] = "1e-4";
  f.metadata["log_rel_err"] = "0";
  auto r = oracle::result_from_file(f, c, "r.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output_claim.exp_rel_err, 1e-4);
  EXPECT_EQ(r->partial_claim.log_rel_err, 0.0);
  // Written back, read back alike.
  auto again = oracle::result_from_file(oracle::result_to_file(*r, c), c, "again");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->output_claim.exp_rel_err, 1e-4);
  for (const char* bad : {"-1e-3", "0.6", "nan", "1e-3x"}) {
    f.metadata["exp_rel_err"] = bad;
    EXPECT_NE(error_of(f).find("metadata 'exp_rel_err' = \"" + std::string(bad) + "\""),
              std::string::npos)
        << error_of(f);
  }
}

// Without partials, the partials' format is partial_dtype, else o's format when it is 16-bit,
// else f32, and the result says which rule gave it.
TEST_F(CheckResultFile, ThePartialFormatIsNeverSilent) {
  StFile f = good;
  f.tensors.erase("o_partial");
  f.tensors.erase("lse_partial");
  f.metadata.erase("partial_dtype");
  auto r = oracle::result_from_file(f, c, "r.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output_claim.partial_o, oracle::DType::f32);
  EXPECT_NE(r->partial_format_from.find("f32: no o_partial, no partial_dtype"), std::string::npos);
  f.tensors["o"].dtype = oracle::DType::bf16;
  r = oracle::result_from_file(f, c, "r.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output_claim.partial_o, oracle::DType::bf16);
  EXPECT_NE(r->partial_format_from.find("o's dtype"), std::string::npos);
  f.metadata["partial_dtype"] = "f16";
  r = oracle::result_from_file(f, c, "r.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output_claim.partial_o, oracle::DType::f16);
  EXPECT_EQ(r->partial_format_from, "metadata partial_dtype");
}

// An explicit owner map stands in for the layout: the model's own map passes, a map that swaps
// two keys between the ranks fails on exactly those ranks.
TEST_F(CheckResultFile, AnOwnerMapJudgesEachRankOnItsOwnKeys) {
  StFile f = good;
  f.metadata.erase("interleave");
  std::vector<int64_t> owner(static_cast<size_t>(c.seq()));
  for (int64_t p = 0; p < c.seq(); ++p) owner[static_cast<size_t>(p)] = oracle::dcp_owner(p, 2, 1);
  f.tensors["owner"] = oracle::StTensor{oracle::DType::i64, {c.seq()}, {}, owner};
  auto r = oracle::result_from_file(f, c, "r.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto chk = oracle::check_result(c, *r);
  ASSERT_TRUE(chk.ok()) << chk.status().message();
  EXPECT_TRUE(chk->pass());
  std::swap(f.tensors["owner"].ints[0], f.tensors["owner"].ints[1]);  // keys 0 and 1 trade ranks
  r = oracle::result_from_file(f, c, "r.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  chk = oracle::check_result(c, *r);
  ASSERT_TRUE(chk.ok()) << chk.status().message();
  EXPECT_TRUE(chk->parts[0].cmp.pass()) << "the merged output does not depend on the map";
  EXPECT_FALSE(chk->parts[1].cmp.pass());
  EXPECT_FALSE(chk->parts[2].cmp.pass());
  // Bad maps are refused by name.
  f.tensors["owner"].ints[3] = 2;
  EXPECT_NE(error_of(f).find("tensor 'owner': element [3] = 2; expected a rank in [0, 2)"),
            std::string::npos)
      << error_of(f);
  f.tensors["owner"].shape = {c.seq() - 1};
  f.tensors["owner"].ints.pop_back();
  EXPECT_NE(error_of(f).find("tensor 'owner': shape [29]; expected [30]"), std::string::npos)
      << error_of(f);
  f = good;
  f.tensors["owner"] = oracle::StTensor{oracle::DType::i64, {c.seq()}, {}, owner};
  EXPECT_NE(error_of(f).find("'owner' and metadata 'interleave' both given"), std::string::npos)
      << error_of(f);
}

// lse_layout h_t: the LSEs as [Hq, T] and [N, Hq, T], read back to the same judgement.
TEST_F(CheckResultFile, HeadsFirstLseLayoutIsRead) {
  StFile f = good;
  auto transpose = [](oracle::StTensor& t, int64_t blocks, int64_t T, int64_t Hq) {
    std::vector<double> out(t.values.size());
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t x = 0; x < T; ++x)
        for (int64_t h = 0; h < Hq; ++h)
          out[static_cast<size_t>((b * Hq + h) * T + x)] =
              t.values[static_cast<size_t>((b * T + x) * Hq + h)];
    t.values = out;
    t.shape =
        blocks == 1 && t.shape.size() == 2 ? oracle::Shape{Hq, T} : oracle::Shape{blocks, Hq, T};
  };
  transpose(f.tensors["lse"], 1, c.tokens(), c.q_heads());
  transpose(f.tensors["lse_partial"], 2, c.tokens(), c.q_heads());
  EXPECT_NE(error_of(f).find("tensor 'lse': shape [4, 2]; expected [2, 4]"), std::string::npos)
      << error_of(f);
  f.metadata["lse_layout"] = "h_t";
  auto heads_first = oracle::result_from_file(f, c, "r.safetensors");
  auto tokens_first = oracle::result_from_file(good, c, "r.safetensors");
  ASSERT_TRUE(heads_first.ok()) << heads_first.status().message();
  ASSERT_TRUE(tokens_first.ok());
  EXPECT_EQ(heads_first->lse.data, tokens_first->lse.data);
  EXPECT_EQ(heads_first->lse_partial->data, tokens_first->lse_partial->data);
  f.metadata["lse_layout"] = "th";
  EXPECT_NE(error_of(f).find("metadata 'lse_layout' = \"th\"; expected t_h or h_t"),
            std::string::npos)
      << error_of(f);
}

// The reference itself, as an F64 result, passes with its (tiny) f64 bound.
TEST_F(CheckResultFile, ReferenceAsResultPasses) {
  auto ref = oracle::reference(c);
  ASSERT_TRUE(ref.ok());
  // The reference file claims fp64 itself (accum "f64", p_cast "none").
  const StFile f = oracle::attention_to_file(*ref);
  auto r = oracle::result_from_file(f, c, "ref.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto chk = oracle::check_result(c, *r);
  ASSERT_TRUE(chk.ok()) << chk.status().message();
  EXPECT_TRUE(chk->pass()) << chk->parts.front().cmp.summary();
}

}  // namespace
}  // namespace dcp::props
