#include "oracle/attention.hpp"

#include <type_traits>

#include "oracle/parallel.hpp"

namespace dcp::oracle {
namespace {

// Sum of q[k] * key[k]. Inputs are fp32/fp16/bf16 values, so every product of two of them is
// exact in double (at most 24 + 24 significand bits); only the additions round.
template <class Real>
Real dot(const double* q, const double* key, int64_t n) {
  Real acc(0);
  for (int64_t i = 0; i < n; ++i) acc += Real(q[i]) * Real(key[i]);
  return acc;
}

template <>
dd dot<dd>(const double* q, const double* key, int64_t n) {
  // Four independent accumulators break the two_sum latency chain; dd + exact double each.
  constexpr int kLanes = 4;
  dd acc[kLanes];
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

}  // namespace

template <class Real>
MergeState<Real> attend_row(const Case& c, int64_t t, int64_t h, std::span<const int64_t> keys,
                            bool with_sink) {
  using std::exp;
  using std::sqrt;
  using std::tanh;
  const int64_t dk = c.head_dim();
  const int64_t dv = c.v_dim;
  const int64_t g = c.kv_head_of(h);
  const bool sink = with_sink && c.has_sink();
  MergeState<Real> st = MergeState<Real>::identity(dv, LseBase::e);
  if (keys.empty() && !sink) return st;

  const Real tau = c.scale ? Real(*c.scale) : Real(1) / sqrt(Real(static_cast<double>(dk)));
  const Real cap(c.softcap);
  const double* qrow = &c.q.data[c.q.offset({t, h, 0})];

  std::vector<Real> s(keys.size());
  Real m = RealOps<Real>::neg_inf();
  for (size_t x = 0; x < keys.size(); ++x) {
    const double* krow = &c.k.data[c.k.offset({keys[x], g, 0})];
    Real score = tau * dot<Real>(qrow, krow, dk);
    if (c.softcap > 0.0) score = cap * tanh(score / cap);
    s[x] = score;
    m = x == 0 ? score : max_of(m, score);
  }
  const Real sigma = sink ? Real(c.sink[h]) : Real(0);
  if (sink) m = keys.empty() ? sigma : max_of(m, sigma);

  Real z(0);
  for (size_t x = 0; x < keys.size(); ++x) {
    const Real p = exp(s[x] - m);
    z += p;
    const double* vrow = c.shared_latent() ? &c.k.data[c.k.offset({keys[x], g, 0})]
                                           : &c.v.data[c.v.offset({keys[x], g, 0})];
    axpy<Real>(st.n.data(), p, vrow, dv);
  }
  if (sink) z += exp(sigma - m);
  st.m = m;
  st.z = z;
  return st;
}

template <class Real>
std::vector<MergeState<Real>> attend_rows(const Case& c, const KeyFilter& filter, bool with_sink) {
  const int64_t T = c.tokens(), Hq = c.q_heads();
  std::vector<std::vector<int64_t>> keys(T);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j : visible_keys(c, t)) {
      if (!filter || filter(j)) keys[t].push_back(j);
    }
  }
  std::vector<MergeState<Real>> rows(T * Hq);
  auto row = [&](int64_t r) {
    const int64_t t = r / Hq, h = r % Hq;
    rows[r] = attend_row<Real>(c, t, h, keys[t], with_sink);
  };
  if constexpr (std::is_same_v<Real, certify_real>) {
    parallel_for(T * Hq, row, FreeMpfrThreadCache{});
  } else {
    parallel_for(T * Hq, row);
  }
  return rows;
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

Expected<Attention> reference(const Case& c, Tier tier) {
  DCP_TRY(validate(c));
  if (tier == Tier::certify) return to_attention(c, attend_rows<certify_real>(c, nullptr, true));
  return to_attention(c, attend_rows<dd>(c, nullptr, true));
}

#define DCP_INSTANTIATE(Real)                                                                    \
  template MergeState<Real> attend_row<Real>(const Case&, int64_t, int64_t,                      \
                                             std::span<const int64_t>, bool);                    \
  template std::vector<MergeState<Real>> attend_rows<Real>(const Case&, const KeyFilter&, bool); \
  template Attention to_attention<Real>(const Case&, const std::vector<MergeState<Real>>&);
DCP_INSTANTIATE(double)
DCP_INSTANTIATE(dd)
DCP_INSTANTIATE(certify_real)
#undef DCP_INSTANTIATE

}  // namespace dcp::oracle
