// The CUDA kernels' launch checks and reduction schedules (gpu/kernels/launch_checks.hpp), plain
// C++ shared by the launchers and the CPU emulation: they must refuse bad shapes before any
// launch, and the schedules must be the host backend's trees.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "gpu/kernels/launch_checks.hpp"
#include "tests/support/attention_params.hpp"

namespace dcp::gpu {
namespace {

// The device follows exactly the tree the host backend folds (merge.hpp reduce_slots).
TEST(CudaSchedule, MatchesTheHostReductionTreeForEveryOrder) {
  for (const auto order : {ReduceOrder::sequential, ReduceOrder::pairwise, ReduceOrder::random}) {
    for (int64_t n = 1; n <= kMaxDeviceRanks; ++n) {
      for (uint64_t seed : {0u, 7u, 12345u}) {
        std::vector<std::pair<int64_t, int64_t>> host;
        const int64_t root =
            reduce_slots(n, order, seed, [&](int64_t d, int64_t s) { host.emplace_back(d, s); });
        const Result<ReduceSchedule> dev = make_schedule<ReduceSchedule>(n, order, seed);
        ASSERT_TRUE(dev.ok()) << dev.status().message();
        ASSERT_EQ(dev->ranks, n);
        ASSERT_EQ(dev->root, root);
        ASSERT_EQ(dev->steps, static_cast<int32_t>(host.size()));
        for (size_t i = 0; i < host.size(); ++i) {
          EXPECT_EQ(dev->dst[i], host[i].first) << "n " << n << " step " << i;
          EXPECT_EQ(dev->src[i], host[i].second) << "n " << n << " step " << i;
        }
      }
    }
  }
}

TEST(CudaSchedule, RefusesMoreRanksThanTheKernelsHold) {
  const Result<ReduceSchedule> s =
      make_schedule<ReduceSchedule>(kMaxDeviceRanks + 1, ReduceOrder::sequential, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("supports 1 .. 64"), std::string::npos)
      << s.status().message();
}

// Host memory stands in for device pointers: the checks read no tensor.
TEST(CudaLaunchChecks, PartialAttentionRefusesShapesBeyondTheKernel) {
  std::vector<float> buf(16);
  std::vector<int64_t> pos{3};
  PartialAttentionParams p = test_support::host_attention_params(buf, pos, 8);
  p.v_dim = kMaxAttentionVDim + 1;
  p.head_dim = p.v_dim;
  GpuStatus st = check_attention_launch(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("v_dim 1025 exceeds the CUDA kernel's 1024"), std::string::npos)
      << st.message();

  p = test_support::host_attention_params(buf, pos, 8);
  p.tile = kMaxAttentionSmemBytes / 4;  // with Dk 8 the scores no longer fit in shared memory
  st = check_attention_launch(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bytes of shared memory"), std::string::npos) << st.message();

  p = test_support::host_attention_params(buf, pos, 8);
  p.rows = 3;  // the shared validation (attention_params.hpp) runs first
  st = check_attention_launch(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("has 3 rows for a context of 4 tokens"), std::string::npos)
      << st.message();
}

TEST(CudaLaunchChecks, KvWriteRefusesAChunkBeyondTheCache) {
  KvCacheSpec spec;
  spec.layout = {2, 2};
  spec.rank = 1;
  spec.physical_rows = 4;
  spec.head_dim = 8;
  spec.v_dim = 8;
  std::vector<float> buf(8);
  const KvView view = kv_view(spec, buf.data(), buf.data(), nullptr);
  // Positions [0, 12) give rank 1 rows 0..5 (blocks of 2 out of every 4): 6 rows > 4.
  const GpuStatus st =
      kv_write_args(spec, view, KvChunk{0, 12, StorageFormat::f32, buf.data(), buf.data()})
          .status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 1 needs row 5 for chunk [0, 12) but holds 4 rows"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(
      kv_write_args(spec, view, KvChunk{-1, 2, StorageFormat::f32, buf.data(), buf.data()}).ok());
}

}  // namespace
}  // namespace dcp::gpu
