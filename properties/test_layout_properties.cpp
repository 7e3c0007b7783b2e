// Properties of the token layout (gpu/layout.hpp) and of KV writes (gpu/kv_cache.hpp), checked
// against brute force: owner/row is a bijection, count is exact, chunk shares are fair, and a
// token is stored on its owner only.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "gpu/kv_cache.hpp"
#include "gpu/layout.hpp"
#include "properties/dcp_setup.hpp"

namespace dcp::props {
namespace {

using gpu::DcpLayout;

rc::Gen<DcpLayout> gen_layout() {
  return rc::gen::exec([] {
    DcpLayout l;
    l.ranks = *rc::gen::inRange<int64_t>(1, 65);
    l.interleave = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(1)},
                                                     {3, rc::gen::inRange<int64_t>(2, 17)},
                                                     {1, rc::gen::inRange<int64_t>(17, 1000)}});
    return l;
  });
}

RC_GTEST_PROP(Layout, OwnerRowIsABijectionWithPositionAsInverse, ()) {
  const DcpLayout l = *gen_layout();
  const int64_t span = *rc::gen::inRange<int64_t>(0, 2000);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int64_t p = 0; p < span; ++p) {
    const int64_t r = l.owner(p), row = l.row(p);
    RC_ASSERT(r >= 0);
    RC_ASSERT(r < l.ranks);
    RC_ASSERT(l.position(r, row) == p);
    RC_ASSERT(seen.insert({r, row}).second);
  }
  // Every (rank, row) maps back: the rows a rank holds for [0, span) are exactly 0..count-1.
  for (int64_t r = 0; r < l.ranks; ++r) {
    for (int64_t row = 0; row < l.count(r, span); ++row) {
      const int64_t p = l.position(r, row);
      RC_ASSERT(p < span);
      RC_ASSERT(l.owner(p) == r);
      RC_ASSERT(l.row(p) == row);
    }
  }
}

RC_GTEST_PROP(Layout, CountMatchesBruteForceAtAnyOffset, ()) {
  const DcpLayout l = *gen_layout();
  const int64_t a = *rc::gen::inRange<int64_t>(0, 3000);
  const int64_t len = *rc::gen::weightedOneOf<int64_t>(
      {{1, rc::gen::just<int64_t>(0)}, {4, rc::gen::inRange<int64_t>(0, 3000)}});
  std::vector<int64_t> brute(static_cast<size_t>(l.ranks), 0);
  for (int64_t p = a; p < a + len; ++p) ++brute[static_cast<size_t>(l.owner(p))];
  int64_t total = 0, lo = len, hi = 0;
  for (int64_t r = 0; r < l.ranks; ++r) {
    const int64_t share = l.chunk_share(r, a, len);
    RC_ASSERT(share == brute[static_cast<size_t>(r)]);
    total += share;
    lo = std::min(lo, share);
    hi = std::max(hi, share);
  }
  RC_ASSERT(total == len);
  RC_ASSERT(hi - lo <= l.interleave);
}

RC_GTEST_PROP(Layout, ChunkWritesStoreEachTokenOnItsOwnerOnly, ()) {
  const DcpLayout l = *rc::gen::exec([] {
    DcpLayout x;
    x.ranks = *rc::gen::inRange<int64_t>(1, 9);
    x.interleave = *rc::gen::inRange<int64_t>(1, 9);
    return x;
  });
  const int64_t seq = *rc::gen::inRange<int64_t>(0, 400);
  const std::vector<int64_t> chunks = make_chunks(seq, *rc::gen::arbitrary<uint64_t>());
  const int64_t cycle = l.ranks * l.interleave;
  const int64_t rows = (seq + cycle - 1) / cycle * l.interleave;
  // Key value = position + 1 (exact in fp32), so every stored row says which token it holds.
  std::vector<float> k(static_cast<size_t>(seq));
  for (int64_t p = 0; p < seq; ++p) k[static_cast<size_t>(p)] = static_cast<float>(p + 1);
  for (int64_t r = 0; r < l.ranks; ++r) {
    gpu::KvCacheSpec spec{l, r, rows, 1, 0, 1, 1, true, gpu::Dtype::f32};
    gpu::Result<gpu::RankKvCache> c = gpu::RankKvCache::create(spec);
    RC_ASSERT(c.ok());
    int64_t pos0 = 0;
    for (const int64_t len : chunks) {
      RC_ASSERT(c->write_chunk(pos0, len, k.data() + pos0, nullptr).ok());
      pos0 += len;
    }
    RC_ASSERT(c->contiguous_rows() == l.count(r, seq));
    for (int64_t row = 0; row < rows; ++row) {
      const bool holds = row < l.count(r, seq);
      RC_ASSERT(c->written(row) == holds);
      if (holds) RC_ASSERT(c->k()[row] == static_cast<float>(l.position(r, row) + 1));
    }
  }
}

TEST(Layout, WidenedCapacityIsPhysicalRowsTimesRanks) {
  const DcpLayout l{4, 2};
  EXPECT_EQ(l.logical_capacity(8), 32);
  // The last logical slot fits, the next one does not.
  gpu::KvCacheSpec spec{l, 3, 8, 1, 0, 1, 1, true, gpu::Dtype::f32};
  gpu::Result<gpu::RankKvCache> c = gpu::RankKvCache::create(spec);
  ASSERT_TRUE(c.ok());
  std::vector<float> k(33, 1.0f);
  EXPECT_TRUE(c->write_chunk(0, 32, k.data(), nullptr).ok());
  // Position 32 belongs to rank 0, so rank 3 skips it and rank 0 must refuse it.
  EXPECT_TRUE(c->write_chunk(32, 1, k.data(), nullptr).ok());
  gpu::KvCacheSpec spec0{l, 0, 8, 1, 0, 1, 1, true, gpu::Dtype::f32};
  gpu::Result<gpu::RankKvCache> c0 = gpu::RankKvCache::create(spec0);
  ASSERT_TRUE(c0.ok());
  const gpu::GpuStatus over0 = c0->write_chunk(32, 1, k.data(), nullptr);
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
