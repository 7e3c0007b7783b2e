// The CUDA backend's host side where there is no GPU: the launchers refuse bad shapes through
// the shared checks before touching a device, and the device runner fails with the runtime's
// reason instead of falling back to the host; a sticky fault ends the process naming the kernel.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/device_arena.hpp"
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

// A rank's arena: a step whose shapes were seen before allocates nothing; a block given back is
// not reused until its step is settled (work may still read it); a small buffer does not take
// a block over twice its size; when allocating fails, the free blocks are released first.
TEST(DeviceArena, ASecondStepAllocatesNothing) {
  std::map<void*, size_t> live;  // host stand-ins for device blocks
  size_t limit = 1 << 20;        // the "device" memory
  size_t used = 0;
  std::vector<std::vector<char>> store;
  BlockCache cache(
      [&](size_t bytes) -> void* {
        if (used + bytes > limit) return nullptr;
        store.emplace_back(bytes);
        used += bytes;
        live[store.back().data()] = bytes;
        return store.back().data();
      },
      [&](void* p) {
        used -= live.at(p);
        live.erase(p);
      });
  const std::vector<size_t> sizes = {4096, 256, 256, 65536, 12};
  auto run_step = [&](uint64_t step) {
    std::vector<BlockCache::Block> held;
    for (const size_t bytes : sizes) {
      const BlockCache::Block b = cache.take(bytes);
      ASSERT_NE(b.p, nullptr);
      EXPECT_GE(b.bytes, bytes);
      EXPECT_LE(b.bytes, 2 * bytes);
      held.push_back(b);
    }
    for (const BlockCache::Block& b : held) cache.give(b, step);
  };
  const uint64_t a = cache.begin_step(), b = cache.begin_step();
  EXPECT_NE(a, b);
  run_step(a);
  EXPECT_EQ(cache.allocations(), 5);
  run_step(a);  // not settled: the first step's blocks may still be read
  EXPECT_EQ(cache.allocations(), 10);
  cache.settle(b);  // another step's settling frees none of them
  run_step(b);
  EXPECT_EQ(cache.allocations(), 15);
  cache.settle(a);
  cache.settle(b);
  const uint64_t c = cache.begin_step();
  run_step(c);  // every size found free
  EXPECT_EQ(cache.allocations(), 15);
  const BlockCache::Block big = cache.take(65536);  // a free 64 KiB block; none spent on 12 B
  EXPECT_EQ(big.bytes, 65536u);
  const BlockCache::Block tiny = cache.take(12);
  EXPECT_LE(tiny.bytes, 24u);
  cache.give(big, c);
  cache.give(tiny, c);
  cache.settle(c);
  // Out of memory with blocks free: they are released and the allocation is tried again.
  limit = used + 100000;
  EXPECT_NE(cache.take(200000).p, nullptr);
  EXPECT_EQ(cache.allocations(), 16);
  EXPECT_TRUE(cache.release_free_if_idle());  // nothing free left to release, and not busy
  limit = used;  // nothing left and nothing free: out of memory is a null block, not a throw
  EXPECT_EQ(cache.take(1).p, nullptr);
}

// Faults inside a kernel poison the context for every later call; other errors do not.
TEST(CudaStickyFault, TheKernelFaultsAreSticky) {
  for (const cudaError_t e :
       {cudaErrorIllegalAddress, cudaErrorMisalignedAddress, cudaErrorIllegalInstruction,
        cudaErrorAssert, cudaErrorLaunchFailure, cudaErrorHardwareStackError})
    EXPECT_TRUE(sticky_error(e)) << cudaGetErrorName(e);
  for (const cudaError_t e : {cudaSuccess, cudaErrorNotReady, cudaErrorInvalidValue,
                              cudaErrorMemoryAllocation, cudaErrorNoDevice})
    EXPECT_FALSE(sticky_error(e)) << cudaGetErrorName(e);
}

// A sticky fault ends the process with kExitStickyFault and one line naming the error, the call
// that found it and the kernel last launched on that stream (or in the process); a non-sticky
// error stays a value.
TEST(CudaStickyFaultDeathTest, EndsTheProcessNamingTheKernel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto stream = reinterpret_cast<cudaStream_t>(0x10);  // a name only: never used
  const auto other = reinterpret_cast<cudaStream_t>(0x20);
  EXPECT_EXIT(
      {
        note_launch("partial attention", stream);
        note_launch("ordered sum", other);
        end_on_sticky_error(cudaErrorIllegalAddress, "all_gather", stream, "comm.cpp", 7);
      },
      ::testing::ExitedWithCode(kExitStickyFault),
      "sticky CUDA fault cudaErrorIllegalAddress .* found by all_gather at comm.cpp:7; the last "
      "kernel launched on its stream: partial attention\\. The CUDA context is lost");
  EXPECT_EXIT(
      {
        note_launch("split combine", stream);
        (void)cuda_status(cudaErrorAssert, "cudaDeviceSynchronize()", "x.cpp", 3);
      },
      ::testing::ExitedWithCode(kExitStickyFault),
      "cudaErrorAssert .* found by cudaDeviceSynchronize\\(\\) at x.cpp:3; the last kernel "
      "launched in the process: split combine");
  const GpuStatus st = cuda_status(cudaErrorInvalidValue, "cudaMemcpyAsync(...)", "y.cpp", 9);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cudaErrorInvalidValue"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace dcp::gpu
