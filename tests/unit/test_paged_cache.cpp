// A paged rank cache (gpu/kernels/kv_view.hpp, gpu/dcp_step.hpp): the spec's and block tables'
// checks, the pages plan_pages hands out (the pool's order pinned, so that it is the same on
// every platform; a batch's shared prefix; the widened slot numbering), and the address a view
// gives a row.
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
  EXPECT_TRUE(dcp::gpu::validate_block_tables(s, {5, 0, 3, 1}).ok());
  // Two requests sharing their first page, the second holding two pages.
  EXPECT_TRUE(dcp::gpu::validate_block_tables(s, {5, 0, 3, 1, 5, 2, -1, -1}, 1).ok());
  const auto refused = [&](const std::vector<int32_t>& t, const std::string& says,
                           int64_t shared = 0) {
    const dcp::gpu::GpuStatus st = dcp::gpu::validate_block_tables(s, t, shared);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  refused({5, 0, 3}, "hold 3 entries; expected a multiple of 4");
  refused({5, 0, 6, 1}, "block table [0, 2] = 6; expected a page in [0, 6) or -1");
  refused({5, 0, 5, 1}, "block table [0, 2] = 5, a page already holding other rows");
  refused({5, -1, 3, 1}, "block table [0, 1] = -1 before a page");
  refused({5, 0, 3, 1, 2, 4, -1, -1}, "block table [1, 0] = 2; a shared page must be request 0's",
          1);
  refused({5, 0, 3, 1, 5, 2, -1, -1}, "block table [1, 0] = 5, a page already holding", 0);
  s.pool_pages = 3;
  EXPECT_FALSE(dcp::gpu::validate_cache_spec(s).ok());
  s.page_size = -1;
  EXPECT_FALSE(dcp::gpu::validate_cache_spec(s).ok());
}

TEST(PagedCache, PlanPagesIsAPinnedShuffleOfThePool) {
  dcp::gpu::DcpConfig cfg;
  cfg.layout = {2, 1};
  cfg.page_size = 3;
  cfg.page_seed = 1;
  dcp::gpu::DcpInputs in;
  in.seq = 20;  // 10 rows a rank: 4 pages of 3, a pool of 6
  const dcp::gpu::Result<dcp::gpu::PagePlan> plan = dcp::gpu::plan_pages(in, cfg);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->pool_pages, 6);
  EXPECT_EQ(plan->stride, 4);
  EXPECT_TRUE(dcp::gpu::validate_block_tables(paged_spec(0), plan->tables).ok());
  EXPECT_EQ(plan->tables, (std::vector<int32_t>{5, 4, 0, 2}));
  EXPECT_EQ(dcp::gpu::plan_pages(in, cfg)->tables, plan->tables);  // a function of the seed
  cfg.page_seed = 2;
  EXPECT_NE(dcp::gpu::plan_pages(in, cfg)->tables, plan->tables);
}

// Three requests of 20, 13 and 7 tokens sharing a prefix of 7, one query token each but the
// first `retired`, which have none; over N = 2, I = 1, pages of 3 rows (three_request_config).
dcp::gpu::DcpInputs three_requests(int64_t retired) {
  dcp::gpu::DcpInputs in;
  in.cu_seqlens_q = {0};
  for (int64_t b = 0; b < 3; ++b) in.cu_seqlens_q.push_back(std::max<int64_t>(0, b + 1 - retired));
  in.cu_seqlens_k = {0, 20, 33, 40};
  in.seq = 40;
  in.shared_prefix = 7;
  in.retired = retired;
  return in;
}
dcp::gpu::DcpConfig three_request_config() {
  dcp::gpu::DcpConfig cfg;
  cfg.layout = {2, 1};
  cfg.page_size = 3;
  cfg.page_seed = 7;
  return cfg;
}

// Three requests of 20, 13 and 7 tokens sharing a prefix of 7 over N = 2, I = 1, pages of 3 rows
// (virtual pages of 6 slots): one whole virtual page is shared, and held once.
TEST(PagedCache, ABatchSharesThePrefixsWholeVirtualPagesOnly) {
  const dcp::gpu::DcpConfig cfg = three_request_config();
  const dcp::gpu::DcpInputs in = three_requests(0);
  const dcp::gpu::Result<dcp::gpu::PagePlan> plan = dcp::gpu::plan_pages(in, cfg);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->shared_pages, 1);
  EXPECT_EQ(plan->stride, 4);  // ceil(20 / 6)
  // Pages used: 4 (request 0) + 3 - 1 + 2 - 1 = 7; the pool one free page for every two more.
  EXPECT_EQ(plan->pool_pages, 11);
  const auto held = [&](int64_t b) {
    int64_t n = 0;
    while (n < plan->stride && plan->table(b)[n] >= 0) ++n;
    return n;
  };
  EXPECT_EQ(held(0), 4);
  EXPECT_EQ(held(1), 3);  // ceil(13 / 6)
  EXPECT_EQ(held(2), 2);
  EXPECT_EQ(plan->table(1)[0], plan->table(0)[0]);
  EXPECT_EQ(plan->table(2)[0], plan->table(0)[0]);
  EXPECT_EQ(plan->write_from(0, 2), 0);
  EXPECT_EQ(plan->write_from(2, 2), 6);  // the shared prefix's 7th token is request 2's own
  KvCacheSpec spec = paged_spec();
  spec.pool_pages = plan->pool_pages;
  EXPECT_TRUE(dcp::gpu::validate_block_tables(spec, plan->tables, plan->shared_pages).ok());
  // The widened slot of each request position: its owner and row are the rank and pool row the
  // request's view stores it at.
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t pos = 0; pos < in.request_seq(b); ++pos) {
      const int64_t slot = dcp::gpu::widened_slot(*plan, plan->table(b), cfg.layout, pos);
      EXPECT_EQ(cfg.layout.owner(slot), cfg.layout.owner(pos));
      const dcp::gpu::KvView view =
          dcp::gpu::kv_view(spec, nullptr, nullptr, nullptr, nullptr, nullptr, plan->table(b));
      EXPECT_EQ(cfg.layout.row(slot), view.slot(cfg.layout.row(pos)));
    }
}

// The same batch with request 0 retired before the step: its own pages (all but the shared one)
// are freed and handed to the live requests first, the last freed first; the shared page stays.
TEST(PagedCache, ARetiredRequestsPagesAreReusedButNotTheSharedOnes) {
  const dcp::gpu::DcpConfig cfg = three_request_config();
  dcp::gpu::DcpInputs in = three_requests(1);
  const dcp::gpu::Result<dcp::gpu::PagePlan> plan = dcp::gpu::plan_pages(in, cfg);
  ASSERT_TRUE(plan.ok());
  const int32_t* r0 = plan->table(0);
  EXPECT_EQ(plan->freed, (std::vector<int32_t>{r0[1], r0[2], r0[3]}));
  EXPECT_EQ(plan->table(1)[0], r0[0]);  // the shared page, still held
  EXPECT_EQ(plan->table(1)[1], r0[3]);  // request 1's own pages: the freed ones, last first
  EXPECT_EQ(plan->table(1)[2], r0[2]);
  EXPECT_EQ(plan->table(2)[0], r0[0]);
  EXPECT_EQ(plan->table(2)[1], r0[1]);
  KvCacheSpec spec = paged_spec();
  spec.pool_pages = plan->pool_pages;
  EXPECT_TRUE(dcp::gpu::validate_block_tables(spec, plan->tables, plan->shared_pages, 1).ok());
  // Read as if no request had retired, the reuse is a page held twice; a live request holding a
  // shared page as its own is refused whatever retired.
  EXPECT_FALSE(dcp::gpu::validate_block_tables(spec, plan->tables, plan->shared_pages, 0).ok());
  std::vector<int32_t> bad = plan->tables;
  bad[static_cast<size_t>(plan->stride + 1)] = r0[0];
  const dcp::gpu::GpuStatus st = dcp::gpu::validate_block_tables(spec, bad, plan->shared_pages, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("block table [1, 1]"), std::string::npos) << st.message();
  // Every request retired, or none live: refused by name.
  in.retired = 3;
  EXPECT_FALSE(dcp::gpu::plan_pages(in, cfg).ok());
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
