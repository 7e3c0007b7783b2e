// A paged rank cache (gpu/kernels/kv_view.hpp, gpu/dcp_step.hpp): the spec's and block table's
// checks, the pool order rank_block_table draws (pinned, so that it is the same on every
// platform), and the address a view gives a row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/dcp_step.hpp"
#include "gpu/kernels/kv_view.hpp"

namespace {

using dcp::gpu::KvCacheSpec;

// 10 rows in pages of 3: 4 pages used, a pool of 6.
KvCacheSpec paged_spec(int64_t rank = 0) {
  KvCacheSpec s;
  s.layout = {2, 1};
  s.rank = rank;
  s.physical_rows = 10;
  s.head_dim = 2;
  s.v_dim = 2;
  s.page_size = 3;
  s.pool_pages = 6;
  return s;
}

TEST(PagedCache, SpecAndBlockTableChecksNameWhatIsWrong) {
  KvCacheSpec s = paged_spec();
  EXPECT_EQ(s.table_pages(), 4);
  EXPECT_EQ(s.pool_rows(), 18);
  EXPECT_TRUE(dcp::gpu::validate_cache_spec(s).ok());
  EXPECT_TRUE(dcp::gpu::validate_block_table(s, {5, 0, 3, 1}).ok());
  const auto refused = [&](const std::vector<int32_t>& t, const std::string& says) {
    const dcp::gpu::GpuStatus st = dcp::gpu::validate_block_table(s, t);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  refused({5, 0, 3}, "holds 3 pages; expected 4");
  refused({5, 0, 6, 1}, "block table [2] = 6; expected a page in [0, 6)");
  refused({5, 0, 5, 1}, "block table [2] = 5, a page already holding other rows");
  s.pool_pages = 3;
  EXPECT_FALSE(dcp::gpu::validate_cache_spec(s).ok());
  s.page_size = -1;
  EXPECT_FALSE(dcp::gpu::validate_cache_spec(s).ok());
}

TEST(PagedCache, RankBlockTableIsAPinnedShuffleOfThePool) {
  dcp::gpu::DcpConfig cfg;
  cfg.page_size = 3;
  cfg.page_seed = 1;
  const std::vector<int32_t> r0 = dcp::gpu::rank_block_table(cfg, paged_spec(0));
  const std::vector<int32_t> r1 = dcp::gpu::rank_block_table(cfg, paged_spec(1));
  EXPECT_TRUE(dcp::gpu::validate_block_table(paged_spec(0), r0).ok());
  EXPECT_TRUE(dcp::gpu::validate_block_table(paged_spec(1), r1).ok());
  EXPECT_EQ(r0, (std::vector<int32_t>{5, 4, 0, 2}));
  EXPECT_NE(r0, r1);  // each rank its own order
  EXPECT_EQ(dcp::gpu::rank_block_table(cfg, paged_spec(0)), r0);
}

TEST(PagedCache, AViewAddressesRowRInPageTableOfRByPSlot) {
  const KvCacheSpec s = paged_spec();
  const std::vector<int32_t> table = {5, 0, 3, 1};
  std::vector<uint8_t> k(static_cast<size_t>(s.pool_rows() * s.head_dim * 4));
  const dcp::gpu::KvView view =
      dcp::gpu::kv_view(s, k.data(), k.data(), nullptr, nullptr, nullptr, table.data());
  for (int64_t row = 0; row < s.physical_rows; ++row)
    EXPECT_EQ(view.slot(row), int64_t{table[static_cast<size_t>(row / 3)]} * 3 + row % 3);
  // Not paged: the row itself.
  KvCacheSpec flat = s;
  flat.page_size = 0;
  EXPECT_EQ(dcp::gpu::kv_view(flat, k.data(), k.data(), nullptr).slot(7), 7);
}

}  // namespace
