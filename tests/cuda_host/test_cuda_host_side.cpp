// The CUDA backend's host side where there is no GPU: the launchers refuse bad shapes through
// the shared checks before touching a device, and the device runner fails with the runtime's
// reason instead of falling back to the host.
#include <gtest/gtest.h>

#include <vector>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/run_cuda.hpp"
#include "tests/support/attention_params.hpp"

namespace dcp::gpu {
namespace {

// Host memory stands in for device pointers: the launchers must fail before any launch.
TEST(CudaLaunchers, RefuseThroughTheSharedChecksBeforeLaunching) {
  std::vector<float> buf(16);
  std::vector<int64_t> pos{3};
  const PartialAttentionParams p =
      test_support::host_attention_params(buf, pos, kMaxAttentionVDim + 1);
  GpuStatus st = launch_partial_attention(p, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), check_attention_launch(p).message());

  KvCacheSpec spec;
  spec.layout = {2, 2};
  spec.rank = 1;
  spec.physical_rows = 4;
  spec.head_dim = 8;
  spec.v_dim = 8;
  // A KV write's launch takes the arguments the shared check returns.
  st = kv_write_args(spec, kv_view(spec, buf.data(), buf.data(), nullptr),
                     KvChunk{0, 12, StorageFormat::f32, buf.data(), buf.data()})
           .status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("needs row 5"), std::string::npos) << st.message();
}

// Without a device the runner fails with the runtime's reason; it never falls back to the host.
TEST(CudaRunner, NoDeviceIsAnErrorNamingTheRuntimesReason) {
  if (!no_device_reason(1))
    GTEST_SKIP() << "a CUDA device is present: the no-device path is not reachable";
  DcpInputs in;
  in.dims = {1, 2, 1, 4, 4, false};
  in.q.assign(8, 0.5f);
  in.k = std::vector<float>(12, 0.25f);
  in.v = std::vector<float>(12, 1.0f);
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
