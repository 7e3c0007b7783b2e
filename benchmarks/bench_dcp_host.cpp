// Host-backend DCP benchmarks, each beside its single-rank baseline in the same run.
//
//   BM_PartialAttention/N  one rank's partial attention over its 1/N of an MLA-latent context
//                          (16 gathered heads, Dk 576 = 512 + 64, Dv 512, S = 8192); N = 1 is the
//                          whole context on one rank. Counter: head_keys/s (query heads x keys).
//   BM_Combine/N/strategy  the host device's a2a combine (merge of N partials) or ag_rs scaling
//                          (group LSE over N, scaled partial) for T x Hq rows of Dv: step 3's
//                          kernels on one rank, without transport.
//                          Counter: rows/s.
//   BM_Step/N/strategy     one whole decode step of a DCP group on the threads communicator.
// tools/bench-dcp prints each as a ratio to its N = 1 baseline.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "gpu/host/host_device.hpp"
#include "gpu/kernels/attention_params.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/merge.hpp"
#include "gpu/run_threads.hpp"

namespace {

using namespace dcp::gpu;

constexpr int64_t kHeads = 16, kDk = 576, kDv = 512, kSeq = 8192, kTokens = 1;

std::vector<float> randoms(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(StorageFormat::bf16, d(g));
  return v;
}

void BM_PartialAttention(benchmark::State& state) {
  const int64_t n = state.range(0);
  const DcpLayout lay{n, 1};
  const int64_t rows = lay.count(0, kSeq);
  const KvCacheSpec spec{.layout = lay,
                         .rank = 0,
                         .physical_rows = (kSeq + n - 1) / n,
                         .kv_heads = 1,
                         .head_dim = kDk,
                         .v_dim = kDv,
                         .shared_latent = true,
                         .dtype = StorageFormat::bf16};
  HostDevice dev(nullptr);
  HostKvCache cache = *alloc_device_cache(dev, spec);
  const std::vector<float> k = randoms(static_cast<size_t>(kSeq * kDk), 1);
  if (!write_device_chunk(dev, cache, KvChunk{0, kSeq, StorageFormat::f32, k.data()}))
    state.SkipWithError("kv write failed");
  const std::vector<float> q = randoms(static_cast<size_t>(kTokens * kHeads * kDk), 2);
  const std::vector<int64_t> pos{kSeq - 1};
  std::vector<float> o(static_cast<size_t>(kTokens * kHeads * kDv)), lse(kTokens * kHeads);
  PartialAttentionParams p;
  p.q = q.data();
  p.tokens = kTokens;
  p.heads = kHeads;
  p.head_dim = kDk;
  p.q_heads_total = kHeads;
  p.kv_heads_total = 1;
  p.q_pos = pos.data();
  p.seq = kSeq;
  p.layout = lay;
  p.kv = cache.view();
  p.rows = rows;
  p.v_dim = kDv;
  p.scale = 0.0416666679f;  // 1/sqrt(576)
  p.o = o.data();
  p.lse = lse.data();
  for (auto _ : state) {
    if (!dev.partial_attention(p)) state.SkipWithError("partial attention failed");
    benchmark::DoNotOptimize(o.data());
  }
  state.counters["head_keys/s"] = benchmark::Counter(static_cast<double>(kTokens * kHeads * rows),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PartialAttention)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond);

void BM_Combine(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool a2a = state.range(1) == 1;
  constexpr int64_t kTokensC = 64, kHeadsC = 128;  // T x Hq rows: a batch of 64 tokens, 128 heads
  constexpr int64_t kRows = kTokensC * kHeadsC, kDvC = 128;
  HostDevice dev(nullptr);
  const auto sched = make_schedule<HostDevice::Schedule>(n, ReduceOrder::sequential, 0);
  if (!sched) state.SkipWithError(sched.status().message().c_str());
  std::vector<float> o(static_cast<size_t>(kRows * kDvC)), lse(static_cast<size_t>(kRows));
  if (a2a) {  // after the All-to-All: merge N partials of every (t, head) this rank keeps
    const std::vector<float> recv = randoms(static_cast<size_t>(n * kRows * (kDvC + 1)), 3);
    const body::A2aCombine<HostDevice::Schedule> c{.shape = {kTokensC, kHeadsC, kDvC, n},
                                                   .sched = *sched,
                                                   .recv = recv.data(),
                                                   .o = o.data(),
                                                   .lse = lse.data()};
    for (auto _ : state) {
      if (!dev.a2a_combine(c)) state.SkipWithError("a2a combine failed");
      benchmark::DoNotOptimize(o.data());
    }
  } else {  // after the LSE AllGather: the group LSE and the scaled partial of every row
    const std::vector<float> po = randoms(static_cast<size_t>(kRows * kDvC), 3);
    const std::vector<float> pl = randoms(static_cast<size_t>(kRows), 4);
    const std::vector<float> lse_all = randoms(static_cast<size_t>(n * kRows), 5);
    std::vector<float> send(static_cast<size_t>(kRows * kDvC));
    const body::AgRsScale<HostDevice::Schedule> c{.shape = {kTokensC, kHeadsC / n, kDvC, n},
                                                  .sched = *sched,
                                                  .partial_o = po.data(),
                                                  .partial_lse = pl.data(),
                                                  .lse_all = lse_all.data(),
                                                  .send = send.data(),
                                                  .lse_out = lse.data()};
    for (auto _ : state) {
      if (!dev.agrs_scale(c)) state.SkipWithError("ag_rs scale failed");
      benchmark::DoNotOptimize(send.data());
    }
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(kRows), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Combine)
    ->ArgsProduct({{1, 2, 4, 8}, {0, 1}})
    ->ArgNames({"N", "a2a"})
    ->Unit(benchmark::kMillisecond);

void BM_Step(benchmark::State& state) {
  const int64_t n = state.range(0);
  DcpInputs in;
  in.dims = {kTokens, kHeads, 1, kDk, kDv, true};
  in.q = randoms(static_cast<size_t>(kTokens * kHeads * kDk), 5);
  in.k = randoms(static_cast<size_t>(kSeq * kDk), 6);
  in.kv_dtype = StorageFormat::bf16;
  in.q_pos = {kSeq - 1};
  in.seq = kSeq;
  in.scale = 0.0416666679f;
  DcpConfig cfg;
  cfg.tp_size = n;
  cfg.layout = {n, 1};
  cfg.strategy = state.range(1) == 1 ? CommStrategy::a2a : CommStrategy::ag_rs;
  for (auto _ : state) {
    Result<GroupRun> r = run_dcp_threads(in, cfg);
    if (!r) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r);
  }
  state.counters["head_keys/s"] = benchmark::Counter(static_cast<double>(kTokens * kHeads * kSeq),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Step)
    ->ArgsProduct({{1, 2, 4, 8}, {0, 1}})
    ->ArgNames({"N", "a2a"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
