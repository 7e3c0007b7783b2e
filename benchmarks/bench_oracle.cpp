// The oracle's speed against a plain fp64 attention loop on the same case, in the same run.
//
// Both compute every (token, head) row of a case on all hardware threads (oracle/parallel.hpp)
// and report multiply-adds per second: rows * visible keys * (Dk + Dv). The baseline is the
// loop anyone would write in double (dot, max, exp, sum, P.V), compiled with the same flags; the
// fast tier is oracle::attend_rows<dd>. tools/bench-oracle runs both and prints the ratio.
//
//   build/bin/bench_oracle --benchmark_filter=gqa
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "oracle/attention.hpp"
#include "oracle/parallel.hpp"
#include "properties/case_gen.hpp"

namespace {

using dcp::oracle::Case;

struct Shape {
  const char* name;
  int64_t q_heads, kv_heads, head_dim, v_dim, seq;
  bool latent;
};

// Long-context GQA (64 query / 8 KV heads of dim 128, one KV group) and the absorbed-MLA latent
// (576 = 512 + 64, Dv 512, 16 gathered heads).
constexpr Shape kGqa{"gqa", 8, 1, 128, 128, 32768, false};
constexpr Shape kMla{"mla", 16, 1, 576, 512, 4096, true};

Case make(const Shape& s) {
  dcp::props::CaseSpec spec;
  spec.q_heads = s.q_heads;
  spec.kv_heads = s.kv_heads;
  spec.head_dim = s.head_dim;
  spec.v_dim = s.v_dim;
  spec.seq = s.seq;
  spec.shared_latent = s.latent;
  spec.kv_dtype = dcp::oracle::DType::bf16;
  spec.q_dtype = dcp::oracle::DType::bf16;
  spec.seed = 1;
  return dcp::props::make_case(spec);
}

// Plain fp64 attention of every row (causal, default positions: every key visible).
std::vector<double> plain_fp64(const Case& c) {
  const int64_t Hq = c.q_heads(), dk = c.head_dim(), dv = c.v_dim, S = c.seq();
  const double tau = 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<double> out(Hq * dv);
  dcp::oracle::parallel_for(Hq, [&](int64_t h) {
    const int64_t g = c.kv_head_of(h);
    const double* q = &c.q.data[c.q.offset({0, h, 0})];
    std::vector<double> s(S);
    double m = -INFINITY;
    for (int64_t j = 0; j < S; ++j) {
      const double* k = &c.k.data[c.k.offset({j, g, 0})];
      double dot = 0.0;
      for (int64_t i = 0; i < dk; ++i) dot += q[i] * k[i];
      s[j] = tau * dot;
      m = std::max(m, s[j]);
    }
    double z = 0.0;
    double* o = &out[h * dv];
    for (int64_t j = 0; j < S; ++j) {
      const double p = std::exp(s[j] - m);
      z += p;
      const double* v =
          c.shared_latent() ? &c.k.data[c.k.offset({j, g, 0})] : &c.v.data[c.v.offset({j, g, 0})];
      for (int64_t i = 0; i < dv; ++i) o[i] += p * v[i];
    }
    for (int64_t i = 0; i < dv; ++i) o[i] /= z;
  });
  return out;
}

void set_counters(benchmark::State& state, const Case& c) {
  const double macs = static_cast<double>(c.q_heads() * c.seq() * (c.head_dim() + c.v_dim));
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Plain(benchmark::State& state, Shape shape) {
  const Case c = make(shape);
  for (auto _ : state) benchmark::DoNotOptimize(plain_fp64(c));
  set_counters(state, c);
}

void BM_FastTier(benchmark::State& state, Shape shape) {
  const Case c = make(shape);
  for (auto _ : state)
    benchmark::DoNotOptimize(dcp::oracle::attend_rows<dcp::oracle::dd>(c, nullptr, true));
  set_counters(state, c);
}

BENCHMARK_CAPTURE(BM_Plain, gqa, kGqa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FastTier, gqa, kGqa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Plain, mla, kMla)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FastTier, mla, kMla)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
