// The CUDA backend against the oracle and against the host backend, on a GPU. Every test here
// needs a CUDA device and is skipped, with the runtime's reason, where there is none (ctest shows
// it as skipped, never as passed).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gpu/cuda/comm_single_gpu.hpp"
#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/nccl_api.hpp"
#include "gpu/cuda/run_cuda.hpp"
#include "gpu/host/host_device.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/pinned.hpp"
#include "properties/suite.hpp"
#include "tests/support/collective_cases.hpp"

#ifndef DCP_FIXTURES_DIR
#error "DCP_FIXTURES_DIR must point at fixtures/"
#endif

namespace dcp::props {
namespace {

#define DCP_NEEDS_GPU(n)                                                 \
  do {                                                                   \
    if (const auto why = gpu::no_device_reason(n)) GTEST_SKIP() << *why; \
  } while (0)

// The fixtures folder: DCP_FIXTURES_DIR in the environment (a build carried to another machine),
// else the source tree's.
std::string fixtures_dir() {
  const char* env = std::getenv("DCP_FIXTURES_DIR");
  return env != nullptr && *env != '\0' ? env : DCP_FIXTURES_DIR;
}

DcpBackend cuda_backend(gpu::DeviceTransport t) {
  return [t](const gpu::DcpInputs& in, const gpu::DcpConfig& cfg) {
    return gpu::run_dcp_cuda(in, cfg, t);
  };
}

TEST(CudaSingleGpu, CollectivesMoveBlocksByRankAndSumInEveryOrder) {
  DCP_NEEDS_GPU(1);
  constexpr int64_t kN = test_support::kCollectiveRanks, kCount = test_support::kCollectiveCount;
  for (const auto order :
       {gpu::ReduceOrder::sequential, gpu::ReduceOrder::pairwise, gpu::ReduceOrder::random}) {
    auto group = gpu::SingleGpuGroup::create(kN, 0);
    ASSERT_TRUE(group.ok()) << group.status().message();
    std::vector<test_support::CollectiveResults> got(kN);
    std::vector<gpu::GpuStatus> st(kN);
    std::vector<std::thread> th;
    for (int64_t r = 0; r < kN; ++r) {
      th.emplace_back([&, r] {
        st[r] = [&]() -> gpu::GpuStatus {
          gpu::DeviceCommunicator& c = (*group)->comm(r);
          DCP_CUDA_TRY(cudaSetDevice(0));
          cudaStream_t s = c.stream();
          auto m = gpu::DeviceBuffer<float>::upload(test_support::gather_input(r), s);
          auto sd = gpu::DeviceBuffer<float>::upload(test_support::send_input(r), s);
          auto g = gpu::DeviceBuffer<float>::create(kN * kCount, s);
          auto a = gpu::DeviceBuffer<float>::create(kN * kCount, s);
          auto o = gpu::DeviceBuffer<float>::create(kCount, s);
          if (!m || !sd || !g || !a || !o) return DCP_GPU_ERROR("device allocation failed");
          DCP_GPU_TRY(c.all_gather(m->data(), kCount, g->data()));
          DCP_GPU_TRY(c.all_to_all(sd->data(), kCount, a->data()));
          DCP_GPU_TRY(c.reduce_scatter_sum(sd->data(), kCount, o->data(), {order, 7}));
          test_support::CollectiveResults& out = got[static_cast<size_t>(r)];
          out.gathered.resize(kN * kCount);
          out.a2a.resize(kN * kCount);
          out.rs.resize(kCount);
          DCP_GPU_TRY(g->download(out.gathered, s));
          DCP_GPU_TRY(a->download(out.a2a, s));
          return o->download(out.rs, s);
        }();
        if (!st[r]) (*group)->abort(st[r].message());
      });
    }
    for (auto& t : th) t.join();
    for (int64_t r = 0; r < kN; ++r) ASSERT_TRUE(st[r].ok()) << st[r].message();
    test_support::expect_collective_results(got);
  }
}

TEST(CudaSingleGpu, AbortReleasesWaitingRanks) {
  DCP_NEEDS_GPU(1);
  auto group = gpu::SingleGpuGroup::create(3, 0, std::chrono::milliseconds(60000));
  ASSERT_TRUE(group.ok()) << group.status().message();
  std::vector<gpu::GpuStatus> st(2);
  std::vector<std::thread> th;
  for (int64_t r = 0; r < 2; ++r) {
    th.emplace_back([&, r] {
      cudaSetDevice(0);
      auto mine = gpu::DeviceBuffer<float>::create(1, (*group)->comm(r).stream());
      auto all = gpu::DeviceBuffer<float>::create(3, (*group)->comm(r).stream());
      if (!mine || !all) {
        st[r] = !mine ? mine.status() : all.status();
        return;
      }
      st[r] = (*group)->comm(r).all_gather(mine->data(), 1, all->data());
    });
  }
  (*group)->abort("rank 2 failed");  // rank 2 never arrives
  for (auto& t : th) t.join();
  for (const auto& s : st) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("rank 2 failed"), std::string::npos) << s.message();
  }
}

// The KV write kernel stores exactly what the host cache stores (rounding included), for chunks
// at arbitrary offsets with interleave, in bf16, both fp8 formats and int8 (stored elements
// copied; the quantizing write, x / scale, is checked on the host by the kv-writes property), and
// by token each slot's scales as the host stores them.
TEST(CudaKernels, KvWriteMatchesHostCacheBitForBit) {
  DCP_NEEDS_GPU(1);
  CaseSpec spec{
      .q_heads = 6,  // 3 TP ranks of 2 heads; each DCP rank stores the KV heads its group reads
      .kv_heads = 2,
      .seq = 37};
  gpu::DcpConfig cfg;
  cfg.tp_size = 3;
  cfg.layout = {3, 2};
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  for (const auto& [dtype, scale] : {std::pair{oracle::DType::bf16, KvScale::none},
                                     std::pair{oracle::DType::f8e4m3, KvScale::per_tensor},
                                     std::pair{oracle::DType::f8e5m2, KvScale::per_head},
                                     std::pair{oracle::DType::f8e4m3, KvScale::per_token},
                                     std::pair{oracle::DType::i8, KvScale::per_token_head}}) {
    SCOPED_TRACE(std::string(oracle::dtype_name(dtype)));
    spec.kv_dtype = dtype;
    spec.kv_scale = scale;
    const oracle::Case c = make_case(spec);
    const gpu::DcpInputs in = to_dcp_inputs(c, make_chunks(spec.seq, 5));
    for (int64_t tp = 0; tp < cfg.tp_size; ++tp) {
      auto host = gpu::build_rank_cache(in, cfg, tp);
      ASSERT_TRUE(host.ok()) << host.status().message();
      const gpu::KvCacheSpec& ks = host->spec;
      const gpu::KvCacheSizes bytes = gpu::kv_cache_bytes(ks);
      const size_t kn = static_cast<size_t>(bytes.k), vn = static_cast<size_t>(bytes.v);
      auto k = gpu::DeviceBuffer<uint8_t>::create(kn, s);
      auto v = gpu::DeviceBuffer<uint8_t>::create(vn, s);
      auto w = gpu::DeviceBuffer<uint8_t>::create(static_cast<size_t>(ks.physical_rows), s);
      // By token, the slots' scales (stored by the write); by head the view needs none here.
      const bool by_token = scales_by_token(scale);
      const size_t sn = by_token ? static_cast<size_t>(gpu::scale_entries(ks)) : 0;
      auto k_sc = gpu::DeviceBuffer<float>::create(sn, s);
      auto v_sc = gpu::DeviceBuffer<float>::create(sn, s);
      ASSERT_TRUE(k.ok() && v.ok() && w.ok() && k_sc.ok() && v_sc.ok());
      int64_t pos0 = 0;
      for (const int64_t len : gpu::write_chunks(in)) {
        const gpu::ChunkRows rows = gpu::chunk_rows(in, ks, pos0, len);
        auto kc = gpu::DeviceBuffer<uint8_t>::upload(rows.k, s);
        auto vc = gpu::DeviceBuffer<uint8_t>::upload(rows.v, s);
        auto kcs = gpu::DeviceBuffer<float>::upload(rows.k_scale, s);
        auto vcs = gpu::DeviceBuffer<float>::upload(rows.v_scale, s);
        ASSERT_TRUE(kc.ok() && vc.ok() && kcs.ok() && vcs.ok());
        const auto args = gpu::kv_write_args(
            ks,
            gpu::kv_view(ks, k->data(), v->data(), w->data(), by_token ? k_sc->data() : nullptr,
                         by_token ? v_sc->data() : nullptr),
            gpu::KvChunk{pos0, len, rows.dtype, kc->data(), vc->data(), rows.quantize,
                         by_token ? kcs->data() : nullptr, by_token ? vcs->data() : nullptr});
        ASSERT_TRUE(args.ok() && gpu::launch_kv_write(*args, s).ok());
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        pos0 += len;
      }
      std::vector<uint8_t> kd(kn), vd(vn);
      ASSERT_TRUE(k->download(kd, s).ok());
      ASSERT_TRUE(v->download(vd, s).ok());
      for (size_t i = 0; i < kn; ++i)
        ASSERT_EQ(kd[i], host->k[i]) << "tp " << tp << " k[" << i << "]";
      for (size_t i = 0; i < vn; ++i)
        ASSERT_EQ(vd[i], host->v[i]) << "tp " << tp << " v[" << i << "]";
      std::vector<float> kd_sc(sn), vd_sc(sn);
      ASSERT_TRUE(k_sc->download(kd_sc, s).ok() && v_sc->download(vd_sc, s).ok());
      for (size_t i = 0; i < sn; ++i) {
        ASSERT_EQ(kd_sc[i], host->k_scale[i]) << "tp " << tp << " k_scale[" << i << "]";
        ASSERT_EQ(vd_sc[i], host->v_scale[i]) << "tp " << tp << " v_scale[" << i << "]";
      }
    }
  }
  cudaStreamDestroy(s);
}

// The run command's representative sweep (every variant, both combines, gather and replicate-q,
// GQA and MLA-latent shapes) on the CUDA backend: output and every partial within the bound, and
// the host backend within its bound on the same cases, so the two agree within the sum of their
// bounds.
TEST(CudaBackend, RepresentativeCasesWithinBoundAndAgreeWithHost) {
  DCP_NEEDS_GPU(1);
  const DcpBackend cuda = cuda_backend(gpu::DeviceTransport::single_gpu);
  const std::vector<std::pair<CaseSpec, gpu::DcpConfig>> cases = [] {
    std::vector<std::pair<CaseSpec, gpu::DcpConfig>> out;
    auto add = [&](CaseSpec s, int64_t tp, int64_t n, int64_t il, gpu::CommStrategy st, bool repl,
                   int64_t splits, gpu::LseBase base) {
      gpu::DcpConfig cfg;
      cfg.tp_size = tp;
      cfg.layout = {n, il};
      cfg.strategy = st;
      cfg.replicate_q = repl;
      cfg.splits = splits;
      cfg.base = base;
      cfg.tile = 16;
      out.push_back({s, cfg});
    };
    CaseSpec gqa;
    gqa.tokens = 2, gqa.q_heads = 8, gqa.kv_heads = 2, gqa.head_dim = 64, gqa.v_dim = 64;
    gqa.seq = 200, gqa.kv_dtype = oracle::DType::bf16, gqa.q_dtype = oracle::DType::bf16;
    add(gqa, 4, 4, 1, gpu::CommStrategy::ag_rs, false, 1, gpu::LseBase::e);
    add(gqa, 4, 2, 4, gpu::CommStrategy::a2a, true, 3, gpu::LseBase::two);
    CaseSpec win = gqa;
    win.window = 50, win.softcap = 30.0, win.sink = true, win.alibi = true;
    add(win, 8, 4, 2, gpu::CommStrategy::a2a, false, 2, gpu::LseBase::e);
    CaseSpec topk = gqa;
    topk.topk = 24;
    add(topk, 4, 4, 1, gpu::CommStrategy::ag_rs, true, 1, gpu::LseBase::two);
    CaseSpec mla;
    mla.tokens = 1, mla.q_heads = 16, mla.kv_heads = 1, mla.head_dim = 576, mla.v_dim = 512;
    mla.shared_latent = true, mla.seq = 300, mla.kv_dtype = oracle::DType::bf16;
    add(mla, 8, 8, 1, gpu::CommStrategy::a2a, true, 1, gpu::LseBase::two);
    CaseSpec tiny = gqa;  // S < N: empty shards
    tiny.seq = 3;
    add(tiny, 8, 8, 1, gpu::CommStrategy::a2a, false, 2, gpu::LseBase::e);
    return out;
  }();
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [spec, cfg] = cases[i];
    const oracle::Case c = make_case(spec);
    const std::vector<int64_t> chunks = make_chunks(spec.seq, i);
    const DcpCheck dev = check_dcp(c, cfg, chunks, cuda);
    EXPECT_TRUE(dev.pass) << "case " << i << " (cuda): " << describe(spec) << "\n" << dev.report;
    const DcpCheck host = check_dcp(c, cfg, chunks);
    EXPECT_TRUE(host.pass) << "case " << i << " (host): " << describe(spec) << "\n" << host.report;
  }
}

// The DCP-path property (random N, TP, layouts, chunked writes, variants, dtypes, bases,
// combines, q paths, orders, tiles, split-KV) on the CUDA backend at the build's tier.
TEST(CudaBackend, DcpPathPropertyWithinDerivedBound) {
  DCP_NEEDS_GPU(1);
  const DcpBackend cuda = cuda_backend(gpu::DeviceTransport::single_gpu);
  set_property_bound(BoundTier::statistical);
  EXPECT_TRUE(rc::check("dcp-path on cuda single-gpu", [&] { dcp_path_property(cuda); }));
  EXPECT_TRUE(rc::check("dcp-fp8 on cuda single-gpu",
                        [&] { dcp_path_property(cuda, {}, CacheKind::fp8); }));
  EXPECT_TRUE(rc::check("dcp-batch on cuda single-gpu", [&] { dcp_batch_property(cuda); }));
}

TEST(CudaBackend, PinnedCounterexamples) {
  DCP_NEEDS_GPU(1);
  const auto replay = replay_pinned(fixtures_dir() + "/dcp/pinned.json",
                                    cuda_backend(gpu::DeviceTransport::single_gpu));
  ASSERT_TRUE(replay.ok()) << replay.status().message();
  EXPECT_GT(replay->count, 0);
  for (const std::string& f : replay->failures) ADD_FAILURE() << f;
}

// NCCL with one GPU per rank in one process: a DCP group over every visible GPU.
TEST(CudaNccl, GroupOverEveryVisibleGpuWithinBound) {
  DCP_NEEDS_GPU(1);
  const auto api = gpu::nccl_api();
  if (!api) GTEST_SKIP() << api.status().message();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  CaseSpec spec;
  spec.tokens = 2, spec.q_heads = 2 * devices, spec.kv_heads = 1, spec.head_dim = 64;
  spec.v_dim = 64, spec.seq = 100;
  const oracle::Case c = make_case(spec);
  for (const auto st : {gpu::CommStrategy::ag_rs, gpu::CommStrategy::a2a}) {
    gpu::DcpConfig cfg;
    cfg.tp_size = devices;
    cfg.layout = {devices, 1};
    cfg.strategy = st;
    const DcpCheck chk =
        check_dcp(c, cfg, make_chunks(spec.seq, 3), cuda_backend(gpu::DeviceTransport::nccl));
    EXPECT_TRUE(chk.pass) << gpu::strategy_name(st) << ": " << chk.report;
  }
}

// Bad input is an error value naming the limit, never a launch that corrupts memory.
TEST(CudaKernels, RefusesShapesBeyondTheKernelLimits) {
  DCP_NEEDS_GPU(1);
  CaseSpec spec;
  spec.head_dim = 1100, spec.v_dim = 1100, spec.seq = 8;
  const oracle::Case c = make_case(spec);
  gpu::DcpConfig cfg;
  const DcpCheck chk = check_dcp(c, cfg, {}, cuda_backend(gpu::DeviceTransport::single_gpu));
  EXPECT_FALSE(chk.pass);
  EXPECT_TRUE(chk.backend_error);
  EXPECT_NE(chk.report.find("v_dim 1100 exceeds"), std::string::npos) << chk.report;
}

}  // namespace
}  // namespace dcp::props
