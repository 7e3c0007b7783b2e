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

// A batch's write goes to its request's pages only: a request outside the tables, or a chunk past
// the pages its table holds, is refused before anything is written.
TEST(Layout, ABatchWritesInsideItsRequestsPagesOnly) {
  const DcpLayout l{2, 1};
  // Rows of the longest request: 8 in pages of 2; request 1 holds 2 pages, the first shared.
  gpu::KvCacheSpec spec{l, 0, 8, 1, 0, 1, 1, true, gpu::StorageFormat::f32};
  spec.page_size = 2;
  spec.pool_pages = 8;
  gpu::HostDevice dev(nullptr);
  gpu::Result<gpu::HostKvCache> c =
      gpu::alloc_device_cache(dev, spec, {}, {3, 0, 5, 6, 3, 1, -1, -1}, 1);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->request_pages, (std::vector<int64_t>{4, 2}));
  std::vector<float> k(16, 1.0f);
  const gpu::KvChunk fits{0, 8, gpu::StorageFormat::f32, k.data()};  // rows 0-3 of rank 0
  EXPECT_TRUE(gpu::write_device_chunk(dev, *c, fits, 1).ok());
  const gpu::GpuStatus past =
      gpu::write_device_chunk(dev, *c, gpu::KvChunk{0, 9, gpu::StorageFormat::f32, k.data()}, 1);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.message().find("of request 1, whose pages hold 4 rows"), std::string::npos)
      << past.message();
  const gpu::GpuStatus outside = gpu::write_device_chunk(dev, *c, fits, 2);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.message().find("request 2 outside the cache's 2 requests"), std::string::npos)
      << outside.message();
  // Rank 0's rows 0-3 went to pool rows 6, 7 (page 3) and 2, 3 (page 1); nothing else.
  for (int64_t r = 0; r < spec.pool_rows(); ++r)
    EXPECT_EQ(c->written[static_cast<size_t>(r)], r == 2 || r == 3 || r == 6 || r == 7 ? 1 : 0)
        << "pool row " << r;
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
