// The oracle's speed against float64 baselines on the same case, in the same run.
//
// Each computes every (token, head) row of a case on all hardware threads (oracle/parallel.hpp)
// and reports multiply-adds per second: rows * visible keys * (Dk + Dv). The baselines: a plain
// double loop (dot, max, exp, sum, P.V) compiled with the same flags, and the same attention as
// matrix products in Eigen, aware of GQA (each KV head's K and V read once for its query heads:
// scores = Q_g K_g^T, P = softmax, O = P V_g), the float64 BLAS figure the fast tier is held to.
// The fast tier is oracle::attend_rows<dd>. tools/bench-oracle runs them and prints the ratios.
//
//   build/bin/bench_oracle --benchmark_filter=gqa
#include <benchmark/benchmark.h>

#include <Eigen/Dense>
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

// Long-context GQA (64 query / 8 KV heads of dim 128, one KV group), the absorbed-MLA latent
// (576 = 512 + 64, Dv 512, 16 gathered heads), and a whole model's decode step at 128K (32 query
// / 8 KV heads, D 128: the long-context case of docs/oracle.md).
constexpr Shape kGqa{"gqa", 8, 1, 128, 128, 32768, false};
constexpr Shape kMla{"mla", 16, 1, 576, 512, 4096, true};
constexpr Shape kLong{"long", 32, 8, 128, 128, 131072, false};

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

// The same attention as float64 matrix products, one task per KV head: its G query heads' logits
// Q_g K_g^T [G, S], the softmax rows, then P V_g [G, Dv] (every key visible, as above).
std::vector<double> eigen_fp64(const Case& c) {
  using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Rows = Eigen::Map<const Matrix, 0, Eigen::OuterStride<>>;
  const int64_t Hq = c.q_heads(), Hkv = c.kv_heads(), G = Hq / Hkv, dk = c.head_dim(), dv = c.v_dim,
                S = c.seq();
  const double tau = 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<double> out(Hq * dv);
  dcp::oracle::parallel_for(Hkv, [&](int64_t g) {
    const Rows q(&c.q.data[c.q.offset({0, g * G, 0})], G, dk, Eigen::OuterStride<>(dk));
    const Rows k(&c.k.data[c.k.offset({0, g, 0})], S, dk, Eigen::OuterStride<>(Hkv * dk));
    const Rows v =
        c.shared_latent()
            ? Rows(&c.k.data[c.k.offset({0, g, 0})], S, dv, Eigen::OuterStride<>(Hkv * dk))
            : Rows(&c.v.data[c.v.offset({0, g, 0})], S, dv, Eigen::OuterStride<>(Hkv * dv));
    Matrix s = tau * (q * k.transpose());
    for (int64_t h = 0; h < G; ++h) {
      auto row = s.row(h);
      row = (row.array() - row.maxCoeff()).exp();
      row /= row.sum();
    }
    Eigen::Map<Matrix>(&out[g * G * dv], G, dv) = s * v;
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

void BM_Eigen(benchmark::State& state, Shape shape) {
  const Case c = make(shape);
  for (auto _ : state) benchmark::DoNotOptimize(eigen_fp64(c));
  set_counters(state, c);
}

void BM_FastTier(benchmark::State& state, Shape shape) {
  const Case c = make(shape);
  for (auto _ : state)
    benchmark::DoNotOptimize(dcp::oracle::attend_rows<dcp::oracle::dd>(c, nullptr, true));
  set_counters(state, c);
}

BENCHMARK_CAPTURE(BM_Plain, gqa, kGqa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Eigen, gqa, kGqa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FastTier, gqa, kGqa)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Plain, mla, kMla)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Eigen, mla, kMla)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FastTier, mla, kMla)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Plain, long, kLong)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Eigen, long, kLong)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FastTier, long, kLong)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
