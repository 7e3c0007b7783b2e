// The CUDA backend's kernel bodies and step orchestration, run on the CPU with the CUDA grids'
// block and thread structure (emulated_device.hpp), compared bit for bit with the host backend
// (the same bodies, one thread per block), and judged by the oracle through the property suite.
// Needs no GPU: this is how CI exercises the code the GPU runs. The GPU itself (memory, streams,
// launches, shuffles, the device communicators) is tests/gpu's.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "gpu/kernels/attention_params.hpp"
#include "gpu/run_threads.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/rc_gen.hpp"
#include "properties/suite.hpp"
#include "tests/cuda_emulated/block_emulator.hpp"
#include "tests/cuda_emulated/emulated_device.hpp"

namespace dcp::props {
namespace {

using gpu::emu::BlockEmulator;
using gpu::emu::EmulatedThread;
using gpu::emu::ThreadOrder;

// Blocks of 4 threads run the random cases fast (their Dv <= 16 fits 4 x 8 components); the
// fixed cases below use the GPU's kAttentionThreads.
constexpr int kFastBlockThreads = 4;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// "" when the runs agree bit for bit, else what differs first.
std::string bitwise_difference(const gpu::GroupRun& host, const gpu::GroupRun& emu) {
  auto first = [](const char* what, const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size())
      return std::string(what) + ": " + std::to_string(a.size()) + " vs " +
             std::to_string(b.size()) + " elements";
    for (size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
        return std::string(what) + "[" + std::to_string(i) + "]: host " + std::to_string(a[i]) +
               ", emulated " + std::to_string(b[i]);
    return std::string();
  };
  if (!same_bits(host.o, emu.o)) return first("o", host.o, emu.o);
  if (!same_bits(host.lse, emu.lse)) return first("lse", host.lse, emu.lse);
  for (size_t r = 0; r < host.partial_o.size(); ++r) {
    if (!same_bits(host.partial_o[r], emu.partial_o[r]))
      return "tp rank " + std::to_string(r) + " " +
             first("partial_o", host.partial_o[r], emu.partial_o[r]);
    if (!same_bits(host.partial_lse[r], emu.partial_lse[r]))
      return "tp rank " + std::to_string(r) + " " +
             first("partial_lse", host.partial_lse[r], emu.partial_lse[r]);
  }
  return "";
}

TEST(BlockEmulator, BarriersOrderWritesAndMaxSeesEveryThread) {
  BlockEmulator blocks(8);
  std::vector<int> shared(8, -1), seen(8, 0);
  std::vector<float> maxes(8);
  const gpu::GpuStatus st = blocks.run([&](EmulatedThread& t) {
    shared[t.tid()] = t.tid();
    t.sync();
    int sum = 0;
    for (int v : shared) sum += v;  // every write before the barrier is visible after it
    seen[t.tid()] = sum;
    maxes[t.tid()] = t.max(static_cast<float>((t.tid() * 5) % 8));
  });
  ASSERT_TRUE(st.ok()) << st.message();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(seen[i], 28);
    EXPECT_EQ(maxes[i], 7.0f);
  }
}

TEST(BlockEmulator, DivergentBarrierIsAnError) {
  BlockEmulator blocks(4);
  const gpu::GpuStatus st = blocks.run([&](EmulatedThread& t) {
    if (t.tid() != 2) t.sync();
  });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("divergent __syncthreads"), std::string::npos) << st.message();
  // The emulator is reusable after a failed block.
  EXPECT_TRUE(blocks.run([](EmulatedThread& t) { t.sync(); }).ok());
}

TEST(BlockEmulator, AThrowingThreadIsAnError) {
  BlockEmulator blocks(3);
  const gpu::GpuStatus st = blocks.run([&](EmulatedThread& t) {
    t.sync();
    if (t.tid() == 1) throw std::runtime_error("body failed");
  });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("a thread threw: body failed"), std::string::npos) << st.message();
}

// The thread order inside a barrier phase is observable to a racy body: the two orders differ.
TEST(BlockEmulator, TheTwoOrdersExposeARaceWithinAPhase) {
  std::vector<int> seen;
  for (const ThreadOrder order : {ThreadOrder::ascending, ThreadOrder::descending}) {
    BlockEmulator blocks(2, order);
    int shared = -1, read = 0;
    ASSERT_TRUE(blocks
                    .run([&](EmulatedThread& t) {
                      if (t.tid() == 0) shared = 7;     // no barrier between this write ...
                      if (t.tid() == 1) read = shared;  // ... and this read: a race
                    })
                    .ok());
    seen.push_back(read);
  }
  EXPECT_NE(seen[0], seen[1]);
}

// Random DCP steps (N, TP, layouts, chunked writes, every variant, dtypes, bases, combines, q
// paths, orders, tiles, split-KV): the emulated CUDA step equals the host backend bit for bit —
// the same bodies, with 128-thread blocks and barriers against one thread per block, so any
// difference is a bug in how a body shares work among a block's threads.
RC_GTEST_PROP(EmulatedCudaStep, EqualsTheHostBackendBitForBit, ()) {
  DcpLimits lim{.max_dcp = 8, .max_groups = 2, .max_seq = 400};
  const DcpSetup s = *gen_dcp_setup(lim);
  const ThreadOrder order = *rc::gen::element(ThreadOrder::ascending, ThreadOrder::descending);
  const gpu::DcpInputs in = to_dcp_inputs(make_case(s.spec), s.chunks);
  const gpu::Result<gpu::GroupRun> host = gpu::run_dcp_threads(in, s.cfg);
  const gpu::Result<gpu::GroupRun> emu =
      gpu::emu::run_dcp_emulated(in, s.cfg, kFastBlockThreads, order);
  RC_ASSERT(host.ok() == emu.ok());
  if (!host.ok()) {
    RC_ASSERT(host.status().message() == emu.status().message());
    return;
  }
  const std::string diff = bitwise_difference(*host, *emu);
  if (!diff.empty()) RC_FAIL(describe(s) + "\n" + diff);
}

// The same bodies judged by the oracle through the suite's DCP-path property.
TEST(EmulatedCudaStep, DcpPathPropertyWithinDerivedBound) {
  const DcpBackend emulated = [](const gpu::DcpInputs& in, const gpu::DcpConfig& cfg) {
    return gpu::emu::run_dcp_emulated(in, cfg, kFastBlockThreads, ThreadOrder::ascending);
  };
  set_property_bound(BoundTier::statistical);
  EXPECT_TRUE(
      rc::check("dcp-path on the emulated CUDA step", [&] { dcp_path_property(emulated); }));
  EXPECT_TRUE(rc::check("dcp-fp8 on the emulated CUDA step",
                        [&] { dcp_path_property(emulated, {}, CacheKind::fp8); }));
  EXPECT_TRUE(
      rc::check("dcp-batch on the emulated CUDA step", [&] { dcp_batch_property(emulated); }));
}

// With the GPU's block size, on shapes of real models: GQA with every variant, the MLA latent
// (Dv 512: 4 of each thread's 8 components), and Dv 1024 (the kernel's limit: all 8, over an
// E4M3 cache with a scale per token, stored per slot by the KV write); each in
// both thread orders. The GQA rows run a bf16 pipeline (poly3 exponential, P, partials and the
// reduce-scatter in bf16), the MLA row tf32 products with P in fp16.
TEST(EmulatedCudaStep, RealBlockSizeOnModelShapesEqualsHost) {
  struct Row {
    CaseSpec spec;
    gpu::DcpConfig cfg;
  };
  std::vector<Row> rows;
  CaseSpec gqa;
  gqa.tokens = 2, gqa.q_heads = 8, gqa.kv_heads = 2, gqa.head_dim = 128, gqa.v_dim = 128;
  gqa.seq = 300, gqa.kv_dtype = oracle::DType::bf16, gqa.q_dtype = oracle::DType::bf16;
  gqa.window = 200, gqa.softcap = 30.0, gqa.sink = true, gqa.lse_base = oracle::LseBase::two;
  gqa.alibi = true;  // its positions on every rank of a 4-way DCP group with I = 2, in base 2
  gpu::DcpConfig c1;
  c1.tp_size = 4, c1.layout = {4, 2}, c1.strategy = gpu::CommStrategy::ag_rs, c1.splits = 3;
  c1.tile = 32, c1.base = gpu::LseBase::two, c1.order = gpu::ReduceOrder::random;
  c1.order_seed = 11, c1.out_dtype = gpu::StorageFormat::bf16;
  c1.math = {.exp = gpu::ExpImpl::poly3,
             .p_cast = gpu::StorageFormat::bf16,
             .partial = gpu::StorageFormat::bf16,
             .merge = gpu::StorageFormat::bf16};
  rows.push_back({gqa, c1});
  CaseSpec topk = gqa;
  topk.topk = 40, topk.window = 0, topk.softcap = 0.0, topk.lse_base = oracle::LseBase::e;
  gpu::DcpConfig c2 = c1;
  c2.strategy = gpu::CommStrategy::a2a, c2.replicate_q = true, c2.base = gpu::LseBase::e;
  c2.math.merge = gpu::StorageFormat::f32;  // a2a merges in fp32
  rows.push_back({topk, c2});
  CaseSpec mla;
  mla.tokens = 1, mla.q_heads = 16, mla.kv_heads = 1, mla.head_dim = 576, mla.v_dim = 512;
  mla.shared_latent = true, mla.seq = 200, mla.kv_dtype = oracle::DType::bf16;
  mla.lse_base = oracle::LseBase::two;
  gpu::DcpConfig c3;
  c3.tp_size = 8, c3.layout = {8, 1}, c3.strategy = gpu::CommStrategy::a2a, c3.replicate_q = true;
  c3.base = gpu::LseBase::two, c3.tile = 64, c3.splits = 2;
  c3.math = {.p_cast = gpu::StorageFormat::f16, .tf32 = true};
  rows.push_back({mla, c3});
  CaseSpec wide;
  wide.tokens = 1, wide.q_heads = 4, wide.kv_heads = 1, wide.head_dim = 64;
  wide.v_dim = gpu::kMaxAttentionVDim, wide.seq = 90;
  wide.kv_dtype = oracle::DType::f8e4m3, wide.kv_scale = KvScale::per_token;
  gpu::DcpConfig c4;
  c4.tp_size = 2, c4.layout = {2, 3}, c4.strategy = gpu::CommStrategy::ag_rs, c4.splits = 2;
  rows.push_back({wide, c4});
  for (size_t i = 0; i < rows.size(); ++i) {
    const oracle::Case c = make_case(rows[i].spec);
    const gpu::DcpInputs in = to_dcp_inputs(c, make_chunks(rows[i].spec.seq, i));
    const auto host = gpu::run_dcp_threads(in, rows[i].cfg);
    ASSERT_TRUE(host.ok()) << host.status().message();
    for (const ThreadOrder order : {ThreadOrder::ascending, ThreadOrder::descending}) {
      const auto emu = gpu::emu::run_dcp_emulated(in, rows[i].cfg, gpu::kAttentionThreads, order);
      ASSERT_TRUE(emu.ok()) << emu.status().message();
      EXPECT_EQ(bitwise_difference(*host, *emu), "")
          << "row " << i << ": " << describe(rows[i].spec);
      const DcpCheck chk = judge_dcp(c, rows[i].cfg, *emu, {});
      EXPECT_TRUE(chk.pass) << "row " << i << "\n" << chk.report;
    }
  }
}

// Small blocks with every register slot in use: 4 threads x 8 components = Dv 32.
TEST(EmulatedCudaStep, SmallBlocksWithEveryRegisterSlotEqualHost) {
  CaseSpec spec;
  spec.tokens = 2, spec.q_heads = 4, spec.kv_heads = 2, spec.head_dim = 16;
  spec.v_dim = kFastBlockThreads * gpu::kMaxVPerThread, spec.seq = 120, spec.sink = true;
  gpu::DcpConfig cfg;
  cfg.tp_size = 4, cfg.layout = {4, 1}, cfg.strategy = gpu::CommStrategy::a2a, cfg.splits = 3;
  cfg.tile = 8;
  const gpu::DcpInputs in = to_dcp_inputs(make_case(spec), make_chunks(spec.seq, 3));
  const auto host = gpu::run_dcp_threads(in, cfg);
  const auto emu = gpu::emu::run_dcp_emulated(in, cfg, kFastBlockThreads, ThreadOrder::descending);
  ASSERT_TRUE(host.ok()) << host.status().message();
  ASSERT_TRUE(emu.ok()) << emu.status().message();
  EXPECT_EQ(bitwise_difference(*host, *emu), "");
}

// Bad input takes the same path as on the GPU: the launchers' shared checks refuse it.
TEST(EmulatedCudaStep, RefusesWhatTheLaunchersRefuse) {
  CaseSpec spec;
  spec.head_dim = 1100, spec.v_dim = 1100, spec.seq = 8;
  const gpu::DcpInputs in = to_dcp_inputs(make_case(spec), {});
  gpu::DcpConfig cfg;
  const auto emu =
      gpu::emu::run_dcp_emulated(in, cfg, gpu::kAttentionThreads, ThreadOrder::ascending);
  ASSERT_FALSE(emu.ok());
  EXPECT_NE(emu.status().message().find("v_dim 1100 exceeds the CUDA kernel's 1024"),
            std::string::npos)
      << emu.status().message();
}

}  // namespace
}  // namespace dcp::props
