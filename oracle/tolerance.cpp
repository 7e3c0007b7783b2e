#include "oracle/tolerance.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "oracle/parallel.hpp"

namespace dcp::oracle {
namespace {

// An exponential whose exact result is below exp(kUnderflowArg) may flush to zero in fp32
// (ln 2^-126 = -87.34, less one for the argument's own error): such a key's weight can be lost
// entirely, so its relative weight error is bounded by 1 instead of the ulp budget.
constexpr double kUnderflowArg = -86.0;
// The reference is dd rounded to double: at most 2^-53 relative plus dd's error (< 2^-100 of the
// scale), bounded together by 2^-52 of the scale.
const double kOracleRel = std::ldexp(1.0, -52);
// Bound quantities are evaluated in double from double scores; their relative error is < 2^-40
// for the shapes the suite handles, covered by inflating with this factor.
const double kEvalSlack = 1.0 + std::ldexp(1.0, -30);
constexpr double kMaxKappa = 0.1;

struct RowInputs {
  std::vector<double> s;      // logits after softcap, natural-log units
  std::vector<double> s_pre;  // scale * q.k before softcap
  std::vector<double> a;      // scale * sum |q_k k_k|
};

}  // namespace

Expected<Bound> derive_bound(const Case& c, const Attention& ref, const Arithmetic& a) {
  const int64_t T = c.tokens(), Hq = c.q_heads(), dk = c.head_dim(), dv = c.v_dim;
  Bound b{Tensor<double>({T, Hq, dv}), Tensor<double>({T, Hq}), 0.0};

  const double u_s = unit_roundoff(a.accum);              // scalar fp32 operations
  const double u = u_s * (a.truncating_mma ? 2.0 : 1.0);  // accumulations
  const double ulp = 2.0 * u_s;                           // 1 ulp, relative
  const double eps_exp = a.exp_ulps * ulp;
  const double eps_div = a.div_ulps * ulp;
  const double tiny = min_normal(a.accum);
  const double u_p = a.p_cast ? unit_roundoff(*a.p_cast) : 0.0;
  const double p_tiny = a.p_cast ? unit_roundoff(*a.p_cast) * min_normal(*a.p_cast) : 0.0;
  const double u_out = unit_roundoff(a.out);
  const double u_lse_out = unit_roundoff(a.lse_out);
  const int64_t R = std::max<int64_t>(1, a.shards);
  const double u_m = unit_roundoff(a.merge_accum);
  const double tau = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(dk));
  auto eps_log = [&](double ln_x) { return a.log_abs + a.log_ulps * ulp * std::fabs(ln_x); };

  std::vector<double> kappa_row(T * Hq, 0.0);
  std::vector<std::vector<int64_t>> keys(T);
  for (int64_t t = 0; t < T; ++t) keys[t] = visible_keys(c, t);

  parallel_for(T * Hq, [&](int64_t r) {
    const int64_t t = r / Hq, h = r % Hq, g = c.kv_head_of(h);
    const double L_ref = lse_to_natural(ref.base, ref.lse.data[r]);
    double* ob = &b.o.data[r * dv];
    if (L_ref == kNegInf) {  // nothing visible, no sink: O must be exactly 0, LSE exactly -inf
      std::fill(ob, ob + dv, 0.0);
      b.lse.data[r] = 0.0;
      return;
    }
    const auto& ks = keys[t];
    const int64_t n = static_cast<int64_t>(ks.size());
    const bool sink = c.has_sink();
    const double sigma = sink ? c.sink[h] : 0.0;
    const double* q = &c.q.data[c.q.offset({t, h, 0})];

    RowInputs in;
    in.s.resize(n);
    in.s_pre.resize(n);
    in.a.resize(n);
    double M = sink ? std::fabs(sigma) : 0.0;  // largest |logit|
    double smax = sink ? sigma : kNegInf;      // largest logit
    for (int64_t x = 0; x < n; ++x) {
      const double* kr = &c.k.data[c.k.offset({ks[x], g, 0})];
      double dot = 0.0, absdot = 0.0;
      for (int64_t i = 0; i < dk; ++i) {
        dot += q[i] * kr[i];
        absdot += std::fabs(q[i] * kr[i]);
      }
      in.s_pre[x] = tau * dot;
      in.a[x] = tau * absdot;
      in.s[x] = c.softcap > 0.0 ? c.softcap * std::tanh(in.s_pre[x] / c.softcap) : in.s_pre[x];
      M = std::max(M, std::fabs(in.s[x]));
      smax = std::max(smax, in.s[x]);
    }
    const double n_eff = static_cast<double>(n + (sink ? 1 : 0));

    // Per-key relative weight error e_j (docs/tolerances.md, section 3).
    const double g_dot = gamma_n(static_cast<double>(dk + 3), u);
    std::vector<double> p(n), e(n);
    double e_bar = 0.0, e_max = 0.0;
    for (int64_t x = 0; x < n; ++x) {
      p[x] = std::exp(in.s[x] - L_ref);
      double delta = g_dot * in.a[x] + static_cast<double>(dk + 3) * tiny;
      if (c.softcap > 0.0) {
        delta += 2.0 * u * std::fabs(in.s_pre[x]) + (a.tanh_rel + u) * std::fabs(in.s[x]);
      }
      const double arg = 3.0 * u * (std::fabs(in.s[x]) + M);
      if (in.s[x] - smax < kUnderflowArg) {
        e[x] = 1.0;
      } else {
        e[x] = (1.0 + eps_exp) * std::expm1(delta + arg) + eps_exp;
        e_max = std::max(e_max, e[x]);
      }
      e_bar += p[x] * e[x];
    }
    double p_sink = 0.0, e_sink = 0.0;
    if (sink) {
      p_sink = std::exp(sigma - L_ref);
      e_sink = sigma - smax < kUnderflowArg
                   ? 1.0
                   : (1.0 + eps_exp) * std::expm1(4.0 * u * (std::fabs(sigma) + M)) + eps_exp;
      if (e_sink < 1.0) e_max = std::max(e_max, e_sink);
      e_bar += p_sink * e_sink;
    }

    // Accumulations: the P.V sums and the softmax denominator, with up to one rescale per key
    // (online softmax with any tile size), in any order: gamma_{2 n}(u).
    const double g_acc = gamma_n(2.0 * n_eff, u);
    double c_S = g_acc + u_p;
    double c_O = g_acc + eps_div + u_out;
    double zeta = 0.0;
    double lse_merge = 0.0;
    const double L_abs = M + std::log(std::max(1.0, n_eff)) + 1.0;  // bound on |L_r| and |L|
    double abs_merge = 0.0;
    if (R > 1) {
      const double lam_shard = eps_log(std::log(std::max(1.0, n_eff))) + 3.0 * u_s * L_abs +
                               unit_roundoff(a.partial_lse) * L_abs;
      const double g_R = gamma_n(static_cast<double>(R), u_m);
      const double eps_merge_w = (1.0 + eps_exp) * std::expm1(6.0 * u_s * L_abs) + eps_exp;
      const double d_glob = lam_shard - std::log1p(-std::min(0.5, eps_merge_w)) + g_R +
                            eps_log(std::log(static_cast<double>(R))) + u_s * L_abs;
      zeta = (1.0 + eps_exp) * std::expm1(lam_shard + d_glob + 6.0 * u_s * L_abs) + eps_exp;
      c_S += unit_roundoff(a.partial_o) + eps_div + g_R + 2.0 * u_m;
      c_O += g_R + eps_div;
      lse_merge = lam_shard - std::log1p(-std::min(0.5, eps_merge_w)) + g_R +
                  eps_log(std::log(static_cast<double>(R))) + u_s * L_abs;
      abs_merge = static_cast<double>(R) * std::exp(kUnderflowArg);
    }
    const double kappa = e_max + c_S + c_O + zeta + e_bar + g_acc;
    kappa_row[r] = kappa;
    const double second = std::exp(8.0 * std::min(kappa, kMaxKappa)) * kEvalSlack;

    double max_abs_v = 0.0;
    for (int64_t x = 0; x < n; ++x) {
      for (int64_t i = 0; i < dv; ++i)
        max_abs_v = std::max(max_abs_v, std::fabs(c.v_at(ks[x], g, i)));
    }
    // Absolute floors: accumulator underflow, P cast into subnormals, and the final (and
    // partial) stores rounding into the subnormal range of their formats.
    double abs_floor = (n_eff + 2.0) * tiny * (1.0 + max_abs_v) + n_eff * p_tiny * max_abs_v +
                       unit_roundoff(a.out) * min_normal(a.out);
    if (R > 1) {
      abs_floor += unit_roundoff(a.partial_o) * min_normal(a.partial_o) +
                   static_cast<double>(R) * u_m * min_normal(a.merge_accum);
    }
    for (int64_t i = 0; i < dv; ++i) {
      const double o = ref.o.data[r * dv + i];
      double t_key = p_sink * e_sink * std::fabs(o), s_i = 0.0;
      for (int64_t x = 0; x < n; ++x) {
        const double vi = c.v_at(ks[x], g, i);
        t_key += p[x] * e[x] * std::fabs(vi - o);
        s_i += p[x] * std::fabs(vi);
      }
      const double first = t_key + c_S * s_i + zeta * (s_i + std::fabs(o)) + c_O * std::fabs(o) +
                           abs_floor + abs_merge * (max_abs_v + std::fabs(o));
      ob[i] = first * second + kOracleRel * (std::fabs(o) + s_i);
    }

    // LSE (natural units): key-level weight errors and the accumulation of the denominator
    // enter as ln(1 + x) with |x| <= e_bar + g_acc; then the log, the final add and storage.
    const double L = L_ref;
    double lam = -std::log1p(-std::min(0.5, e_bar + g_acc)) + eps_log(L - smax) +
                 2.0 * u_s * L_abs + lse_merge + n_eff * tiny + abs_merge;
    double lse_bound = lam * second;
    if (c.lse_base == LseBase::two) lse_bound *= kLog2e;
    const double L_out = lse_from_natural(c.lse_base, L);
    lse_bound += (u_lse_out + 2.0 * u_s) * std::fabs(L_out) * second;
    b.lse.data[r] = lse_bound + kOracleRel * (std::fabs(L_out) + 1.0);
  });

  for (int64_t r = 0; r < T * Hq; ++r) {
    b.kappa = std::max(b.kappa, kappa_row[r]);
    if (kappa_row[r] > kMaxKappa) {
      return DCP_ERROR("tolerance: row (t=", r / Hq, ", h=", r % Hq,
                       ") has first-order relative error coefficient ", kappa_row[r], " > ",
                       kMaxKappa, "; the claimed arithmetic is too coarse for this case");
    }
  }
  return b;
}

}  // namespace dcp::oracle
