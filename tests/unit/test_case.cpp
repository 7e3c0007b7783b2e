// Case validation, case files, and the oracle on cases whose answer is known exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "oracle/attention.hpp"
#include "oracle/batch.hpp"
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

TEST(OracleExact, AlibiPenalizesEachKeyByItsDistanceToTheQuery) {
  // q . k = 0 for every key, so the logits are the biases alone: -m |j - i| for the query at
  // position 2 (non-causal: key 3 is one ahead and penalized as much as key 1).
  Case c = tiny_case(4);
  c.q_pos = {2};
  c.causal = false;
  c.alibi_slopes = {0.5};
  for (int j = 0; j < 4; ++j) c.v.at({j, 0, 0}) = j;
  auto a = reference(c);
  ASSERT_TRUE(a.ok());
  const double w[4] = {std::exp(-1.0), std::exp(-0.5), 1.0, std::exp(-0.5)};
  const double z = w[0] + w[1] + w[2] + w[3];
  EXPECT_NEAR(a->o.data[0], (w[1] + 2.0 * w[2] + 3.0 * w[3]) / z, 4e-16);
  EXPECT_NEAR(a->lse.data[0], std::log(z), 4e-16);
  // Slope 0: no bias, the plain average of the values.
  c.alibi_slopes = {0.0};
  auto flat = reference(c);
  ASSERT_TRUE(flat.ok());
  EXPECT_NEAR(flat->o.data[0], 1.5, 4e-16);
}

TEST(CaseValidation, NamesABadAlibiSlope) {
  Case c = tiny_case(2);
  c.alibi_slopes = {1.0, 2.0};
  EXPECT_THAT(error_of(c), HasSubstr("tensor 'alibi_slopes': 2 values; expected Hq = 1"));
  c.alibi_slopes = {NAN};
  EXPECT_THAT(error_of(c), HasSubstr("tensor 'alibi_slopes': element 0 is nan; expected finite"));
  c.alibi_slopes = {0.1};  // not an F32 value
  EXPECT_THAT(error_of(c), ::testing::AllOf(HasSubstr("tensor 'alibi_slopes': element 0 = 0.1"),
                                            HasSubstr("is not an F32 value")));
  // 2^127 times the largest distance, 1 (the query at 1, keys 0 and 1): past half of fp32's range
  c.alibi_slopes = {std::ldexp(1.0, 127)};
  EXPECT_THAT(error_of(c), HasSubstr("times distances up to 1 leaves fp32's range"));
  c.alibi_slopes = {std::ldexp(1.0, 126)};
  EXPECT_TRUE(validate(c).ok());
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
  const props::CaseSpec s{.tokens = 2,
                          .q_heads = 4,
                          .kv_heads = 2,
                          .seq = 20,
                          .q_dtype = DType::bf16,
                          .kv_dtype = DType::f16,
                          .explicit_pos = true,
                          .window = 7,
                          .softcap = 12.5,
                          .sink = true,
                          .alibi = true,
                          .topk = 5,
                          .lse_base = LseBase::two,
                          .explicit_scale = true,
                          .seed = 3};
  const Case c = props::make_case(s);
  const auto path = std::filesystem::temp_directory_path() / "dcp_case_roundtrip.safetensors";
  ASSERT_TRUE(save_case(path.string(), c).ok());
  auto back = load_case(path.string());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->q.data, c.q.data);
  EXPECT_TRUE(back->k.is_stored());  // read in place from the file
  EXPECT_EQ(back->k.widened().data, c.k.data);
  EXPECT_EQ(back->v.widened().data, c.v.data);
  EXPECT_EQ(back->q_dtype, DType::bf16);
  EXPECT_EQ(back->kv_dtype, DType::f16);
  EXPECT_EQ(back->q_pos, c.q_pos);
  EXPECT_EQ(back->sink, c.sink);
  ASSERT_EQ(back->alibi_slopes.size(), 4u);
  EXPECT_EQ(back->alibi_slopes, c.alibi_slopes);
  EXPECT_EQ(back->topk.data, c.topk.data);
  EXPECT_EQ(back->scale, c.scale);
  EXPECT_EQ(back->window, 7);
  EXPECT_EQ(back->softcap, 12.5);
  EXPECT_EQ(back->lse_base, LseBase::two);
  std::filesystem::remove(path);
}

// An fp8 or int8 cache with scales of each grain: the file holds the stored bytes and the scales
// ([1], [Hkv], [S, 1], [S, Hkv]), the case the dequantized values (stored times scale, exactly),
// and a save writes the same bytes back.
TEST(CaseFile, QuantizedKeysAndValuesWithScalesAreDequantizedExactly) {
  for (const props::KvScale per : {props::KvScale::per_tensor, props::KvScale::per_head,
                                   props::KvScale::per_token, props::KvScale::per_token_head}) {
    for (const DType fp8 : quantized_dtypes()) {
      props::CaseSpec s;
      s.q_heads = 4;
      s.kv_heads = 2;
      s.seq = 24;
      s.kv_dtype = fp8;
      s.kv_scale = per;
      s.seed = 5;
      const Case c = props::make_case(s);
      ASSERT_TRUE(validate(c).ok()) << validate(c).message();
      const size_t entries[] = {0, 1, 2, 24, 48};  // by KvScale
      ASSERT_EQ(c.k_scale.size(), entries[static_cast<int>(per)]);
      const StFile f = case_to_file(c);
      const StTensor& k8 = f.tensors.at("k");
      EXPECT_EQ(k8.dtype, fp8);
      const Shape scale_shapes[] = {{}, {1}, {2}, {24, 1}, {24, 2}};
      EXPECT_EQ(f.tensors.at("v_scale").shape, scale_shapes[static_cast<int>(per)]);
      for (int64_t i = 0; i < c.k.numel(); ++i) {
        const int64_t row = i / c.k.dim(2);
        const double scale = c.k_scale_of(row / 2, row % 2);
        if (props::scales_by_token(per)) {  // no two tokens share one (drawn scales)
          EXPECT_NE(scale, c.k_scale_of((row / 2 + 1) % 24, row % 2)) << i;
        }
        EXPECT_TRUE(representable(fp8, k8.values[i])) << i;
        EXPECT_EQ(k8.values[i] * scale, c.k.data[i]) << i;
      }
      const std::vector<uint8_t> bytes = serialize_safetensors(f);
      // Read as a case file is: K and V left in the bytes, widened and scaled a row at a time.
      auto parsed = parse_safetensors(bytes.data(), bytes.size(), "c.st", kCaseReadOptions);
      ASSERT_TRUE(parsed.ok()) << parsed.status().message();
      auto back = case_from_file(*parsed, "c.st");
      ASSERT_TRUE(back.ok()) << back.status().message();
      EXPECT_TRUE(back->k.is_stored());
      EXPECT_EQ(back->k.widened().data, c.k.data);
      EXPECT_EQ(back->v.widened().data, c.v.data);
      EXPECT_EQ(back->k_scale, c.k_scale);
      EXPECT_EQ(back->v_scale, c.v_scale);
      EXPECT_EQ(back->kv_scale_grain, c.kv_scale_grain);
      EXPECT_EQ(serialize_safetensors(case_to_file(*back)), bytes);
    }
  }
}

TEST(CaseFile, RejectsBadScales) {
  props::CaseSpec s;
  s.kv_heads = 2;
  s.q_heads = 2;
  s.kv_dtype = DType::f8e4m3;
  s.kv_scale = props::KvScale::per_head;
  const StFile f = case_to_file(props::make_case(s));
  auto error = [](const StFile& x) { return case_from_file(x, "c.st").status().message(); };
  StFile bad = f;
  bad.tensors["k_scale"].values = {0.5, 0.25, 0.125};
  bad.tensors["k_scale"].shape = {3};
  EXPECT_THAT(error(bad), HasSubstr("tensor 'k_scale': 3 values; expected 1 (per tensor) or "
                                    "Hkv = 2 (per KV head)"));
  bad = f;
  bad.tensors["v_scale"].values = {0.5, -1.0};
  EXPECT_THAT(error(bad), HasSubstr("tensor 'v_scale': element 1 = -1; expected a finite F32 "
                                    "value > 0"));
  bad = f;
  bad.tensors["k_scale"].dtype = DType::bf16;
  EXPECT_THAT(error(bad), HasSubstr("tensor 'k_scale': BF16 [2]; expected F32"));
  // By token: [S, 1] or [S, Hkv] (S = 16 here), K's and V's of one grain.
  bad = f;
  bad.tensors["k_scale"].values.assign(48, 0.5);
  bad.tensors["k_scale"].shape = {16, 3};
  bad.tensors["v_scale"] = bad.tensors["k_scale"];
  EXPECT_THAT(error(bad), HasSubstr("tensor 'k_scale': [16, 3]; expected [S, 1] or [S, Hkv] = "
                                    "[16, 2] by token"));
  bad = f;
  bad.tensors["v_scale"].values.assign(16, 0.5);
  bad.tensors["v_scale"].shape = {16, 1};
  EXPECT_THAT(error(bad), HasSubstr("tensor 'v_scale': [16, 1] is by token; 'k_scale' is not"));
  bad.tensors["k_scale"] = bad.tensors["v_scale"];  // [S, Hkv] read transposed is refused
  bad.tensors["k_scale"].values.assign(32, 0.5);
  bad.tensors["k_scale"].shape = {2, 16};
  EXPECT_THAT(error(bad), HasSubstr("tensor 'k_scale': [2, 16]; expected [S, 1] or [S, Hkv] = "
                                    "[16, 2] by token"));
  bad.tensors["k_scale"].shape = {16, 2};  // K per token and head, V per token: one shape
  EXPECT_THAT(error(bad), HasSubstr("tensor 'v_scale': 16 values by token; expected k_scale's 32"));
  // A value that is no stored E4M3 value times its scale (the scale is not what the file says).
  Case c = props::make_case(s);
  {  // a case built in memory: by token, S or S x Hkv scales
    props::CaseSpec t = s;
    t.kv_scale = props::KvScale::per_token;
    Case by_token = props::make_case(t);
    by_token.k_scale.push_back(0.5);
    EXPECT_THAT(validate(by_token).message(),
                HasSubstr("tensor 'k_scale': 17 values by token; expected S = 16 (per token) or "
                          "S x Hkv = 32 (per token and KV head)"));
  }
  c.k.data[0] += 0.01 * c.k_scale_of(0, 0);
  EXPECT_THAT(validate(c).message(), HasSubstr("tensor 'k': element 0 = "));
  EXPECT_THAT(validate(c).message(), HasSubstr("is not a F8_E4M3 value times its scale"));
  props::CaseSpec latent = s;
  latent.shared_latent = true;
  bad = case_to_file(props::make_case(latent));
  bad.tensors["v_scale"] = bad.tensors["k_scale"];
  EXPECT_THAT(error(bad), HasSubstr("tensor 'v_scale': given for a shared latent"));
}

// A batch file splits into its requests: rows of q, q_pos by cu_seqlens_q, of k, v by
// cu_seqlens_k; a result's o, lse (either layout) and partials by the query rows.
TEST(Batch, SplitsCaseAndResultByTheOffsets) {
  props::CaseSpec s;
  s.tokens = 3;
  s.seq = 10;
  s.explicit_pos = true;
  StFile f = case_to_file(props::make_case(s));
  f.tensors["cu_seqlens_q"] = StTensor{DType::i64, {3}, {}, {0, 1, 3}};
  f.tensors["cu_seqlens_k"] = StTensor{DType::i64, {3}, {}, {0, 4, 10}};
  auto parts = split_case_file(f, "b.st");
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  const StTensor& q1 = parts->at(1).tensors.at("q");
  EXPECT_EQ(q1.shape, (Shape{2, s.q_heads, s.head_dim}));
  const std::vector<double>& q = f.tensors.at("q").values;
  EXPECT_EQ(q1.values, std::vector<double>(q.begin() + s.q_heads * s.head_dim, q.end()));
  EXPECT_EQ(parts->at(0).tensors.at("k").shape[0], 4);
  EXPECT_EQ(parts->at(1).tensors.at("v").shape[0], 6);
  EXPECT_EQ(parts->at(1).tensors.count("cu_seqlens_q"), 0u);
  EXPECT_EQ(parts->at(1).tensors.at("q_pos").ints,
            std::vector<int64_t>(f.tensors.at("q_pos").ints.begin() + 1,
                                 f.tensors.at("q_pos").ints.end()));

  // lse [Hq, T_total] in the h_t layout, sliced along T; lse_partial [N, Hq, T_total] likewise.
  StFile r;
  r.metadata["lse_layout"] = "h_t";
  r.tensors["lse"] = StTensor{DType::f32, {2, 3}, {0, 1, 2, 10, 11, 12}, {}};
  r.tensors["lse_partial"] = StTensor{DType::f32, {1, 2, 3}, {0, 1, 2, 10, 11, 12}, {}};
  auto results = split_result_file(r, f, "r.st");
  ASSERT_TRUE(results.ok()) << results.status().message();
  EXPECT_EQ(results->at(1).tensors.at("lse").values, (std::vector<double>{1, 2, 11, 12}));
  EXPECT_EQ(results->at(1).tensors.at("lse_partial").shape, (Shape{1, 2, 2}));
  EXPECT_EQ(results->at(0).tensors.at("lse").values, (std::vector<double>{0, 10}));
  r.tensors["lse"].shape = {3, 2};  // t_h rows where h_t was declared: the wrong extent
  EXPECT_THAT(split_result_file(r, f, "r.st").status().message(),
              HasSubstr("r.st: tensor 'lse': shape [3, 2]; expected dimension 1 to hold the "
                        "batch's 3 rows"));

  // One request: the file as it is.
  StFile one = f;
  one.tensors.erase("cu_seqlens_q");
  one.tensors.erase("cu_seqlens_k");
  auto whole = split_case_file(one, "c.st");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->size(), 1u);
}

TEST(Batch, RejectsBadOffsetsByName) {
  props::CaseSpec s;
  s.tokens = 2;
  s.seq = 8;
  const StFile good = case_to_file(props::make_case(s));
  auto error = [&](std::vector<int64_t> cu_q, std::vector<int64_t> cu_k) {
    StFile f = good;
    if (!cu_q.empty())
      f.tensors["cu_seqlens_q"] =
          StTensor{DType::i64, {static_cast<int64_t>(cu_q.size())}, {}, cu_q};
    if (!cu_k.empty())
      f.tensors["cu_seqlens_k"] =
          StTensor{DType::i64, {static_cast<int64_t>(cu_k.size())}, {}, cu_k};
    return split_case_file(f, "b.st").status().message();
  };
  EXPECT_THAT(error({0, 2}, {}), HasSubstr("b.st: tensor 'cu_seqlens_q' without 'cu_seqlens_k'"));
  {  // a batch's scales are the batch's: by token they would be one request's or the wrong ones
    StFile f = good;
    f.tensors["cu_seqlens_q"] = StTensor{DType::i64, {3}, {}, {0, 1, 2}};
    f.tensors["cu_seqlens_k"] = StTensor{DType::i64, {3}, {}, {0, 4, 8}};
    f.tensors["k_scale"] = StTensor{DType::f32, {8, 1}, std::vector<double>(8, 0.5), {}};
    EXPECT_THAT(split_case_file(f, "b.st").status().message(),
                HasSubstr("b.st: tensor 'k_scale': [8, 1] is by token; a batch's scales are the "
                          "batch's, [1] or [Hkv]"));
  }
  EXPECT_THAT(error({1, 2}, {0, 8}), HasSubstr("tensor 'cu_seqlens_q': element 0 = 1; expected 0"));
  EXPECT_THAT(error({0, 2}, {0, 5, 3, 8}),
              HasSubstr("tensor 'cu_seqlens_k': element 2 = 3 < element 1 = 5"));
  EXPECT_THAT(error({0, 2}, {0, 7}),
              HasSubstr("tensor 'cu_seqlens_k': last element 7 != k's S_total = 8"));
  EXPECT_THAT(error({0, 2, 2}, {0, 4, 8}),
              HasSubstr("tensor 'cu_seqlens_q': request 1 has no query token"));
  EXPECT_THAT(error({0, 1, 2}, {0, 8}), HasSubstr("both are [B+1]"));
  EXPECT_THAT(error({0}, {0}), HasSubstr("expected I64 [B+1] with B >= 1 requests"));
  EXPECT_TRUE(case_from_file(split_case_file(good, "c.st")->front(), "c.st").ok());
  StFile batch = good;
  batch.tensors["cu_seqlens_q"] = StTensor{DType::i64, {2}, {}, {0, 2}};
  EXPECT_THAT(case_from_file(batch, "c.st").status().message(),
              HasSubstr("tensor 'cu_seqlens_q': a batch of requests"));
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
              HasSubstr("tensor 'q': dtype F64; inputs are " +
                        dtype_names([](DType t) { return is_float(t) && t != DType::f64; })));
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
