// The production path's KV element formats (gpu/kernels/storage_format.hpp) against Eigen's
// bfloat16 and half, independently of the oracle's own conversions: every 16-bit pattern loads to
// Eigen's float and stores back to its bits, and rounding a float into the cache gives Eigen's
// bits for every tie between neighbours and for floats anywhere. Eigen has no fp8, so the fp8
// formats are checked against the oracle's own (oracle/dtype.hpp, written apart from gpu/): every
// byte, every tie, floats anywhere, and the saturation the production path adds.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gpu/kernels/storage_format.hpp"
#include "oracle/dtype.hpp"

namespace {

using dcp::gpu::StorageFormat;

float eigen_float(StorageFormat d, uint16_t b) {
  return d == StorageFormat::bf16 ? static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(b))
                                  : static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(b));
}
uint16_t eigen_bits(StorageFormat d, float x) {
  return d == StorageFormat::bf16 ? Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x))
                                  : Eigen::numext::bit_cast<uint16_t>(Eigen::half(x));
}

TEST(StorageFormat, EveryPatternLoadsAsEigenWidensAndStoresBackToItsBits) {
  for (const StorageFormat d : {StorageFormat::bf16, StorageFormat::f16}) {
    for (uint32_t b = 0; b <= 0xffff; ++b) {
      // Cells of two elements: wide enough for any format, as the compiler sees the calls.
      const uint16_t cell[2] = {static_cast<uint16_t>(b), 0};
      const uint16_t bits = cell[0];
      const float x = dcp::gpu::load_element(d, cell, 0), want = eigen_float(d, bits);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(x)) << dcp::gpu::format_name(d) << " " << b;
        uint16_t back[2] = {};
        dcp::gpu::store_element(d, back, 0, x);  // a NaN stays a NaN of the same sign
        ASSERT_TRUE(std::isnan(dcp::gpu::load_element(d, back, 0)));
        ASSERT_EQ(back[0] & 0x8000u, bits & 0x8000u);
        continue;
      }
      ASSERT_EQ(std::bit_cast<uint32_t>(x), std::bit_cast<uint32_t>(want))
          << dcp::gpu::format_name(d) << " " << b;
      uint16_t back[2] = {};
      dcp::gpu::store_element(d, back, 0, x);
      ASSERT_EQ(back[0], bits) << dcp::gpu::format_name(d) << " " << b;
    }
  }
}

TEST(StorageFormat, StoringRoundsToNearestEvenAsEigenDoes) {
  const auto expect_alike = [](StorageFormat d, float x) {
    if (std::isnan(x)) return;  // NaN payloads are not compared
    uint16_t ours[2] = {};
    dcp::gpu::store_element(d, ours, 0, x);
    ASSERT_EQ(ours[0], eigen_bits(d, x)) << dcp::gpu::format_name(d) << " of " << x;
  };
  for (const StorageFormat d : {StorageFormat::bf16, StorageFormat::f16}) {
    for (uint32_t b = 0; b < 0xffff; ++b) {  // each value, the tie above it and its neighbours
      const float lo = eigen_float(d, static_cast<uint16_t>(b));
      const float hi = eigen_float(d, static_cast<uint16_t>(b + 1));
      if (!std::isfinite(lo) || !std::isfinite(hi) || std::signbit(lo) != std::signbit(hi))
        continue;
      const float mid = static_cast<float>((double(lo) + double(hi)) / 2);  // exact in a float
      for (const float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)})
        ASSERT_NO_FATAL_FAILURE(expect_alike(d, x));
    }
    std::mt19937 rng(5);  // and floats anywhere: overflow, subnormals, infinities
    for (int i = 0; i < 1'000'000; ++i)
      ASSERT_NO_FATAL_FAILURE(expect_alike(d, std::bit_cast<float>(static_cast<uint32_t>(rng()))));
  }
}

// f32 elements are the floats themselves, bit for bit.
TEST(StorageFormat, F32ElementsAreTheirFloats) {
  std::mt19937 rng(9);
  for (int i = 0; i < 100'000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    float cell = 0;
    dcp::gpu::store_element(StorageFormat::f32, &cell, 0, x);
    ASSERT_EQ(std::bit_cast<uint32_t>(dcp::gpu::load_element(StorageFormat::f32, &cell, 0)),
              std::bit_cast<uint32_t>(x));
  }
  EXPECT_EQ(dcp::gpu::format_bytes(StorageFormat::f32), 4);
  EXPECT_EQ(dcp::gpu::format_bytes(StorageFormat::bf16), 2);
  EXPECT_EQ(dcp::gpu::format_bytes(StorageFormat::f16), 2);
  EXPECT_EQ(dcp::gpu::format_bytes(StorageFormat::f8e4m3), 1);
  EXPECT_EQ(dcp::gpu::format_bytes(StorageFormat::f8e5m2), 1);
}

// Every fp8 format of the production path's table, and the oracle's row of the same encoding (its
// own, independent table): each checked against the other.
std::vector<StorageFormat> fp8_formats() {
  std::vector<StorageFormat> out;
  for (const auto& row : dcp::gpu::kFormatNames)
    if (dcp::gpu::is_fp8(row.value)) out.push_back(row.value);
  return out;
}
const std::vector<StorageFormat> kFp8 = fp8_formats();

bool same_encoding(dcp::oracle::Encoding o, dcp::gpu::Fp8Encoding g) {
  using O = dcp::oracle::Encoding;
  using G = dcp::gpu::Fp8Encoding;
  return (o == O::ieee && g == G::ieee) || (o == O::finite && g == G::finite) ||
         (o == O::fnuz && g == G::fnuz);
}
dcp::oracle::DType oracle_of(StorageFormat d) {
  const dcp::gpu::Fp8Bits f = dcp::gpu::format_facts(d).fp8;
  for (const dcp::oracle::DType o : dcp::oracle::quantized_dtypes()) {
    const dcp::oracle::DTypeInfo& row = *dcp::oracle::dtype_info(o);
    if (dcp::oracle::is_fp8(o) && row.man_bits == f.man_bits && row.bias == f.bias &&
        same_encoding(row.encoding, f.encoding))
      return o;
  }
  ADD_FAILURE() << dcp::gpu::format_name(d) << ": no oracle dtype of the same encoding";
  return dcp::oracle::DType::f32;
}
float fp8_largest(StorageFormat d) { return dcp::gpu::format_facts(d).fp8.largest; }
uint8_t stored_byte(StorageFormat d, float x) {
  uint8_t cell[4] = {};
  dcp::gpu::store_element(d, cell, 0, x);
  return cell[0];
}

TEST(StorageFormat, EveryFp8ByteLoadsAsTheOracleDecodesAndStoresBackToItself) {
  for (const StorageFormat d : kFp8) {
    for (uint32_t b = 0; b <= 0xff; ++b) {
      const uint8_t cell[4] = {static_cast<uint8_t>(b), 0, 0, 0};
      const float x = dcp::gpu::load_element(d, cell, 0);
      const double want = dcp::oracle::fp8_bits_to_double(oracle_of(d), cell[0]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(x)) << dcp::gpu::format_name(d) << " " << b;
        // A NaN stays a NaN of the same sign (cells of 4 bytes: wide enough for any format).
        const uint8_t back[4] = {stored_byte(d, x), 0, 0, 0};
        ASSERT_TRUE(std::isnan(dcp::gpu::load_element(d, back, 0)));
        ASSERT_EQ(back[0] & 0x80u, b & 0x80u);
        continue;
      }
      if (std::isinf(want)) {  // E5M2's infinities load as such and store as the largest
        ASSERT_EQ(static_cast<double>(x), want) << dcp::gpu::format_name(d) << " " << b;
        ASSERT_EQ(dcp::gpu::round_to(d, x), want > 0 ? fp8_largest(d) : -fp8_largest(d));
        continue;
      }
      ASSERT_EQ(static_cast<double>(x), want) << dcp::gpu::format_name(d) << " " << b;
      ASSERT_EQ(std::signbit(x), std::signbit(want)) << dcp::gpu::format_name(d) << " " << b;
      ASSERT_EQ(stored_byte(d, x), b) << dcp::gpu::format_name(d) << " " << b;
    }
  }
}

TEST(StorageFormat, StoringFp8RoundsToNearestEvenAsTheOracleAndSaturates) {
  const auto expect_alike = [](StorageFormat d, float x) {
    if (std::isnan(x)) return;
    const double r = dcp::oracle::round_to(oracle_of(d), static_cast<double>(x));
    const uint8_t ours = stored_byte(d, x);
    if (std::fabs(r) <= fp8_largest(d)) {
      ASSERT_EQ(ours, dcp::oracle::double_to_fp8_bits(oracle_of(d), x))
          << dcp::gpu::format_name(d) << " of " << x;
      ASSERT_EQ(static_cast<double>(dcp::gpu::round_to(d, x)), r);
    } else {  // past the largest finite value: the oracle overflows, the cache saturates
      ASSERT_EQ(static_cast<double>(dcp::gpu::round_to(d, x)),
                x > 0 ? fp8_largest(d) : -fp8_largest(d))
          << dcp::gpu::format_name(d) << " of " << x;
      ASSERT_EQ(ours, dcp::oracle::double_to_fp8_bits(oracle_of(d),
                                                      x > 0 ? fp8_largest(d) : -fp8_largest(d)));
    }
  };
  for (const StorageFormat d : kFp8) {
    for (uint32_t b = 0; b < 0xff; ++b) {  // each value, the tie above it and its neighbours
      // Two elements in a cell wide enough for any format's element 1, as the compiler sees it.
      const uint8_t c[8] = {static_cast<uint8_t>(b), static_cast<uint8_t>(b + 1)};
      const float lo = dcp::gpu::load_element(d, c, 0), hi = dcp::gpu::load_element(d, c, 1);
      if (!std::isfinite(lo) || !std::isfinite(hi) || std::signbit(lo) != std::signbit(hi))
        continue;
      const float mid = static_cast<float>((double(lo) + double(hi)) / 2);  // exact in a float
      for (const float x :
           {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), -lo, -mid})
        ASSERT_NO_FATAL_FAILURE(expect_alike(d, x));
    }
    std::mt19937 rng(7);  // and floats anywhere: overflow, subnormals, infinities
    for (int i = 0; i < 1'000'000; ++i)
      ASSERT_NO_FATAL_FAILURE(expect_alike(d, std::bit_cast<float>(static_cast<uint32_t>(rng()))));
    std::uniform_real_distribution<float> near(-2.0f * fp8_largest(d), 2.0f * fp8_largest(d));
    for (int i = 0; i < 1'000'000; ++i) ASSERT_NO_FATAL_FAILURE(expect_alike(d, near(rng)));
  }
}

// int8 codes: every byte loads as its two's-complement integer and stores back to itself, and a
// float rounds to the nearest integer (ties to even) saturated at -128 and 127, as the oracle's
// round_to, at every quarter of the range and past it.
TEST(StorageFormat, EveryInt8CodeLoadsAsItsIntegerAndFloatsRoundAndSaturateAsTheOracle) {
  for (uint32_t b = 0; b <= 0xff; ++b) {
    const uint8_t cell[4] = {static_cast<uint8_t>(b), 0, 0, 0};
    const float x = dcp::gpu::load_element(StorageFormat::i8, cell, 0);
    ASSERT_EQ(x, static_cast<float>(static_cast<int8_t>(b))) << b;
    ASSERT_TRUE(dcp::oracle::representable(dcp::oracle::DType::i8, x)) << b;
    ASSERT_EQ(stored_byte(StorageFormat::i8, x), b) << b;
  }
  for (float x = -200.0f; x <= 200.0f; x += 0.25f) {
    const double r = dcp::oracle::round_to(dcp::oracle::DType::i8, static_cast<double>(x));
    ASSERT_EQ(static_cast<double>(dcp::gpu::round_to(StorageFormat::i8, x)), r) << x;
    ASSERT_EQ(static_cast<int8_t>(stored_byte(StorageFormat::i8, x)), static_cast<int8_t>(r)) << x;
  }
  EXPECT_EQ(dcp::gpu::round_to(StorageFormat::i8, 2.5f), 2.0f);  // ties to even
  EXPECT_EQ(dcp::gpu::round_to(StorageFormat::i8, -3.5f), -4.0f);
  EXPECT_EQ(dcp::gpu::round_to(StorageFormat::i8, INFINITY), 127.0f);
  EXPECT_EQ(dcp::gpu::round_to(StorageFormat::i8, -1e30f), -128.0f);
  EXPECT_EQ(dcp::gpu::round_to(StorageFormat::i8, NAN), 0.0f);
  EXPECT_EQ(dcp::gpu::format_bytes(StorageFormat::i8), 1);
  EXPECT_FALSE(dcp::gpu::parse_format("int8"));  // a cache's format only
  EXPECT_EQ(dcp::gpu::parse_kv_format("int8"), StorageFormat::i8);
}

}  // namespace
