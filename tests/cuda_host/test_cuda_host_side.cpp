// The CUDA backend's host-side logic, which runs without a GPU: the reduction schedules the
// kernels follow, the launchers' argument checks (which must refuse before touching a device),
// and the honest failure of the device runner where there is no device.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/run_cuda.hpp"

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
        const Result<ReduceSchedule> dev = make_schedule(n, order, seed);
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
  const Result<ReduceSchedule> s = make_schedule(kMaxDeviceRanks + 1, ReduceOrder::sequential, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("supports 1 .. 64"), std::string::npos)
      << s.status().message();
}

// Host memory stands in for device pointers: the checks below must fail before any launch.
PartialAttentionParams valid_params(std::vector<float>& buf, std::vector<int64_t>& pos) {
  PartialAttentionParams p;
  p.q = buf.data();
  p.tokens = 1;
  p.heads = 1;
  p.head_dim = 8;
  p.q_heads_total = 1;
  p.kv_heads_total = 1;
  p.q_pos = pos.data();
  p.seq = 4;
  p.k = buf.data();
  p.v = buf.data();
  p.rows = 4;
  p.kv_heads = 1;
  p.v_dim = 8;
  p.v_row_stride = 8;
  p.v_head_stride = 8;
  p.o = buf.data();
  p.lse = buf.data();
  return p;
}

TEST(CudaLaunchers, PartialAttentionRefusesShapesBeyondTheKernel) {
  std::vector<float> buf(16);
  std::vector<int64_t> pos{3};
  PartialAttentionParams p = valid_params(buf, pos);
  p.v_dim = kMaxAttentionVDim + 1;
  p.head_dim = p.v_dim;
  GpuStatus st = launch_partial_attention(p, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("v_dim 1025 exceeds the CUDA kernel's 1024"), std::string::npos)
      << st.message();

  p = valid_params(buf, pos);
  p.tile = kMaxAttentionSmemBytes / 4;  // with Dk 8 the scores no longer fit in shared memory
  st = launch_partial_attention(p, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bytes of shared memory"), std::string::npos) << st.message();

  p = valid_params(buf, pos);
  p.rows = 3;  // the shared validation (partial_attention.hpp) runs first
  st = launch_partial_attention(p, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("has 3 rows for a context of 4 tokens"), std::string::npos)
      << st.message();
}

TEST(CudaLaunchers, KvWriteRefusesAChunkBeyondTheCache) {
  KvCacheSpec spec;
  spec.layout = {2, 2};
  spec.rank = 1;
  spec.physical_rows = 4;
  spec.head_dim = 8;
  spec.v_dim = 8;
  std::vector<float> buf(8);
  DeviceCacheView view{buf.data(), buf.data(), nullptr};
  // Positions [0, 12) give rank 1 rows 0..5 (blocks of 2 out of every 4): 6 rows > 4.
  const GpuStatus st = launch_kv_write(spec, view, 0, 12, buf.data(), buf.data(), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 1 needs row 5 for chunk [0, 12) but holds 4 rows"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(launch_kv_write(spec, view, -1, 2, buf.data(), buf.data(), nullptr).ok());
}

// Without a device the runner fails with the runtime's reason; it never falls back to the host.
TEST(CudaRunner, NoDeviceIsAnErrorNamingTheRuntimesReason) {
  if (!no_device_reason(1))
    GTEST_SKIP() << "a CUDA device is present: the no-device path is not reachable";
  DcpInputs in;
  in.dims = {1, 2, 1, 4, 4, false};
  in.q.assign(8, 0.5f);
  in.k.assign(12, 0.25f);
  in.v.assign(12, 1.0f);
  in.q_pos = {2};
  in.seq = 3;
  DcpConfig cfg;
  cfg.tp_size = 2;
  cfg.layout = {2, 1};
  for (const auto t : {DeviceTransport::single_gpu, DeviceTransport::nccl}) {
    const Result<GroupRun> r = run_dcp_cuda(in, cfg, t);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("no CUDA device: "), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace dcp::gpu
