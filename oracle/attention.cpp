#include "oracle/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <type_traits>

#include "oracle/parallel.hpp"

namespace dcp::oracle {
namespace {

// Significand bits of the values a case holds in a tensor of dtype d with these scales: a
// floating format's (its implicit one included), an int8 code's 7 (|code| <= 128), plus, where
// there are scales, theirs (an f32's 24; a double's 53 where one is not an f32).
int value_bits(DType d, const std::vector<double>& scales) {
  const DTypeInfo* info = dtype_info(d);
  int bits = info && info->encoding != Encoding::integer ? info->man_bits + 1 : 7;
  if (!scales.empty()) {
    const bool f32 = std::all_of(scales.begin(), scales.end(), [](double x) {
      return static_cast<double>(static_cast<float>(x)) == x;
    });
    bits += f32 ? 24 : 53;
  }
  return bits;
}

// Whether every product q[i] * k[i] of a case is exact in double: its factors' significand bits
// sum to at most 53. So for q in f32, bf16 or f16 and K in those or fp8 with f32 scales (at most
// 24 + 28); not for an int8 cache, whose values (7-bit codes times f32 scales) hold up to 31.
bool products_exact(const Case& c) {
  return value_bits(c.q_dtype, {}) + value_bits(c.kv_dtype, c.k_scale) <= 53;
}

// Sum of q[k] * key[k]. The dd tier adds each product exactly: as one double where products are
// exact (products_exact), else as two_prod's pair; only the additions round.
template <class Real>
Real dot(const double* q, const double* key, int64_t n, bool /*exact*/) {
  Real acc(0);
  for (int64_t i = 0; i < n; ++i) acc += Real(q[i]) * Real(key[i]);
  return acc;
}

template <>
dd dot<dd>(const double* q, const double* key, int64_t n, bool exact) {
  // Four independent accumulators break the two_sum latency chain; dd + exact double each.
  constexpr int kLanes = 4;
  dd acc[kLanes];
  if (!exact) {
    for (int64_t i = 0; i < n; ++i) acc[i % kLanes] = acc[i % kLanes] + two_prod(q[i], key[i]);
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
  }
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += q[i + l] * key[i + l];
  }
  for (; i < n; ++i) acc[0] += q[i] * key[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// n[i] += p * v[i] for i < dv.
template <class Real>
void axpy(Real* n, const Real& p, const double* v, int64_t dv) {
  for (int64_t i = 0; i < dv; ++i) n[i] += p * Real(v[i]);
}

template <>
void axpy<dd>(dd* n, const dd& p, const double* v, int64_t dv) {
  for (int64_t i = 0; i < dv; ++i) {
    // p * v exactly as (hi, lo) up to the p.lo * v rounding (2^-106 relative), then a
    // two_sum-based add whose error is bounded relative to |n| + |p v|.
    dd prod = two_prod(p.hi, v[i]);
    prod.lo += p.lo * v[i];
    dd s = two_sum(n[i].hi, prod.hi);
    s.lo += n[i].lo + prod.lo;
    n[i] = fast_two_sum(s.hi, s.lo);
  }
}

template <class Real>
Real max_of(const Real& a, const Real& b) {
  return a < b ? b : a;
}

// --- the fast tier's blocked kernel ----------------------------------------------------------
//
// attend_rows<dd> splits each query token's visible keys into blocks and runs, per (token, KV
// head, block), one task that reads every key row once for all G query heads sharing that KV head
// (GQA and MLA reuse). A task keeps its accumulators as separate hi and lo arrays, so the
// double-double updates of independent lanes (dot products over 8 lanes, the P.V update over Dv
// components) vectorize; the kernel is compiled for AVX-512, for AVX2 + FMA and for the baseline,
// and the widest the CPU has runs (where two_prod's FMA is one instruction, not a library call).
// The arithmetic is that of attend_row: dd += each product exactly in the dots, two_prod-based
// P.V updates, a dd exp per key and head. Blocks are merged in order by combine (merge.hpp).

// Keys per block: about kBlocksPerThread blocks per thread and row group (enough to balance the
// threads, few merges: each costs a few u_dd relative), at least kMinBlockKeys (a task's setup
// amortized), at most kMaxBlockKeys (a stop request is seen within a block: well under a second).
constexpr int64_t kMinBlockKeys = 1024;
constexpr int64_t kMaxBlockKeys = int64_t{1} << 16;
constexpr int64_t kBlocksPerThread = 4;
// Lanes of the dot products' independent accumulators (one AVX-512 register of doubles).
constexpr int kDotLanes = 8;

// out[i] = exp(x[i]) for dd arguments x[i] <= 0 (hi and lo in separate arrays): dd.hpp's exp, its
// range checks as selects around exp_in_range, so that the loop vectorizes. A NaN argument (the
// logits of a case that overflows double: inf - inf) stays NaN, for reference() to refuse the
// case, and never reaches exp_in_range's conversion to an integer.
[[gnu::always_inline]] inline void exp_nonpositive(const double* xh, const double* xl, double* oh,
                                                   double* ol, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const bool in_range = xh[i] >= kExpUnderflow;  // false for NaN
    const dd e = exp_in_range(in_range ? dd(xh[i], xl[i]) : dd(0.0));
    const double outside = xh[i] < kExpUnderflow ? 0.0 : xh[i];  // 0, or the NaN
    oh[i] = in_range ? e.hi : outside;
    ol[i] = in_range ? e.lo : outside;
  }
}

struct BlockTask {
  int64_t t = 0, g = 0;        // query token, KV head
  int64_t begin = 0, end = 0;  // into the token's visible keys
  bool sink = false;           // this block adds the sink (the first block of its row group)
};

struct BlockArgs {
  const Case* c;
  const std::vector<int64_t>* keys;  // the token's visible keys
  BlockTask task;
  std::vector<MergeState<dd>>* out;  // [G] states of this block
  bool exact_products;               // products_exact(*c), decided once for the case
};

// hi + lo += x for an exact double x, as operator+(dd, double), on separate hi and lo.
[[gnu::always_inline]] inline void add_exact(double& hi, double& lo, double x) {
  const double sum = hi + x;
  const double bb = sum - hi;
  double e = (hi - (sum - bb)) + (x - bb);
  e += lo;
  hi = sum + e;
  lo = e - (hi - sum);
}

// hi + lo += a * b where the product may round in double (products_exact false): its rounded
// part added exactly, its error (two_prod's, exact by one FMA) added to lo, which rounds it
// within the pair's 2^-106 relative.
[[gnu::always_inline]] inline void add_product(double& hi, double& lo, double a, double b) {
  const double p = a * b;
  add_exact(hi, lo, p);
  lo += std::fma(a, b, -p);
}

[[gnu::always_inline]] inline void block_kernel(const BlockArgs& a) {
  const Case& c = *a.c;
  const BlockTask& tk = a.task;
  const int64_t Hq = c.q_heads(), Hkv = c.kv_heads(), G = Hq / Hkv, dk = c.head_dim(), dv = c.v_dim,
                h0 = tk.g * G, nb = tk.end - tk.begin;
  const dd tau = c.scale ? dd(*c.scale) : dd(1.0) / sqrt(dd(static_cast<double>(dk)));
  const int64_t* keys = a.keys->data() + tk.begin;
  const int64_t qpos = c.query_pos(tk.t);
  const bool exact_products = a.exact_products;
  // A stored K or V row is widened here once for the G heads that read it.
  std::vector<double> row_buf(static_cast<size_t>(std::max(dk, c.shared_latent() ? dk : dv)));

  // Pass 1: every head's logits over the block, and their maxima.
  std::vector<dd> s(static_cast<size_t>(G * nb));
  std::vector<dd> m(static_cast<size_t>(G), RealOps<dd>::neg_inf());
  for (int64_t x = 0; x < nb; ++x) {
    const double* krow = c.k.row(keys[x], tk.g, row_buf.data());
    for (int64_t h = 0; h < G; ++h) {
      const double* qrow = c.q.data.data() + (tk.t * Hq + h0 + h) * dk;
      double hi[kDotLanes] = {}, lo[kDotLanes] = {};
      int64_t i = 0;
      if (exact_products) {
        for (; i + kDotLanes <= dk; i += kDotLanes)
          for (int l = 0; l < kDotLanes; ++l) add_exact(hi[l], lo[l], qrow[i + l] * krow[i + l]);
        for (int l = 0; i < dk; ++i, ++l) add_exact(hi[l], lo[l], qrow[i] * krow[i]);
      } else {
        for (; i + kDotLanes <= dk; i += kDotLanes)
          for (int l = 0; l < kDotLanes; ++l) add_product(hi[l], lo[l], qrow[i + l], krow[i + l]);
        for (int l = 0; i < dk; ++i, ++l) add_product(hi[l], lo[l], qrow[i], krow[i]);
      }
      dd acc[kDotLanes];
      for (int l = 0; l < kDotLanes; ++l) acc[l] = dd(hi[l], lo[l]);
      for (int w = kDotLanes / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) acc[l] = acc[l] + acc[l + w];
      const dd score = variant_logit(c, tau * acc[0], h0 + h, qpos, keys[x]);
      s[static_cast<size_t>(h * nb + x)] = score;
      dd& mh = m[static_cast<size_t>(h)];
      mh = x == 0 ? score : max_of(mh, score);
    }
  }
  if (tk.sink)
    for (int64_t h = 0; h < G; ++h) {
      const dd sigma(c.sink[static_cast<size_t>(h0 + h)]);
      dd& mh = m[static_cast<size_t>(h)];
      mh = nb == 0 ? sigma : max_of(mh, sigma);
    }

  // Pass 2: P = exp(s - m) for every head over the block (vectorized), their sums in key order,
  // and the P.V update, each V row read once for the G heads.
  std::vector<double> xhi(static_cast<size_t>(nb)), xlo(static_cast<size_t>(nb));
  std::vector<double> phi(static_cast<size_t>(G * nb)), plo(static_cast<size_t>(G * nb));
  std::vector<dd> z(static_cast<size_t>(G), dd(0.0));
  for (int64_t h = 0; h < G; ++h) {
    const dd mh = m[static_cast<size_t>(h)];
    for (int64_t x = 0; x < nb; ++x) {
      const dd d = s[static_cast<size_t>(h * nb + x)] - mh;
      xhi[static_cast<size_t>(x)] = d.hi;
      xlo[static_cast<size_t>(x)] = d.lo;
    }
    exp_nonpositive(xhi.data(), xlo.data(), phi.data() + h * nb, plo.data() + h * nb, nb);
    dd& zh = z[static_cast<size_t>(h)];
    for (int64_t x = 0; x < nb; ++x)
      zh += dd(phi[static_cast<size_t>(h * nb + x)], plo[static_cast<size_t>(h * nb + x)]);
  }
  std::vector<double> nhi(static_cast<size_t>(G * dv), 0.0), nlo(static_cast<size_t>(G * dv), 0.0);
  for (int64_t x = 0; x < nb; ++x) {
    const double* vrow = c.v_row(keys[x], tk.g, row_buf.data());
    for (int64_t h = 0; h < G; ++h) {
      const dd p(phi[static_cast<size_t>(h * nb + x)], plo[static_cast<size_t>(h * nb + x)]);
      double* nh = nhi.data() + h * dv;
      double* nl = nlo.data() + h * dv;
      const double ph = p.hi, pl = p.lo;
      for (int64_t i = 0; i < dv; ++i) {  // n += p v, as axpy<dd>
        const double prod_hi = ph * vrow[i];
        const double prod_lo = std::fma(ph, vrow[i], -prod_hi) + pl * vrow[i];
        const double sum = nh[i] + prod_hi;
        const double bb = sum - nh[i];
        double e = (nh[i] - (sum - bb)) + (prod_hi - bb);
        e += nl[i] + prod_lo;
        nh[i] = sum + e;
        nl[i] = e - (nh[i] - sum);
      }
    }
  }
  for (int64_t h = 0; h < G; ++h) {
    MergeState<dd>& st = (*a.out)[static_cast<size_t>(h)];
    st = MergeState<dd>::identity(dv, LseBase::e);
    if (nb == 0 && !tk.sink) continue;
    const size_t hz = static_cast<size_t>(h);
    if (tk.sink) z[hz] += exp(dd(c.sink[static_cast<size_t>(h0 + h)]) - m[hz]);
    st.m = m[hz];
    st.z = z[hz];
    for (int64_t i = 0; i < dv; ++i)
      st.n[static_cast<size_t>(i)] =
          dd(nhi[static_cast<size_t>(h * dv + i)], nlo[static_cast<size_t>(h * dv + i)]);
  }
}

// The kernel compiled three ways; run_block picks the widest the CPU supports.
[[gnu::target("avx512f,avx512dq,avx512vl,avx2,fma")]] void block_avx512(const BlockArgs& a) {
  block_kernel(a);
}
[[gnu::target("avx2,fma")]] void block_avx2(const BlockArgs& a) { block_kernel(a); }
void block_baseline(const BlockArgs& a) { block_kernel(a); }

using BlockFn = void (*)(const BlockArgs&);
BlockFn pick_block_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
    return block_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return block_avx2;
  return block_baseline;
}

}  // namespace

template <class Real>
MergeState<Real> attend_row(const Case& c, int64_t t, int64_t h, std::span<const int64_t> keys,
                            bool with_sink) {
  using std::exp;
  using std::sqrt;
  const int64_t dk = c.head_dim();
  const int64_t dv = c.v_dim;
  const int64_t g = c.kv_head_of(h);
  const bool sink = with_sink && c.has_sink();
  MergeState<Real> st = MergeState<Real>::identity(dv, LseBase::e);
  if (keys.empty() && !sink) return st;

  const Real tau = c.scale ? Real(*c.scale) : Real(1) / sqrt(Real(static_cast<double>(dk)));
  const double* qrow = &c.q.data[c.q.offset({t, h, 0})];
  const int64_t qpos = c.query_pos(t);
  std::vector<double> row_buf(static_cast<size_t>(std::max(dk, dv)));
  const bool exact = !std::is_same_v<Real, dd> || products_exact(c);  // only dd's dots ask

  std::vector<Real> s(keys.size());
  Real m = RealOps<Real>::neg_inf();
  for (size_t x = 0; x < keys.size(); ++x) {
    const double* krow = c.k.row(keys[x], g, row_buf.data());
    const Real score =
        variant_logit(c, Real(tau * dot<Real>(qrow, krow, dk, exact)), h, qpos, keys[x]);
    s[x] = score;
    m = x == 0 ? score : max_of(m, score);
  }
  const Real sigma = sink ? Real(c.sink[h]) : Real(0);
  if (sink) m = keys.empty() ? sigma : max_of(m, sigma);

  Real z(0);
  for (size_t x = 0; x < keys.size(); ++x) {
    const Real p = exp(s[x] - m);
    z += p;
    const double* vrow = c.v_row(keys[x], g, row_buf.data());
    axpy<Real>(st.n.data(), p, vrow, dv);
  }
  if (sink) z += exp(sigma - m);
  st.m = m;
  st.z = z;
  return st;
}

namespace {

// attend_rows, with a gate (nullptr: none) asked before each row and told after it.
template <class Real>
std::vector<MergeState<Real>> attend_rows_gated(const Case& c, const KeyFilter& filter,
                                                bool with_sink, WatchGate* gate) {
  const int64_t T = c.tokens(), Hq = c.q_heads();
  std::vector<std::vector<int64_t>> keys(T);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j : visible_keys(c, t)) {
      if (!filter || filter(j)) keys[t].push_back(j);
    }
  }
  std::vector<MergeState<Real>> rows(T * Hq);
  auto row = [&](int64_t r) {
    if (gate != nullptr && gate->stop()) return;
    const int64_t t = r / Hq, h = r % Hq;
    rows[r] = attend_row<Real>(c, t, h, keys[t], with_sink);
    if (gate != nullptr) gate->finished(1);
  };
  if constexpr (std::is_same_v<Real, certify_real>) {
    parallel_for(T * Hq, row, FreeMpfrThreadCache{});
  } else {
    parallel_for(T * Hq, row);
  }
  return rows;
}

}  // namespace

template <class Real>
std::vector<MergeState<Real>> attend_rows(const Case& c, const KeyFilter& filter, bool with_sink) {
  return attend_rows_gated<Real>(c, filter, with_sink, nullptr);
}

bool WatchGate::stop() {
  if (stopped_) return true;
  if (!w_.stop) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!stopped_ && w_.stop()) stopped_ = true;
  return stopped_;
}

void WatchGate::finished(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ += n;
  if (w_.progress) w_.progress(done_, total_);
}

std::string WatchGate::so_far(const char* what) const {
  return std::to_string(done_) + " of " + std::to_string(total_) + " " + what;
}

// The fast tier: blocks of keys per (token, KV head) on all threads (block_kernel above), merged
// in key order.
Expected<std::vector<MergeState<dd>>> attend_rows_watched(const Case& c, const KeyFilter& filter,
                                                          bool with_sink, const Watch& watch) {
  const int64_t T = c.tokens(), Hq = c.q_heads(), Hkv = c.kv_heads(), G = Hq / Hkv;
  std::vector<std::vector<int64_t>> keys(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j : visible_keys(c, t))
      if (!filter || filter(j)) keys[static_cast<size_t>(t)].push_back(j);
  const int64_t threads = hardware_threads();
  std::vector<BlockTask> tasks;
  std::vector<size_t> first(static_cast<size_t>(T * Hkv) + 1);  // each row group's first task
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = static_cast<int64_t>(keys[static_cast<size_t>(t)].size());
    const int64_t block =
        std::clamp((n + threads * kBlocksPerThread - 1) / (threads * kBlocksPerThread),
                   kMinBlockKeys, kMaxBlockKeys);
    for (int64_t g = 0; g < Hkv; ++g) {
      first[static_cast<size_t>(t * Hkv + g)] = tasks.size();
      int64_t b = 0;
      do {
        tasks.push_back({t, g, b, std::min(n, b + block), with_sink && c.has_sink() && b == 0});
        b += block;
      } while (b < n);
    }
  }
  first.back() = tasks.size();
  std::vector<std::vector<MergeState<dd>>> states(
      tasks.size(), std::vector<MergeState<dd>>(static_cast<size_t>(G)));
  static const BlockFn kernel = pick_block_kernel();
  const bool exact_products = products_exact(c);
  int64_t total = 0;
  for (const BlockTask& tk : tasks) total += (tk.end - tk.begin) * G;
  WatchGate gate(watch, total);
  parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t i) {
    if (gate.stop()) return;
    const size_t k = static_cast<size_t>(i);
    kernel({&c, &keys[static_cast<size_t>(tasks[k].t)], tasks[k], &states[k], exact_products});
    gate.finished((tasks[k].end - tasks[k].begin) * G);
  });
  if (gate.stopped()) return DCP_ERROR("interrupted: ", gate.so_far("(row, key) pairs computed"));
  std::vector<MergeState<dd>> rows(static_cast<size_t>(T * Hq));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < Hkv; ++g) {
      const size_t f = first[static_cast<size_t>(t * Hkv + g)],
                   l = first[static_cast<size_t>(t * Hkv + g) + 1];
      for (int64_t h = 0; h < G; ++h) {
        MergeState<dd> acc = states[f][static_cast<size_t>(h)];
        for (size_t k = f + 1; k < l; ++k) acc = combine(acc, states[k][static_cast<size_t>(h)]);
        rows[static_cast<size_t>(t * Hq + g * G + h)] = std::move(acc);
      }
    }
  return rows;
}

template <>
std::vector<MergeState<dd>> attend_rows<dd>(const Case& c, const KeyFilter& filter,
                                            bool with_sink) {
  return std::move(*attend_rows_watched(c, filter, with_sink, {}));  // unwatched: never stops
}

template <class Real>
Attention to_attention(const Case& c, const std::vector<MergeState<Real>>& rows) {
  const int64_t T = c.tokens(), Hq = c.q_heads(), dv = c.v_dim;
  Attention a{Tensor<double>({T, Hq, dv}), Tensor<double>({T, Hq}), c.lse_base};
  for (int64_t r = 0; r < T * Hq; ++r) {
    const auto out = rows[r].in_base(c.lse_base).output();
    for (int64_t i = 0; i < dv; ++i) a.o.data[r * dv + i] = to_double(out.o[i]);
    a.lse.data[r] = to_double(out.lse);
  }
  return a;
}

Status finite_attention(const Case& c, const Attention& a) {
  const int64_t Hq = c.q_heads(), dv = c.v_dim;
  for (int64_t r = 0; r < c.tokens() * Hq; ++r) {
    bool finite =
        !std::isnan(a.lse.data[r]) && a.lse.data[r] != std::numeric_limits<double>::infinity();
    for (int64_t i = 0; finite && i < dv; ++i) finite = std::isfinite(a.o.data[r * dv + i]);
    if (!finite)
      return DCP_ERROR("case: the attention of row (t, h) = (", r / Hq, ", ", r % Hq,
                       ") is not finite (LSE ", a.lse.data[r],
                       "): its logits overflow double (scale x q.k beyond 1.8e308); scale "
                       "q, k or the softmax scale down");
  }
  return {};
}

Expected<Attention> reference(const Case& c, Tier tier, const Watch& watch) {
  DCP_TRY(validate(c));
  Attention a;
  if (tier == Tier::certify) {
    // Watched between rows: a row of a long case takes seconds in MPFR.
    WatchGate gate(watch, c.tokens() * c.q_heads());
    auto rows = attend_rows_gated<certify_real>(c, nullptr, true, &gate);
    if (gate.stopped()) return DCP_ERROR("interrupted: ", gate.so_far("rows computed"));
    a = to_attention(c, rows);
  } else {
    auto rows = attend_rows_watched(c, nullptr, true, watch);
    if (!rows) return rows.status();
    a = to_attention(c, *rows);
  }
  DCP_TRY(finite_attention(c, a));
  return a;
}

#define DCP_INSTANTIATE(Real)                                                 \
  template MergeState<Real> attend_row<Real>(const Case&, int64_t, int64_t,   \
                                             std::span<const int64_t>, bool); \
  template Attention to_attention<Real>(const Case&, const std::vector<MergeState<Real>>&);
DCP_INSTANTIATE(double)
DCP_INSTANTIATE(dd)
DCP_INSTANTIATE(certify_real)
#undef DCP_INSTANTIATE
// attend_rows<dd> is the fast tier's own (above).
template std::vector<MergeState<double>> attend_rows<double>(const Case&, const KeyFilter&, bool);
template std::vector<MergeState<certify_real>> attend_rows<certify_real>(const Case&,
                                                                         const KeyFilter&, bool);

}  // namespace dcp::oracle
