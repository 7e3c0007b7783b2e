// The production path's KV element formats (gpu/kernels/storage_format.hpp) against Eigen's
// bfloat16 and half, independently of the oracle's own conversions: every 16-bit pattern loads to
// Eigen's float and stores back to its bits, and rounding a float into the cache gives Eigen's
// bits for every tie between neighbours and for floats anywhere.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "gpu/kernels/storage_format.hpp"

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
}

}  // namespace
