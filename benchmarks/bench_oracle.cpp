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
#include <sys/resource.h>

#include <Eigen/Dense>
#include <cmath>
#include <memory>
#include <string>
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

// Long-context GQA (8 query heads on 1 KV head of dim 128) and the absorbed-MLA latent (576 =
// 512 + 64, Dv 512, 16 gathered heads), held as doubles; and a whole model's decode step (32 query
// / 8 KV heads, D 128: the long-context case of docs/oracle.md) at 32K, 128K and 1M keys, its K
// and V held as a case file stores them (bf16 bytes), as `dcp-verify reference` reads them.
constexpr Shape kGqa{"gqa", 8, 1, 128, 128, 32768, false};
constexpr Shape kMla{"mla", 16, 1, 576, 512, 4096, true};
constexpr Shape kStep32k{"step32k", 32, 8, 128, 128, 32768, false};
constexpr Shape kStep128k{"step128k", 32, 8, 128, 128, 131072, false};
constexpr Shape kStep1m{"step1m", 32, 8, 128, 128, 1048576, false};

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

// The decode step with K and V as bf16 bytes (uniform values in [-2, 2) rounded to bf16), built
// without ever holding them as doubles (1M keys: 4 GB as bf16, 16 GB as doubles), once per shape
// for all the benchmarks that read it. Only one such case is kept at a time.
const Case& make_stored(const Shape& s) {
  static std::string built;
  static Case c;
  if (built == s.name) return c;
  c = Case();  // the previous size's bytes are freed before the next are made
  uint64_t state = 0x9e3779b97f4a7c15;
  const auto bf16 = [&] {  // splitmix64, its top 24 bits as a float in [-2, 2)
    uint64_t z = (state += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    z ^= z >> 31;
    return dcp::oracle::double_to_bf16_bits(static_cast<double>(z >> 40) * 0x1p-22 - 2.0);
  };
  c.q_dtype = c.kv_dtype = dcp::oracle::DType::bf16;
  c.q = dcp::oracle::Tensor<double>({1, s.q_heads, s.head_dim});
  for (double& x : c.q.data) x = dcp::oracle::bf16_bits_to_double(bf16());
  c.v_dim = s.v_dim;
  const auto stored = [&](int64_t width) {
    auto bytes = std::make_shared<std::vector<uint16_t>>(s.seq * s.kv_heads * width);
    for (uint16_t& b : *bytes) b = bf16();
    const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
    return dcp::oracle::KvTensor::stored({s.seq, s.kv_heads, width}, dcp::oracle::DType::bf16, p,
                                         std::move(bytes), {});
  };
  c.k = stored(s.head_dim);
  c.v = stored(s.v_dim);
  built = s.name;
  return c;
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

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Each row of logits into its softmax weights (max-shifted).
void softmax_rows(Matrix& s) {
  for (Eigen::Index h = 0; h < s.rows(); ++h) {
    auto row = s.row(h);
    row = (row.array() - row.maxCoeff()).exp();
    row /= row.sum();
  }
}

// The same attention as float64 matrix products, one task per KV head: its G query heads' logits
// Q_g K_g^T [G, S], the softmax rows, then P V_g [G, Dv] (every key visible, as above).
std::vector<double> eigen_fp64(const Case& c) {
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
    softmax_rows(s);
    Eigen::Map<Matrix>(&out[g * G * dv], G, dv) = s * v;
  });
  return out;
}

// Keys per block of the stored baseline: 4096 rows of 128 doubles (4 MiB) stay in cache.
constexpr int64_t kBaselineBlock = 4096;

// The same matrix products over K and V held as bf16 bytes: each KV head's keys widened to
// float64 a block at a time (kBaselineBlock rows), Q_g K_b^T into the logits, the softmax rows,
// then sum_b P_b V_b, V widened the same way.
std::vector<double> eigen_fp64_stored(const Case& c) {
  using Rows = Eigen::Map<const Matrix, 0, Eigen::OuterStride<>>;
  const int64_t Hq = c.q_heads(), Hkv = c.kv_heads(), G = Hq / Hkv, dk = c.head_dim(), dv = c.v_dim,
                S = c.seq();
  const double tau = 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<double> out(Hq * dv);
  dcp::oracle::parallel_for(Hkv, [&](int64_t g) {
    const Rows q(&c.q.data[c.q.offset({0, g * G, 0})], G, dk, Eigen::OuterStride<>(dk));
    Matrix s(G, S), block(kBaselineBlock, std::max(dk, dv));
    for (int64_t b0 = 0; b0 < S; b0 += kBaselineBlock) {
      const int64_t n = std::min(kBaselineBlock, S - b0);
      for (int64_t j = 0; j < n; ++j) c.k.row(b0 + j, g, block.row(j).data());
      s.middleCols(b0, n) = tau * (q * block.topLeftCorner(n, dk).transpose());
    }
    softmax_rows(s);
    Matrix o = Matrix::Zero(G, dv);
    for (int64_t b0 = 0; b0 < S; b0 += kBaselineBlock) {
      const int64_t n = std::min(kBaselineBlock, S - b0);
      for (int64_t j = 0; j < n; ++j) c.v_row(b0 + j, g, block.row(j).data());
      o += s.middleCols(b0, n) * block.topLeftCorner(n, dv);
    }
    Eigen::Map<Matrix>(&out[g * G * dv], G, dv) = o;
  });
  return out;
}

// MAC/s; for K and V held as stored, their bytes read per second (GB/s) and the process's peak
// resident memory so far (RSS_GB: the steps run smallest first, so each size's figure is its own).
void set_counters(benchmark::State& state, const Case& c) {
  const double macs = static_cast<double>(c.q_heads() * c.seq() * (c.head_dim() + c.v_dim));
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
  if (!c.k.is_stored()) return;
  const double bytes = static_cast<double>(c.k.bytes_held() + c.v.bytes_held());
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  rusage use{};
  getrusage(RUSAGE_SELF, &use);
  state.counters["RSS_GB"] = static_cast<double>(use.ru_maxrss) * 1024.0 / 1e9;  // KiB on Linux
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

void BM_EigenStored(benchmark::State& state, Shape shape) {
  const Case& c = make_stored(shape);
  for (auto _ : state) benchmark::DoNotOptimize(eigen_fp64_stored(c));
  set_counters(state, c);
}

void BM_FastTier(benchmark::State& state, Shape shape) {
  const Case c = make(shape);
  for (auto _ : state)
    benchmark::DoNotOptimize(dcp::oracle::attend_rows<dcp::oracle::dd>(c, nullptr, true));
  set_counters(state, c);
}

void BM_FastTierStored(benchmark::State& state, Shape shape) {
  const Case& c = make_stored(shape);
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
BENCHMARK_CAPTURE(BM_FastTierStored, step32k, kStep32k)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_EigenStored, step32k, kStep32k)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FastTierStored, step128k, kStep128k)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_EigenStored, step128k, kStep128k)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FastTierStored, step1m, kStep1m)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_EigenStored, step1m, kStep1m)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
