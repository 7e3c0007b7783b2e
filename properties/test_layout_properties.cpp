// Properties of the token layout (gpu/kernels/layout.hpp) and of KV writes
// (gpu/kernels/kv_view.hpp), checked against brute force: owner/row is a bijection, count is exact,
// chunk shares are fair, and a token is stored on its owner only.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "gpu/host/host_device.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/layout.hpp"
#include "properties/suite.hpp"

namespace dcp::props {
namespace {

using gpu::DcpLayout;

RC_GTEST_PROP(Layout, OwnerRowIsABijectionWithPositionAsInverse, ()) {
  layout_bijection_property();
}
RC_GTEST_PROP(Layout, CountMatchesBruteForceAtAnyOffset, ()) { layout_count_property(); }
RC_GTEST_PROP(Layout, ChunkWritesStoreEachTokenOnItsOwnerOnly, ()) { kv_write_property(); }

TEST(Layout, WidenedCapacityIsPhysicalRowsTimesRanks) {
  const DcpLayout l{4, 2};
  EXPECT_EQ(l.logical_capacity(8), 32);
  // The last logical slot fits, the next one does not.
  gpu::KvCacheSpec spec{l, 3, 8, 1, 0, 1, 1, true, gpu::StorageFormat::f32};
  gpu::HostDevice dev(nullptr);
  gpu::Result<gpu::HostKvCache> c = gpu::alloc_device_cache(dev, spec);
  ASSERT_TRUE(c.ok());
  std::vector<float> k(33, 1.0f);
  EXPECT_TRUE(
      gpu::write_device_chunk(dev, *c, gpu::KvChunk{0, 32, gpu::StorageFormat::f32, k.data()})
          .ok());
  // Position 32 belongs to rank 0, so rank 3 skips it and rank 0 must refuse it.
  EXPECT_TRUE(
      gpu::write_device_chunk(dev, *c, gpu::KvChunk{32, 1, gpu::StorageFormat::f32, k.data()})
          .ok());
  gpu::KvCacheSpec spec0{l, 0, 8, 1, 0, 1, 1, true, gpu::StorageFormat::f32};
  gpu::Result<gpu::HostKvCache> c0 = gpu::alloc_device_cache(dev, spec0);
  ASSERT_TRUE(c0.ok());
  const gpu::GpuStatus over0 =
      gpu::write_device_chunk(dev, *c0, gpu::KvChunk{32, 1, gpu::StorageFormat::f32, k.data()});
  ASSERT_FALSE(over0.ok());
  EXPECT_NE(over0.message().find("logical capacity 32"), std::string::npos) << over0.message();
}

TEST(Layout, ExamplesFromTheHeader) {
  const DcpLayout l{4, 2};
  EXPECT_EQ(l.owner(5), 2);
  EXPECT_EQ(l.row(5), 1);
  EXPECT_EQ(l.position(2, 1), 5);
  EXPECT_EQ(l.count(2, 6), 2);
  EXPECT_EQ(l.count(2, 5), 1);
  EXPECT_EQ(l.count(2, 4), 0);
}

}  // namespace
}  // namespace dcp::props
