// Case validation, case files, and the oracle on cases whose answer is known exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"
#include "properties/case_gen.hpp"

namespace dcp::oracle {
namespace {

using ::testing::HasSubstr;

// T = 1, Hq = Hkv = 1, Dk = Dv = 2, S keys; scale 1 so small-integer inputs give exact logits.
Case tiny_case(int64_t S) {
  Case c;
  c.q = Tensor<double>({1, 1, 2});
  c.k = Tensor<double>({S, 1, 2});
  c.v = Tensor<double>({S, 1, 2});
  c.v_dim = 2;
  c.scale = 1.0;
  return c;
}

std::string error_of(const Case& c) { return validate(c).message(); }

TEST(CaseValidation, NamesTheTensorAndTheExpectation) {
  Case c = tiny_case(3);
  EXPECT_TRUE(validate(c).ok());

  Case bad = c;
  bad.k = Tensor<double>({3, 1, 3});
  EXPECT_THAT(error_of(bad), HasSubstr("tensor 'k': head dim 3 != q's head dim 2"));

  bad = c;
  bad.q = Tensor<double>({1, 3, 2});
  bad.k = Tensor<double>({3, 2, 2});
  bad.v = Tensor<double>({3, 2, 2});
  EXPECT_THAT(error_of(bad), HasSubstr("Hq = 3 is not a multiple of Hkv = 2"));

  bad = c;
  bad.k.data[4] = NAN;
  EXPECT_THAT(error_of(bad), HasSubstr("tensor 'k': element 4 is nan"));

  bad = c;
  bad.q.data[1] = INFINITY;
  EXPECT_THAT(error_of(bad), HasSubstr("tensor 'q': element 1 is inf"));

  bad = c;
  bad.q.data[0] = 0.1;  // not an fp32 value
  EXPECT_THAT(error_of(bad), HasSubstr("tensor 'q': element 0 = 0.10000000000000001 is not a F32"));

  bad = c;
  bad.topk = Tensor<int64_t>({1, 2}, -1);
  bad.topk.data[1] = 3;
  EXPECT_THAT(error_of(bad),
              HasSubstr("tensor 'topk': element [0, 1] = 3; expected a key position in [0, 3)"));

  bad = c;
  bad.topk = Tensor<int64_t>({1, 2}, 1);
  EXPECT_THAT(error_of(bad), HasSubstr("selects key 1 twice"));

  bad = c;
  bad.v = Tensor<double>({2, 1, 2});
  EXPECT_THAT(error_of(bad), HasSubstr("tensor 'v': shape [2, 1, 2]; expected [3, 1, Dv]"));

  bad = c;
  bad.sink = {1.0, 2.0};
  EXPECT_THAT(error_of(bad), HasSubstr("tensor 'sink': 2 values; expected Hq = 1"));

  bad = c;
  bad.q_pos = {-1};
  EXPECT_THAT(error_of(bad), HasSubstr("tensor 'q_pos': element 0 = -1"));

  bad = c;
  bad.v = Tensor<double>();
  bad.v_dim = 5;
  EXPECT_THAT(error_of(bad), HasSubstr("metadata 'v_dim': 5 for a shared latent; expected 1..2"));

  EXPECT_FALSE(reference(bad).ok());  // the oracle refuses what validation refuses
}

TEST(OracleExact, OneVisibleKeyReturnsItsValueAndLogit) {
  Case c = tiny_case(1);
  c.q.data = {1.0, 2.0};
  c.k.data = {3.0, -1.0};  // s = 1*3 + 2*(-1) = 1
  c.v.data = {0.25, -7.0};
  auto a = reference(c);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->o.data[0], 0.25);
  EXPECT_EQ(a->o.data[1], -7.0);
  EXPECT_EQ(a->lse.data[0], 1.0);
}

TEST(OracleExact, IdenticalKeysAverageTheirValues) {
  Case c = tiny_case(4);
  c.q.data = {1.0, 1.0};
  for (int j = 0; j < 4; ++j) {
    c.k.at({j, 0, 0}) = 0.5;
    c.v.at({j, 0, 0}) = j;  // mean 1.5
    c.v.at({j, 0, 1}) = 1.0;
  }
  auto a = reference(c);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->o.data[0], 1.5);
  EXPECT_EQ(a->o.data[1], 1.0);
  EXPECT_EQ(a->lse.data[0], 0.5 + std::log(4.0));  // ln 4 + 0.5, correctly rounded here
}

TEST(OracleExact, TwoTokensGiveTheLogisticOfTheirLogitGap) {
  // The design's non-identifiability example: v = 1 and 0, so O = sigmoid(s1 - s0).
  Case c = tiny_case(2);
  c.q.data = {1.0, 0.0};
  c.k.data = {0.0, 0.0, 2.0, 0.0};
  c.v.data = {0.0, 0.0, 1.0, 0.0};
  auto a = reference(c);
  ASSERT_TRUE(a.ok());
  EXPECT_DOUBLE_EQ(a->o.data[0], 1.0 / (1.0 + std::exp(-2.0)));
  EXPECT_DOUBLE_EQ(a->lse.data[0], std::log(1.0 + std::exp(2.0)));
}

TEST(OracleExact, EmptyRowIsZeroWithMinusInfinityLse) {
  Case c = tiny_case(3);
  c.q_pos = {0};
  c.causal = true;
  c.window = 1;
  c.topk = Tensor<int64_t>({1, 1}, 2);  // selects key 2, which is in the future of position 0
  auto a = reference(c);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->o.data[0], 0.0);
  EXPECT_EQ(a->o.data[1], 0.0);
  EXPECT_EQ(a->lse.data[0], -INFINITY);
}

TEST(OracleExact, SinkAloneGivesZeroOutputAndTheSinkLogit) {
  Case c = tiny_case(2);
  c.q_pos = {0};
  c.topk = Tensor<int64_t>({1, 1}, -1);  // all padding: nothing visible
  c.sink = {1.5};
  auto a = reference(c);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->o.data[0], 0.0);
  EXPECT_EQ(a->lse.data[0], 1.5);
}

TEST(OracleExact, BaseTwoLseIsNaturalTimesLog2e) {
  props::CaseSpec s;
  s.seq = 30;
  s.seed = 11;
  Case c = props::make_case(s);
  auto e = reference(c);
  c.lse_base = LseBase::two;
  auto two = reference(c);
  ASSERT_TRUE(e.ok() && two.ok());
  for (int64_t r = 0; r < e->lse.numel(); ++r) {
    EXPECT_NEAR(two->lse.data[r], e->lse.data[r] * kLog2e, 4e-16 * std::fabs(two->lse.data[r]));
  }
  EXPECT_EQ(two->o.data, e->o.data);
}

TEST(CaseFile, RoundTripsEveryField) {
  props::CaseSpec s;
  s.tokens = 2;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.seq = 20;
  s.sink = true;
  s.topk = 5;
  s.window = 7;
  s.softcap = 12.5;
  s.explicit_pos = true;
  s.explicit_scale = true;
  s.q_dtype = DType::bf16;
  s.kv_dtype = DType::f16;
  s.lse_base = LseBase::two;
  s.seed = 3;
  const Case c = props::make_case(s);
  const auto path = std::filesystem::temp_directory_path() / "dcp_case_roundtrip.safetensors";
  ASSERT_TRUE(save_case(path.string(), c).ok());
  auto back = load_case(path.string());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->q.data, c.q.data);
  EXPECT_EQ(back->k.data, c.k.data);
  EXPECT_EQ(back->v.data, c.v.data);
  EXPECT_EQ(back->q_dtype, DType::bf16);
  EXPECT_EQ(back->kv_dtype, DType::f16);
  EXPECT_EQ(back->q_pos, c.q_pos);
  EXPECT_EQ(back->sink, c.sink);
  EXPECT_EQ(back->topk.data, c.topk.data);
  EXPECT_EQ(back->scale, c.scale);
  EXPECT_EQ(back->window, 7);
  EXPECT_EQ(back->softcap, 12.5);
  EXPECT_EQ(back->lse_base, LseBase::two);
  std::filesystem::remove(path);
}

TEST(CaseFile, RejectsUnknownNamesAndBadMetadata) {
  props::CaseSpec s;
  StFile f = case_to_file(props::make_case(s));
  StFile bad = f;
  bad.metadata["softcapp"] = "3";
  EXPECT_THAT(case_from_file(bad, "c.st").status().message(),
              HasSubstr("c.st: unknown metadata 'softcapp'"));
  bad = f;
  bad.metadata["x_source"] = "engine dump";
  EXPECT_TRUE(case_from_file(bad, "c.st").ok());
  bad = f;
  bad.tensors["kv"] = bad.tensors["k"];
  EXPECT_THAT(case_from_file(bad, "c.st").status().message(), HasSubstr("unknown tensor 'kv'"));
  bad = f;
  bad.metadata["causal"] = "yes";
  EXPECT_THAT(case_from_file(bad, "c.st").status().message(),
              HasSubstr("metadata 'causal' = \"yes\"; expected \"1\" or \"0\""));
  bad = f;
  bad.metadata["scale"] = "0.1x";
  EXPECT_THAT(case_from_file(bad, "c.st").status().message(), HasSubstr("metadata 'scale'"));
  bad = f;
  bad.metadata["lse_base"] = "10";
  EXPECT_THAT(case_from_file(bad, "c.st").status().message(), HasSubstr("'lse_base' = \"10\""));
  bad = f;
  bad.tensors["q"].dtype = DType::f64;
  EXPECT_THAT(case_from_file(bad, "c.st").status().message(),
              HasSubstr("tensor 'q': dtype F64; inputs are F32, F16 or BF16"));
  bad = f;
  bad.tensors.erase("k");
  EXPECT_THAT(case_from_file(bad, "c.st").status().message(), HasSubstr("missing tensor 'k'"));
  bad = f;
  bad.tensors["q_pos"] = StTensor{DType::f32, {1}, {0.0}, {}};
  EXPECT_THAT(case_from_file(bad, "c.st").status().message(),
              HasSubstr("tensor 'q_pos': F32 [1]; expected I64 [T]"));
}

}  // namespace
}  // namespace dcp::oracle
