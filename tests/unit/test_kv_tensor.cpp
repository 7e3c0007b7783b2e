// Keys and values held as a file stores them (oracle/kv_tensor.hpp): every stored bit pattern
// widens to the value the decoder gives and is flagged non-finite exactly when that value is; a
// case read in place computes bit for bit what the same case held as doubles computes, in both
// tiers and for the bound; a non-finite stored element is named by its index; a case generated
// as stored bytes holds the values generated as doubles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "oracle/case_file.hpp"
#include "oracle/tolerance.hpp"
#include "properties/case_gen.hpp"

namespace dcp::oracle {
namespace {

// The 16-bit formats and every fp8 one of the table.
std::vector<DType> sixteen_and_fp8() {
  std::vector<DType> out = {DType::bf16, DType::f16};
  for (const DType t : quantized_dtypes())
    if (is_fp8(t)) out.push_back(t);
  return out;
}

// Every pattern of a 16- or 8-bit format: widen_stored and first_nonfinite against the decoder.
TEST(KvTensor, EveryStoredPatternWidensAndIsFlaggedAsTheDecoderSays) {
  for (const DType t : sixteen_and_fp8()) {
    const int width = dtype_bytes(t);
    const uint32_t patterns = width == 2 ? 1u << 16 : 1u << 8;
    for (uint32_t b = 0; b < patterns; ++b) {
      uint8_t bytes[8] = {};
      std::memcpy(bytes, &b, static_cast<size_t>(width));  // little-endian
      const double decoded = width == 2 ? (t == DType::bf16 ? bf16_bits_to_double(uint16_t(b))
                                                            : f16_bits_to_double(uint16_t(b)))
                                        : fp8_bits_to_double(t, uint8_t(b));
      double widened;
      widen_stored(t, bytes, 1, 0.75, &widened);
      if (std::isnan(decoded)) {
        EXPECT_TRUE(std::isnan(widened)) << dtype_name(t) << " " << b;
      } else {
        EXPECT_EQ(widened, decoded * 0.75) << dtype_name(t) << " " << b;
      }
      EXPECT_EQ(first_nonfinite(t, bytes, 1), std::isfinite(decoded) ? -1 : 0)
          << dtype_name(t) << " " << b;
    }
  }
}

// narrow_to_stored inverts widen_stored: every finite or infinite pattern comes back bit for bit
// (a NaN as a NaN of the same sign), in every stored format.
TEST(KvTensor, EveryStoredPatternNarrowsBackToItsBits) {
  for (const DType t : sixteen_and_fp8()) {
    const int width = dtype_bytes(t);
    const uint32_t patterns = width == 2 ? 1u << 16 : 1u << 8;
    for (uint32_t b = 0; b < patterns; ++b) {
      uint8_t bytes[2] = {}, back[2] = {};
      std::memcpy(bytes, &b, static_cast<size_t>(width));
      double x, y;
      widen_stored(t, bytes, 1, 1.0, &x);
      narrow_to_stored(t, &x, 1, back);
      widen_stored(t, back, 1, 1.0, &y);
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(y) && std::signbit(y) == std::signbit(x))
            << dtype_name(t) << " " << b;
      } else {
        EXPECT_EQ(std::memcmp(bytes, back, static_cast<size_t>(width)), 0)
            << dtype_name(t) << " " << b;
      }
    }
  }
}

// to_stored holds a tensor of quantized values (value = stored element x its KV head's scale) as
// the elements and the scales: widened again, every value is the same double.
TEST(KvTensor, ToStoredKeepsEveryQuantizedValue) {
  props::CaseSpec spec;
  spec.kv_dtype = DType::f8e4m3;
  spec.kv_scale = props::KvScale::per_head;
  spec.kv_heads = spec.q_heads = 3;
  spec.seq = 50;
  const Case c = props::make_case(spec);  // K and V as doubles, quantized with per-head scales
  ASSERT_FALSE(c.k.is_stored());
  const KvTensor k = c.k.to_stored(DType::f8e4m3, c.k_scale);
  ASSERT_TRUE(k.is_stored());
  EXPECT_EQ(k.bytes_held(), c.k.numel());
  const KvTensor wide = k.widened();
  ASSERT_EQ(wide.data.size(), c.k.data.size());
  for (size_t i = 0; i < wide.data.size(); ++i) ASSERT_EQ(wide.data[i], c.k.data[i]) << i;
}

// A generated case holding K and V as stored bytes has the values of the same spec held as
// doubles, in every 16- and 8-bit format and for the value styles drawn straight into bytes;
// asked to stop, its generation ends between blocks of draws.
TEST(KvTensor, AStoredGeneratedCaseHoldsTheSameValuesAndStopsWhenAsked) {
  for (const DType kv : {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2})
    for (const props::ValueStyle style :
         {props::ValueStyle::normal, props::ValueStyle::peaked, props::ValueStyle::tiny}) {
      props::CaseSpec spec;
      spec.kv_heads = 2;
      spec.q_heads = 4;
      spec.head_dim = spec.v_dim = 16;
      spec.seq = 3000;  // 96000 draws of K: two blocks
      spec.kv_dtype = kv;
      spec.values = style;
      spec.seed = 11;
      const std::string what = props::describe(spec);
      const Case doubles = props::make_case(spec);
      int polls = 0;
      const auto stored =
          props::make_case_unless(spec, props::KvHolding::stored, [&] { return ++polls < 0; });
      ASSERT_TRUE(stored.has_value()) << what;
      EXPECT_EQ(polls, 4) << what;  // K and V, two blocks each
      ASSERT_TRUE(stored->k.is_stored() && stored->v.is_stored()) << what;
      EXPECT_EQ(stored->k.bytes_held(), stored->k.numel() * dtype_bytes(kv)) << what;
      EXPECT_EQ(stored->k.widened().data, doubles.k.data) << what;
      EXPECT_EQ(stored->v.widened().data, doubles.v.data) << what;
      EXPECT_EQ(stored->q.data, doubles.q.data) << what;  // peaked aligns q with a stored key
    }

  props::CaseSpec spec;
  spec.seq = 20000;  // K: 160000 draws, three blocks
  int polls = 0;
  EXPECT_FALSE(
      props::make_case_unless(spec, props::KvHolding::stored, [&] { return ++polls > 1; }));
  EXPECT_EQ(polls, 2);  // stopped before K's second block
}

struct ReadBack {
  std::vector<uint8_t> bytes;
  Case c;
};

// The case through its file, read as case files are (K and V in place).
ReadBack in_place(const Case& c) {
  ReadBack r;
  r.bytes = serialize_safetensors(case_to_file(c));
  auto f = parse_safetensors(r.bytes.data(), r.bytes.size(), "c.st", kCaseReadOptions);
  EXPECT_TRUE(f.ok()) << f.status().message();
  auto back = case_from_file(std::move(*f), "c.st");
  EXPECT_TRUE(back.ok()) << back.status().message();
  r.c = std::move(*back);
  return r;
}

TEST(KvTensor, ACaseReadInPlaceComputesWhatItsDoublesCompute) {
  std::vector<props::CaseSpec> specs(4);
  specs[0].kv_dtype = DType::bf16;
  specs[0].seq = 3000;  // several fast-tier blocks
  specs[0].q_heads = 4;
  specs[0].kv_heads = 2;
  specs[1].kv_dtype = DType::f8e4m3;
  specs[1].kv_scale = props::KvScale::per_head;
  specs[1].kv_heads = 2;
  specs[1].q_heads = 4;
  specs[1].sink = true;
  specs[2].kv_dtype = DType::f16;
  specs[2].shared_latent = true;
  specs[2].softcap = 20.0;
  specs[3].kv_dtype = DType::f8e5m2;
  specs[3].kv_scale = props::KvScale::per_tensor;
  specs[3].topk = 5;
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].seed = 11 + i;
    const Case c = props::make_case(specs[i]);
    ASSERT_TRUE(validate(c).ok()) << validate(c).message();
    const ReadBack r = in_place(c);
    ASSERT_TRUE(r.c.k.is_stored());
    for (const Tier tier : {Tier::fast, Tier::certify}) {
      auto a = reference(c, tier), b = reference(r.c, tier);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->o.data, b->o.data) << props::describe(specs[i]);
      EXPECT_EQ(a->lse.data, b->lse.data) << props::describe(specs[i]);
    }
    auto ref = reference(c);
    auto bound_a = derive_bound(c, *ref, Arithmetic{}),
         bound_b = derive_bound(r.c, *ref, Arithmetic{});
    ASSERT_TRUE(bound_a.ok() && bound_b.ok());
    EXPECT_EQ(bound_a->o.data, bound_b->o.data) << props::describe(specs[i]);
    EXPECT_EQ(bound_a->lse.data, bound_b->lse.data) << props::describe(specs[i]);
  }
}

TEST(KvTensor, ANonFiniteStoredElementIsNamedByItsIndex) {
  props::CaseSpec s;
  s.kv_dtype = DType::bf16;
  s.seq = 6;
  const Case c = props::make_case(s);
  StFile f = case_to_file(c);
  f.tensors.at("v").values[5] = INFINITY;
  const std::vector<uint8_t> bytes = serialize_safetensors(f);
  auto parsed = parse_safetensors(bytes.data(), bytes.size(), "c.st", kCaseReadOptions);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(case_from_file(std::move(*parsed), "c.st").status().message(),
            "c.st: tensor 'v': element 5 is inf; inputs must be finite");
}

}  // namespace
}  // namespace dcp::oracle
