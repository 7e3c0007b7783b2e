#include "oracle/tolerance.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "oracle/parallel.hpp"

namespace dcp::oracle {
namespace {

// The coefficients of docs/tolerances.md, each with the section that derives it; most count the
// roundings of a step, in units of the format's unit roundoff.

// §1: one ulp of a normal value is at most 2u_s relative, so k ulp is 2k u_s.
constexpr double kUnitRoundoffsPerUlp = 2.0;
// §1: tensor-core adds may truncate (Fasi, Higham, Mikaitis, Pranesh 2021): accumulations use 2u_s.
constexpr double kTruncatingMmaFactor = 2.0;
// §3: the scale, on q, on the score or folded with log2 e: up to 3 roundings past the Dk-term dot.
constexpr int64_t kScaleRoundings = 3;
// §3: a K scale (fp8 caches' k_scale) folded into the softmax scale, or multiplied into each
// dequantized key: one rounding more.
constexpr int64_t kKScaleRoundings = 1;
// §1: tf32 keeps 10 of fp32's 23 stored significand bits: u = 2^-11, paid by both operands of a
// product.
constexpr int kTf32SignificandBits = 11;
constexpr double kTf32Operands = 2.0;
// §3: softcap divides by c and multiplies back: 2u |s_pre|.
constexpr double kSoftcapRoundings = 2.0;
// §3, ALiBi: the bias -m_h |j - i| is one product (two roundings when |j - i| > 2^24, past which
// fp32 does not hold the distance itself); the logit then takes three on |s|: the bias's add,
// and a base-2 kernel's product by log2 e after it and that constant's rounding.
constexpr double kAlibiBiasRoundings = 1.0;
constexpr double kAlibiLogitRoundings = 3.0;
constexpr double kFp32ExactIntegers = 16777216.0;  // 2^24
// §3: the exponent argument (s - m) log2 e, rounded log2 e, |m| <= M: 3u (|s_j| + M).
constexpr double kExpArgRoundings = 3.0;
// §3: the sink's exponent argument, e_sigma = ... 4u (|sigma| + M): one rounding more than a key's.
constexpr double kSinkExpArgRoundings = 4.0;
// §3: an exponential whose exact result is below exp(kUnderflowArg) may flush to zero in fp32
// (ln 2^-126 = -87.34, less one for the argument's own error): such a key's weight can be lost
// entirely, so its relative weight error is bounded by kLostWeight instead of the ulp budget.
constexpr double kUnderflowArg = -86.0;
// §3: e_j = 1 for a weight that may be lost entirely.
constexpr double kLostWeight = 1.0;
// §3: the rescales' exponent arguments m_old - m_new, each rounded (3u, as a key's): they sum to
// the rise of the running max, at most 2M, so together they cost 3u 2M.
constexpr double kRescaleArgRange = 2.0;
// §5: each of a merge tree's N terms is one add plus up to one rescale of its state: gamma_{2N}.
constexpr double kAccumRoundingsPerTerm = 2.0;
// §4 floors: accumulator underflow, counted as n_eff + 2 flushes of at most tiny each.
constexpr double kAccumExtraFlushes = 2.0;
// §5: L_abs = M + ln n_eff + 1 >= |L_r| and |L|.
constexpr double kLseAbsMargin = 1.0;
// §5: a partial LSE's add m + ln l and its base conversion: 3u_s L_abs.
constexpr double kPartialLseRoundings = 3.0;
// §5: the merge's exponent argument (L_r - M) log2 e, fused or not: each operand scaled apart,
// u_s (|L_r| + |M|) <= 2u_s mag, and the subtraction's (or the fma's) rounding and the rounded
// log2 e, 2u_s |L_r - M| <= 2u_s spread (LseRange); without a layout 2 L_abs + 4 L_abs = 6 L_abs.
constexpr double kMergeArgRoundingsMag = 2.0;
constexpr double kMergeArgRoundingsSpread = 2.0;
// §10: a rounding error uniform on [-h, h] is sub-Gaussian with variance proxy h^2 / 3 (its moment
// generating function sinh(th) / (th) is at most exp(t^2 h^2 / 6), term by term): scale h/sqrt 3.
constexpr double kUniformRoundingScale = 0.57735026918962576;
// §10: the significand bits a rounding must drop for its error to be taken as uniform on its
// interval: 2^8 or more values of the dropped bits make a fine grid; a few make a coarse discrete
// error, ties at half an ulp among them.
constexpr int kUniformDroppedBits = 8;
// §5: the merge sums whose nodes are taken one by one from the exact partials (N_m - 1 of them per
// element); a longer claimed sum (an fp32 merge of thousands of partials) takes gamma_N(u_m) Q.
constexpr int64_t kMaxExactMergeTerms = 1024;
// §5, §7: -ln(1 - x) is taken with x clamped to 1/2 to stay finite; x <= kappa, so the clamp only
// acts on rows refused for kappa > kMaxKappa.
constexpr double kMaxLogArg = 0.5;
// §6: second order: (1 + kappa)^4 <= exp(4 kappa), doubled for margin: exp(8 kappa).
constexpr double kSecondOrderRate = 8.0;
// §6: above this kappa the first-order model is not trusted and derive_bound refuses the row.
constexpr double kMaxKappa = 0.1;
// §6: the reference is dd rounded to double: at most 2^-53 relative plus dd's error (< 2^-100 of
// the scale), bounded together by 2^-52 of the scale.
constexpr double kOracleRel = 0x1p-52;
// §6: bound quantities are evaluated in double from double scores; their relative error is
// < 2^-40 for the shapes the suite handles, covered by inflating with this factor.
constexpr double kEvalRel = 0x1p-30;
constexpr double kEvalSlack = 1.0 + kEvalRel;
// §7: the final add m + ln l: 2u_s L_abs.
constexpr double kLseAddRoundings = 2.0;
// §7: the stored LSE: half an ulp of lse_out at |L| plus its error, and 2u_s |L|.
constexpr double kLseStoreRoundings = 2.0;
// §7: the oracle's term 2^-52 (|L| + 1): an absolute floor of 1 on the scale of L.
constexpr double kOracleLseFloor = 1.0;

// The claim's unit roundoffs and intrinsic budgets, relative unless said otherwise.
struct Units {
  const Arithmetic& a;
  double u_s;       // scalar operations in the accumulation format
  double u;         // accumulations (2u_s with truncating MMA)
  double ulp;       // 1 ulp
  double eps_exp;   // the exponential
  double exp_bias;  // §10: the largest mean of its error over a row's keys (exp_bias; else eps_exp)
  double eps_rescale;  // the rescales' exponential (rescale_exp_rel_err, else eps_exp)
  double eps_div;      // the division
  double tiny;         // absolute: a flush to zero in the accumulation format
  double u_p;          // P cast before P.V and tf32 operands of P.V: (1 + u_cast)(1 + u_tf32)^2 - 1
  double u_v;          // a V scale applied to the output or to each dequantized value: u_s; else 0,
                       // and a claimed kv_dequant's rounding of each value on top
  double u_kdq;        // a claimed kv_dequant's rounding of each key element; 0 without
  double dq_floor;     // its absolute floor per element (a subnormal of kv_dequant); 0 without
  double p_tiny;       // absolute: P cast into the subnormal range; 0 when not cast
  // §10: the scale of the P cast's rounding per unit of its bound u_p P^_j (cast_scale).
  double cast_sd;
  double g_tf32;   // tf32 operands of each q.k product: gamma_2(2^-11); 0 without tf32
  int64_t shards;  // N >= 1
  double u_m;      // the cross-rank sum of the outputs
  double u_d;      // the cross-rank sum of the weights (the merged LSE's, the denominator's)
  // §10: accumulations round to nearest (not truncating MMA), so their roundings are the
  // statistical tier's random ones; lambda, the tail factor of its concentration bounds.
  bool nearest = false;
  double lambda = 0.0;
  // §10: the accumulators may be taken to sum each partial's keys in position order: no top-k
  // list, or lists in ascending order (a gather kernel sums them in the list's order); a rank's
  // shard of a case is such a list.
  bool position_order = true;

  // Error of ln(x) given ln x: absolute on [0.5, 2], ulps elsewhere; with a claimed log_rel_err
  // r, r max(1, |ln x|) (a log2 result's error r max(1, |log2 x|) is at most that once
  // converted to natural units).
  double eps_log(double ln_x) const {
    if (a.log_rel_err) return *a.log_rel_err * std::max(1.0, std::fabs(ln_x));
    return a.log_abs + a.log_ulps * ulp * std::fabs(ln_x);
  }
};

// u 2^emin: the absolute error of a store into the subnormal range of t.
double subnormal_floor(DType t) { return unit_roundoff(t) * min_normal(t); }

// §1: the same with flush to zero, which may lose a whole subnormal: 2^emin.
double store_floor(const Arithmetic& a, DType t) {
  return a.ftz ? min_normal(t) : subnormal_floor(t);
}

// §6, §7: the largest error of a store rounding to nearest in t a value of magnitude at most y:
// half an ulp of y's binade, u 2^floor(log2 y), at most u y (half of it at the binade's top) and
// never below the subnormal range's u 2^emin. Past t's largest finite value, u y.
double rounding_error(DType t, double y) {
  if (!(y <= max_finite(t))) return unit_roundoff(t) * y;
  return std::ldexp(unit_roundoff(t), std::max(std::ilogb(y), std::ilogb(min_normal(t))));
}

// §10: the P cast's scale per unit of its bound: uniform (kUniformRoundingScale) where it drops at
// least kUniformDroppedBits of the accumulation format's significand and is the only rounding of
// P.V's operands; else Hoeffding's range, 1 (TF32 operands round V, an input; a cast that drops a
// few bits leaves a coarse discrete error, with ties at half an ulp).
double cast_scale(const Arithmetic& a) {
  if (!a.p_cast || a.tf32) return 1.0;
  const double ratio = unit_roundoff(*a.p_cast) / unit_roundoff(a.accum);
  return ratio >= std::ldexp(1.0, kUniformDroppedBits) ? kUniformRoundingScale : 1.0;
}

// §1: tf32's unit roundoff, 0 without tf32.
double tf32_roundoff(const Arithmetic& a) {
  return a.tf32 ? std::ldexp(1.0, -kTf32SignificandBits) : 0.0;
}

// docs/tolerances.md §1, the claim (`Arithmetic`); u_v, from the case, is set by derive_bound.
Units units_of(const Arithmetic& a) {
  const double u_s = unit_roundoff(a.accum);
  const double ulp = kUnitRoundoffsPerUlp * u_s;
  return Units{a,
               u_s,
               u_s * (a.truncating_mma ? kTruncatingMmaFactor : 1.0),
               ulp,
               a.exp_rel_err.value_or(a.exp_ulps * ulp),
               std::min(a.exp_bias.value_or(1.0), a.exp_rel_err.value_or(a.exp_ulps * ulp)),
               a.rescale_exp_rel_err.value_or(a.exp_rel_err.value_or(a.exp_ulps * ulp)),
               a.div_ulps * ulp,
               min_normal(a.accum),
               (1.0 + (a.p_cast ? unit_roundoff(*a.p_cast) : 0.0)) *
                       std::pow(1.0 + tf32_roundoff(a), kTf32Operands) -
                   1.0,
               0.0,
               0.0,
               0.0,
               a.p_cast ? store_floor(a, *a.p_cast) : 0.0,
               cast_scale(a),
               gamma_n(kTf32Operands, tf32_roundoff(a)),
               std::max<int64_t>(1, a.shards),
               unit_roundoff(a.merge_accum),
               unit_roundoff(a.merge_lse_accum.value_or(a.merge_accum)),
               !a.truncating_mma,
               0.0,
               true};
}

// §3: an exponential with argument error arg_err: (1 + eps_exp) expm1(arg_err) + eps_exp.
double exp_error(double arg_err, double eps_exp) {
  return (1.0 + eps_exp) * std::expm1(arg_err) + eps_exp;
}

// §5, §7: ln(1 - x), x clamped to kMaxLogArg.
double ln_one_minus(double x) { return std::log1p(-std::min(kMaxLogArg, x)); }

// (1 + u)^k - 1: k roundings of unit u compounded.
double compounded(double u, double k) { return std::expm1(k * std::log1p(u)); }

// The exact logits of one row's visible keys and the sink.
struct RowLogits {
  std::vector<double> s;            // logits after softcap, natural-log units
  std::vector<double> s_pre;        // scale * q.k before softcap
  std::vector<double> bias;         // ALiBi's -m_h |j - i| in s (empty without ALiBi)
  std::vector<double> bias_charge;  // its product's roundings, in units of u: r |bias|
  std::vector<double> a;            // scale * sum |q_k k_k|
  // §3: the dot's adds, in any order, form a binary tree whose Dk - 1 nodes each sum a subset of
  // the products, the l-th largest node at most Dk - l + 1 of them; a subset of l products sums
  // to at most T_l = min(l x_max, a_max) in magnitude (x_max the largest |product|, a_max the
  // larger of the positive products' sum and the negative ones'). node_sum = scale * sum_{l=2..Dk}
  // T_l bounds the sum of the nodes' magnitudes, and node_sq = scale^2 (sum_k (q_k k_k)^2 +
  // sum_{l=2..Dk} T_l^2) the sum of the squares of every rounded quantity of the dot (§10). A
  // dot claimed in lanes (dot_lanes) takes the lesser of these and its lanes' (lane_nodes).
  std::vector<double> node_sum, node_sq;
  // §10: scale * sqrt(sum_k (q_k k_k)^2), what one rounding of each of q's scaled elements moves
  // the logit by at most, in root sum of squares over the elements.
  std::vector<double> x_l2;
  bool sink = false;
  double sigma = 0.0;          // the sink logit (0 without a sink)
  double M = 0.0;              // largest |logit|, sink included
  double smax = 0.0;           // largest logit, sink included
  double n_eff = 0.0;          // keys plus the sink
  double dot_roundings = 0.0;  // Dk + kScaleRoundings, + kKScaleRoundings with a K scale (§3)
  double dot_path = 0.0;       // Dk: the dot product's own roundings on one term's path (§10)
  double q_side = 0.0;         // roundings of each product's operands: a scale on q, a K scale
  double q_l1 = 0.0;  // scale * sum |q_k|: what an absolute error on each key element moves
};

// §3: sum_{l=2..n} T_l and sum_{l=2..n} T_l^2 for T_l = min(l x_max, a_max): l x_max up to
// l = k = min(n, floor(a_max / x_max)), a_max after.
struct TreeNodes {
  double sum = 0.0, sq = 0.0;
};
TreeNodes tree_nodes(int64_t n, double x_max, double a_max) {
  if (n < 2 || x_max <= 0.0) return {};
  const double nd = static_cast<double>(n);
  const double k = std::min(nd, std::floor(a_max / x_max));
  const double rising = k >= 2.0 ? k * (k + 1.0) / 2.0 - 1.0 : 0.0;
  const double rising_sq = k >= 2.0 ? k * (k + 1.0) * (2.0 * k + 1.0) / 6.0 - 1.0 : 0.0;
  const double flat = nd - std::max(k, 1.0);
  return {x_max * rising + flat * a_max, x_max * x_max * rising_sq + flat * a_max * a_max};
}

// §3, §5: a sum of n terms added in any order, `terms` (signed) and the rest 0: its n - 1 nodes,
// of sizes at most n, n - 1 .. 2 (by induction on the root's two subtrees), a node of l terms at
// most T_l = min(the l largest |terms|, the larger of the positive terms' total and the
// negative's), the root the signed total itself. visit(T_l) for l = 2 .. n, in order. Reorders
// `terms`.
template <class Visit>
void any_order_nodes(std::span<double> terms, int64_t n, Visit&& visit) {
  double pos = 0.0, neg = 0.0;
  for (const double x : terms) (x > 0.0 ? pos : neg) += std::fabs(x);
  std::sort(terms.begin(), terms.end(),
            [](double a, double b) { return std::fabs(a) > std::fabs(b); });
  const double most = std::max(pos, neg);
  const auto given = static_cast<int64_t>(terms.size());
  double top = 0.0;
  for (int64_t l = 1; l <= n; ++l) {
    if (l <= given) top += std::fabs(terms[static_cast<size_t>(l - 1)]);
    if (l >= 2) visit(l == n ? std::fabs(pos - neg) : std::min(top, most));
  }
}

// §3, a dot q.k of n products summed in W < n lanes (Arithmetic::dot_lanes): lane t's running sum
// from its second product on is a node whose exact value is the lane's prefix sum; the W lane
// sums are then added in any order (any_order_nodes). The sum of the nodes' magnitudes and of
// their squares.
TreeNodes lane_nodes(const double* q, const double* k, int64_t n, int64_t lanes,
                     std::vector<double>& lane_sum) {
  TreeNodes out;
  lane_sum.assign(static_cast<size_t>(lanes), 0.0);
  for (int64_t t = 0; t < lanes; ++t) {
    double prefix = 0.0;
    for (int64_t i = t; i < n; i += lanes) {
      prefix += q[i] * k[i];
      if (i >= t + lanes) out.sum += std::fabs(prefix), out.sq += prefix * prefix;
    }
    lane_sum[static_cast<size_t>(t)] = prefix;
  }
  any_order_nodes(lane_sum, lanes, [&out](double T) { out.sum += T, out.sq += T * T; });
  return out;
}

// docs/tolerances.md §2, notation for one row (token t, head h).
RowLogits row_logits(const Case& c, int64_t t, int64_t h, std::span<const int64_t> keys, double tau,
                     int64_t dot_lanes) {
  const int64_t n = static_cast<int64_t>(keys.size()), dk = c.head_dim(), g = c.kv_head_of(h);
  const double* q = &c.q.data[c.q.offset({t, h, 0})];
  RowLogits in;
  in.sink = c.has_sink();
  in.sigma = in.sink ? c.sink[h] : 0.0;
  in.s.resize(n);
  in.s_pre.resize(n);
  in.a.resize(n);
  in.node_sum.resize(n);
  in.node_sq.resize(n);
  in.x_l2.resize(n);
  in.M = in.sink ? std::fabs(in.sigma) : 0.0;
  in.smax = in.sink ? in.sigma : kNegInf;
  std::vector<double> row_buf(static_cast<size_t>(dk)), lane_sum;
  const bool use_lanes = dot_lanes > 0 && dot_lanes < dk;
  const int64_t qpos = c.query_pos(t);
  for (int64_t i = 0; i < dk; ++i) in.q_l1 += tau * std::fabs(q[i]);
  for (int64_t x = 0; x < n; ++x) {
    const double* kr = c.k.row(keys[x], g, row_buf.data());
    double dot = 0.0, absdot = 0.0, sq = 0.0, x_max = 0.0;
    for (int64_t i = 0; i < dk; ++i) {
      const double xi = q[i] * kr[i];
      dot += xi;
      absdot += std::fabs(xi);
      sq += xi * xi;
      x_max = std::max(x_max, std::fabs(xi));
    }
    in.s_pre[x] = tau * dot;
    in.a[x] = tau * absdot;
    // the positive products sum to (absdot + dot) / 2, the negative to (absdot - dot) / 2
    TreeNodes nodes = tree_nodes(dk, x_max, (absdot + std::fabs(dot)) / 2.0);
    if (use_lanes) {  // any order's bounds hold too: the lesser of each
      const TreeNodes in_lanes = lane_nodes(q, kr, dk, dot_lanes, lane_sum);
      nodes = {std::min(nodes.sum, in_lanes.sum), std::min(nodes.sq, in_lanes.sq)};
    }
    in.node_sum[x] = tau * nodes.sum;
    in.node_sq[x] = tau * tau * (sq + nodes.sq);
    in.x_l2[x] = tau * std::sqrt(sq);
    in.s[x] = variant_logit(c, in.s_pre[x], h, qpos, keys[x]);
    if (!c.alibi_slopes.empty()) {  // as variant_logit adds it
      const double distance = static_cast<double>(keys[x] < qpos ? qpos - keys[x] : keys[x] - qpos);
      in.bias.push_back(-c.alibi_slopes[h] * distance);
      const double roundings = kAlibiBiasRoundings + (distance > kFp32ExactIntegers ? 1.0 : 0.0);
      in.bias_charge.push_back(roundings * std::fabs(in.bias.back()));
    }
    in.M = std::max(in.M, std::fabs(in.s[x]));
    in.smax = std::max(in.smax, in.s[x]);
  }
  in.n_eff = static_cast<double>(n + (in.sink ? 1 : 0));
  in.dot_roundings =
      static_cast<double>(dk + kScaleRoundings + (c.k_scale.empty() ? 0 : kKScaleRoundings));
  in.dot_path = static_cast<double>(dk);
  in.q_side = static_cast<double>(1 + (c.k_scale.empty() ? 0 : kKScaleRoundings));
  return in;
}

// §10: how the running max of the row's accumulators moves (running_max), in natural units.
struct RunningMax {
  double rise;    // after each accumulator's first tile
  double spread;  // the row's largest logit less the least of the accumulators' final maxima
};

// The weight of each key and of the sink, exact, and the bound on its relative error.
struct KeyErrors {
  std::vector<double> p;  // exact P_j
  std::vector<double> e;  // e_j, bound on the relative error of key j's weight
  double p_sink = 0.0;    // exact P_sigma (0 without a sink)
  double e_sink = 0.0;    // e_sigma
  double e_bar = 0.0;     // sum_j P_j e_j + P_sigma e_sigma
  double e_max = 0.0;     // largest e_j (and e_sigma) of the weights that cannot underflow
  // exp(L - smax) >= 1: the exact denominator in units of the largest logit's term (§4, the P
  // cast's floor).
  double l_ratio = 1.0;
  // §10, the statistical tier: e_j split into a systematic part and random ones. In O: m_j, and
  // the scale b_j of the random part, the exponential's error at the key (its mean, common to
  // every key, cancels in O) and, in a round-to-nearest kernel, the dot product's roundings. In
  // the LSE, where the exponential's mean does not cancel: m_lse_j and the dot's scale b_lse_j,
  // or, where the claim bounds that mean (exp_bias), m_bias_j with the mean charged whole and
  // the exponential's deviation from it random, of scale b_j. Keys of equal logits, or of equal
  // scaled products, share their roundings: group[x] numbers the key's group (key_errors).
  std::vector<double> m, b, m_lse, b_lse, m_bias;
  // §10, round to nearest: u x_l2_j, the scale u of key j's share of the q-side roundings (one
  // per element of q, common to every key: random over q's elements, not over the keys), and
  // their scale in the LSE, q_lse = sum_j P_j u x_l2_j.
  std::vector<double> q_rand;
  double q_lse = 0.0;
  // §10, round to nearest: the part of m_j from the two rounded constants every logit shares, the
  // scale's on s_pre and log2 e's on the exponent argument: u |s_pre,j| + u (|s_j| + M); O takes
  // it per key or, under the order assumption, as one relative error of every argument (o_bounds).
  std::vector<double> m_const;
  std::span<const double> logit;  // the exact logits s_j (RowLogits::s, which outlives this)
  double M = 0.0;                 // their largest magnitude, the sink's included (RowLogits::M)
  std::vector<int64_t> group;
  int64_t groups = 0;
  double eps_exp = 0.0;  // the exponential's error bound: the sink's share of the keys' mean
  double rho = 0.0;      // the rescales' relative error (§3), in O bounded apart (§10)
  // §10: the rescale chain's total, (1 + rho)(R eps_r + (1 + eps_r) expm1(3u rise)), eps_r the
  // rescale exponential's error (rescale_exp_rel_err, else the kernel's), rise what the running
  // max's computed changes telescope to (at most 2M): the sum of |alpha_t - 1| over the
  // rescales, times the largest product after one.
  double rescale_walk = 0.0;
  // §10: how far any key's running max (the computed one) lies below the row's largest logit,
  // summed by parts: the rise after the first tile plus the accumulators' spread, at most 4M.
  double max_range = 0.0;
};

// §3, §5: R rescales by exponentials of the change of a running max, each with the exponential's
// error and an argument rounded to u; the arguments telescope to at most `range` (2M for a row's
// logits within [-M, M]): (1 + eps_exp)^R exp(3u range) - 1.
double rescale_chain(double R, double eps_exp, double u, double range) {
  return std::expm1(R * std::log1p(eps_exp) + kExpArgRoundings * u * range);
}

// §3, the rescales: the relative error rho a key's weight picks up from the online softmax's
// rescale factors after it, R = ceil(S / tile) rescales of a context of S keys (one more for a
// sink), each with the rescale exponential's error (rescale_exp_rel_err, else the kernel's).
double rescale_count(const Units& un, int64_t seq, bool sink) {
  const int64_t tile = std::max<int64_t>(1, un.a.tile);
  return static_cast<double>((seq + tile - 1) / tile + (sink ? 1 : 0));
}
double rescale_error(const Units& un, int64_t seq, bool sink, double M) {
  return rescale_chain(rescale_count(un, seq, sink), un.eps_rescale, un.u, kRescaleArgRange * M);
}

// §3, the dot product's error: the lesser of gamma_{Dk+3}(u) a_j (every rounding charged the
// whole of a_j) and the tree's own: each operand's and the score's roundings (the scale, a K
// scale, TF32 operands, a dequantization) a factor 1 + theta, |theta| <= G, on each term; the
// products' roundings u (1 + G) a_j; each node's, u times its computed sum, at most T_l + G a_j
// exact and gamma_Dk(u) (1 + G) a_j of its own error: G a_j + (1 + G) E. The factors are the
// row's, the same for every key.
struct DotError {
  double whole;   // gamma_{Dk+3}(u) (+ K scale) + TF32's + a dequantization's, times a_j
  double G;       // the per-term factor of the scale's, TF32's and a dequantization's roundings
  double nodes;   // Dk - 1
  double g_path;  // gamma_Dk(u): a node's own computed error, relative to a_j
  DotError(const Units& un, const RowLogits& in)
      : whole(gamma_n(in.dot_roundings, un.u) + un.g_tf32 + un.u_kdq),
        G((1.0 + gamma_n(in.dot_roundings - in.dot_path, un.u)) * (1.0 + un.g_tf32) *
              (1.0 + un.u_kdq) -
          1.0),
        nodes(in.dot_path - 1.0),
        g_path(gamma_n(in.dot_path, un.u)) {}
  double of(const Units& un, const RowLogits& in, int64_t x) const {
    const double a = in.a[x];
    const double E =
        un.u * ((1.0 + G) * a + in.node_sum[x] + nodes * G * a + nodes * g_path * (1.0 + G) * a);
    return std::min(whole * a, G * a + (1.0 + G) * E);
  }
};

// §3, the logit: Delta_j, from the dot product (DotError), the scales, the softcap and ALiBi.
double logit_error(const Units& un, double softcap, double dot, const RowLogits& in, int64_t x) {
  double delta = dot + in.dot_roundings * un.tiny + un.dq_floor * in.q_l1;
  const double bias = in.bias.empty() ? 0.0 : in.bias[x];
  if (softcap > 0.0) {
    delta += kSoftcapRoundings * un.u * std::fabs(in.s_pre[x]) +
             (un.a.tanh_rel + un.u) * std::fabs(in.s[x] - bias);
  }
  if (!in.bias.empty())
    delta += un.u * (in.bias_charge[x] + kAlibiLogitRoundings * std::fabs(in.s[x]));
  return delta;
}

// docs/tolerances.md §3, key-level errors: the weight of each key.
// rm: the exact running max's rise after each accumulator's first tile and the spread of the
// accumulators' maxima where the order of their keys is known (running_max), else 2M each; the
// computed maxima's errors are added here, and neither is taken above 2M.
KeyErrors key_errors(const Units& un, double softcap, int64_t seq, const RowLogits& in,
                     double L_ref, const RunningMax& rm) {
  const int64_t n = static_cast<int64_t>(in.s.size());
  const double rho = rescale_error(un, seq, in.sink, in.M);
  // A weight with relative error e, then rescaled: (1 + e)(1 + rho) - 1.
  const auto rescaled = [rho](double e) { return e + rho * (1.0 + e); };
  KeyErrors k;
  k.p.resize(n);
  k.e.resize(n);
  k.m.resize(n);
  k.b.assign(n, 0.0);
  k.m_lse.resize(n);
  k.b_lse.assign(n, 0.0);
  k.m_bias.resize(n);
  k.q_rand.assign(n, 0.0);
  k.m_const.assign(n, 0.0);
  k.logit = in.s;
  k.M = in.M;
  k.eps_exp = un.eps_exp;
  k.rho = rho;
  k.l_ratio = std::max(1.0, std::exp(L_ref - in.smax));
  const double u = un.u;
  double delta_top = 0.0;  // the largest logit error: the computed maxima are within it
  // (1 + u)^k - 1 for the dot's roundings on a path, the operands' q-side ones, both, and the
  // score's two (§10): the same for every key.
  const DotError dot_error(un, in);
  const double grow_dot = compounded(u, in.dot_path), grow_q = compounded(u, in.q_side),
               grow_path = compounded(u, in.dot_path + in.q_side), grow_score = compounded(u, 2.0);
  for (int64_t x = 0; x < n; ++x) {
    k.p[x] = std::exp(in.s[x] - L_ref);
    const double dot = dot_error.of(un, in, x);
    const double delta = logit_error(un, softcap, dot, in, x);
    delta_top = std::max(delta_top, delta);
    const double arg = kExpArgRoundings * u * (std::fabs(in.s[x]) + in.M);
    if (in.s[x] - in.smax < kUnderflowArg) {
      k.e[x] = kLostWeight;
      // A lost weight takes no part in the cancellation of the exponential's mean (§10).
      k.m[x] = kLostWeight + un.eps_exp;
      k.m_lse[x] = kLostWeight;
      k.m_bias[x] = kLostWeight;
    } else {
      const double y_max = delta + arg;
      k.e[x] = rescaled(exp_error(y_max, un.eps_exp));
      k.e_max = std::max(k.e_max, k.e[x]);
      // §10: the weight's error is eps + lin + rho_j + rest: eps the exponential's at the key,
      // lin the mean-zero linear part of the round-to-nearest roundings of its logit and
      // exponent argument, rho_j its rescales (the caller bounds them), and rest the systematic
      // part y_s of the argument error y, the nonlinear e^y - 1 - y, rho_j (e^y - 1) and
      // eps (1 + rho_j) e^y - eps, each at its largest for |y| <= y_max = delta + arg.
      double y_sys = y_max, b_lin = 0.0;
      if (un.nearest) {
        // The logit: sum_i x_i prod_l (1 + delta_l) over the Dk dot roundings on term i's
        // path, times the operands' q-side roundings, times two on the score (a scale, or
        // scale * log2 e rounded and applied): the linear part sum_l delta_l C_l over the
        // products and the tree's nodes, sum_l C_l^2 <= node_sq, and the linear part of q's
        // own scale rounding, sum_i theta_i x_i: one theta_i per element of q, shared by every
        // key, so random over i (q_rand) and not over the keys; the score's product is random,
        // its constant (the scale, or scale * log2 e, rounded) is one relative error of every
        // logit, m_const; the rest is systematic, a K scale's rounding, TF32 operands and a
        // dequantization's rounding among it. The exponent argument's subtraction and product
        // are random, its rounded log2 e is one relative error of every argument, m_const.
        const double a = in.a[x], dk = in.dot_path, s_pre = std::fabs(in.s_pre[x]);
        const double dot_rest = a * (grow_dot - dk * u) + a * ((1.0 + grow_dot) * grow_q - u) +
                                (s_pre + a * grow_path) * grow_score - 2.0 * u * s_pre +
                                (un.g_tf32 + un.u_kdq) * a * (1.0 + grow_dot);
        const double arg_abs = std::fabs(in.s[x]) + in.M;
        y_sys = delta - dot + dot_rest;
        k.m_const[x] = u * s_pre + u * arg_abs;
        b_lin = u * std::sqrt(in.node_sq[x] + 2.0 * arg_abs * arg_abs + s_pre * s_pre);
        k.q_rand[x] = u * in.x_l2[x];
        k.q_lse += k.p[x] * k.q_rand[x];
      }
      const double e_y = std::expm1(y_max);
      const double g_max = rescaled(e_y);
      k.m[x] = y_sys + (e_y - y_max) + rho * e_y + un.eps_exp * g_max;
      // (not std::hypot: glibc 2.35 versions it anew, and the wheel promises glibc 2.34)
      k.b[x] = std::sqrt(un.eps_exp * un.eps_exp + b_lin * b_lin);
      k.m_lse[x] = k.m[x] + k.m_const[x] + un.eps_exp + rho;
      k.b_lse[x] = b_lin;
      k.m_bias[x] = k.m[x] + k.m_const[x] + un.exp_bias + rho;
    }
    k.e_bar += k.p[x] * k.e[x];
  }
  // Equal logits, equal roundings: keys of one logit share a group, and so do keys of one scaled
  // product (a key repeated at another position: the same dot, its roundings the same, under a
  // bias that moves its logit), joined transitively.
  std::vector<int64_t> root(static_cast<size_t>(n));
  for (int64_t x = 0; x < n; ++x) root[x] = x;
  const auto find = [&](int64_t x) {
    while (root[x] != x) x = root[x] = root[root[x]];
    return x;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  const auto join_equal = [&](const std::vector<double>& v) {  // leaves `order` sorted by v
    for (int64_t x = 0; x < n; ++x) order[x] = x;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[a] < v[b]; });
    for (int64_t y = 1; y < n; ++y)
      if (v[order[y]] == v[order[y - 1]]) root[find(order[y])] = find(order[y - 1]);
  };
  if (!in.bias.empty()) join_equal(in.s_pre);  // without a bias, equal products: equal logits
  join_equal(in.s);
  // Numbered in the order of their least logits (order is by logit now).
  k.group.assign(n, -1);
  std::vector<int64_t> number(static_cast<size_t>(n), -1);
  for (const int64_t x : order) {
    int64_t& g = number[find(x)];
    if (g < 0) g = k.groups++;
    k.group[x] = g;
  }
  if (in.sink) {
    k.p_sink = std::exp(in.sigma - L_ref);
    k.e_sink = in.sigma - in.smax < kUnderflowArg
                   ? kLostWeight
                   : rescaled(exp_error(kSinkExpArgRoundings * un.u * (std::fabs(in.sigma) + in.M),
                                        un.eps_exp));
    if (k.e_sink < kLostWeight) k.e_max = std::max(k.e_max, k.e_sink);
    k.e_bar += k.p_sink * k.e_sink;
  }
  const double full = kRescaleArgRange * in.M;
  const double range = std::min(full, rm.rise + 2.0 * delta_top);
  // A lagging shift may end anywhere from the first key's logit up: rise twice (o_bounds).
  k.max_range = 2.0 * range + std::min(full, rm.spread + 2.0 * delta_top);
  k.rescale_walk =
      (1.0 + rho) * (rescale_count(un, seq, in.sink) * un.eps_rescale +
                     (1.0 + un.eps_rescale) * std::expm1(kExpArgRoundings * un.u * range));
  return k;
}

// The relative coefficients of first_i (§6).
struct Coefficients {
  double g;    // gamma_{n_acc + R_acc}(u), n_acc = accumulated_terms, R_acc its rescales
  double c_S;  // coefficient of S_i
  double c_O;  // coefficient of |O_i|
  // §10: the statistical tier's g, of K = n_acc + R_acc roundings: a part kept whole, g_sys, and
  // the scale g_rand of the random one, each per unit of the largest partial sum.
  double g_sys, g_rand;
};

// §10: a sum's roundings when they are independent and of mean zero: the first-order part
// sum_k delta_k c_k (K = n_acc + R_acc roundings, |c_k| <= the largest partial sum) has the scale
// u sqrt(K) times that sum; the rest of gamma_K(u), (K u)^2 / (1 - K u), is kept whole. Adds that
// may truncate (u = 2u_s): each error toward zero within an ulp, so a mean of at most u_s
// relative, charged whole as a bias (K u_s), and a deviation from it of at most u_s, independent
// (scale u_s sqrt(K)); adds that round to nearest are within the same. {g_sys, g_rand}; {g, 0}
// where K u reaches 1.
std::pair<double, double> statistical_gamma(const Units& un, double terms, double g) {
  const double ku = terms * un.u;
  if (ku >= 1.0) return {g, 0.0};
  const double rest = ku * ku / (1.0 - ku);
  if (un.nearest) return {rest, un.u * std::sqrt(terms)};
  return {terms * un.u_s + rest, un.u_s * std::sqrt(terms)};
}

// §10: one event's bound, lambda times the root sum of squares of its random parts' scales plus
// the parts kept whole. A part whose statistical bound is no smaller than its sound one is kept
// whole at the sound value: it needs no concentration, and so no event.
class StatSum {
 public:
  explicit StatSum(double lambda) : lambda_(lambda) {}
  void whole(double x) { sys_ += x; }
  // A part of sound bound `sound`: `sys` kept whole and a random part of scale `sd`.
  void part(double sys, double sd, double sound) {
    if (sys + lambda_ * sd < sound) {
      sys_ += sys;
      var_ += sd * sd;
    } else {
      sys_ += sound;
    }
  }
  double bound() const { return sys_ + lambda_ * std::sqrt(var_); }

 private:
  double lambda_, sys_ = 0.0, var_ = 0.0;
};

// The ranks of a row's partition, numbered 0 .. count - 1 in rank order. A row touches at most
// min(ranks, keys) ranks, and a claimed N is not bounded by the case's size (a result file's
// dcp_size), so with more ranks than keys only the ranks that hold some are numbered (held):
// the memory stays that of the row's keys. Otherwise a rank is its own number.
struct RankSlots {
  const Ownership& own;
  std::vector<int64_t> held;  // sorted; empty: every rank numbered
  int64_t count;
  int64_t of(int64_t key) const {
    const int64_t r = own.of(key);
    return held.empty() ? r : std::lower_bound(held.begin(), held.end(), r) - held.begin();
  }
};

RankSlots rank_slots(std::span<const int64_t> keys, const Ownership& own) {
  if (own.ranks <= static_cast<int64_t>(keys.size())) return RankSlots{own, {}, own.ranks};
  std::vector<int64_t> held(keys.size());
  for (size_t x = 0; x < keys.size(); ++x) held[x] = own.of(keys[x]);
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  const auto count = static_cast<int64_t>(held.size());
  return RankSlots{own, std::move(held), count};
}

// §10: under the order assumption (each accumulator's keys in position order, each shifted by a
// running max that starts at its first tile's and never passes its largest logit: online
// softmax, lazy rescales that lag behind it included), the running max of each accumulator: its
// rise, max over the accumulators of (the largest logit, the sink's taken as one more of every
// accumulator's: a kernel may join it last) less its first key's logit (a first tile holds at
// least that key, however tiles align); and the spread of their largest logits below the row's,
// smax - min_r max_r. The accumulators: one (Ownership{1, 1}) or the layout's ranks.
RunningMax running_max(std::span<const int64_t> keys, const RowLogits& in,
                       const Ownership& accumulators) {
  const RankSlots slots = rank_slots(keys, accumulators);
  const auto count = static_cast<size_t>(slots.count);
  std::vector<double> first(count, kNegInf), top(count, in.sink ? in.sigma : kNegInf);
  std::vector<int64_t> seen(count, 0);
  for (size_t x = 0; x < keys.size(); ++x) {
    const auto r = static_cast<size_t>(slots.of(keys[x]));
    if (seen[r]++ == 0) first[r] = in.s[x];
    top[r] = std::max(top[r], in.s[x]);
  }
  RunningMax out{0.0, 0.0};
  for (size_t r = 0; r < count; ++r) {
    if (seen[r] == 0) continue;
    out.rise = std::max(out.rise, top[r] - first[r]);
    out.spread = std::max(out.spread, in.smax - top[r]);
  }
  return out;
}

// §5, §10: the accumulators of a row's partial sums: one with N = 1, else the layout's ranks
// where the claim names them (nullopt: not known).
std::optional<Ownership> accumulators_of(const Units& un) {
  if (un.shards <= 1) return Ownership{1, 1, {}};
  return un.a.layout;
}

// §10: the running max's rise and spread under the order assumption (running_max, over the
// accumulators' keys in position order), else 2M each.
RunningMax running_max_of(const Units& un, std::span<const int64_t> keys, const RowLogits& in,
                          const std::optional<Ownership>& accumulators) {
  if (accumulators && un.position_order) return running_max(keys, in, *accumulators);
  return RunningMax{kRescaleArgRange * in.M, kRescaleArgRange * in.M};
}

// §4: the terms one accumulator sums. Every key of the row and the sink (n_eff), unless the
// claim names each key's partial: then each partial's numerator and denominator sum only its own
// keys (the merge of §5 joins them), and the busiest partial's keys plus the sink (which joins
// one partial) bound every accumulator's length.
double accumulated_terms(const Units& un, std::span<const int64_t> keys, const RowLogits& in) {
  if (!un.a.layout || un.shards <= 1) return in.n_eff;
  const RankSlots slots = rank_slots(keys, *un.a.layout);
  std::vector<int64_t> count(static_cast<size_t>(slots.count), 0);
  for (const int64_t p : keys) ++count[static_cast<size_t>(slots.of(p))];
  const int64_t busiest = count.empty() ? 0 : *std::max_element(count.begin(), count.end());
  return static_cast<double>(busiest + (in.sink ? 1 : 0));
}

// docs/tolerances.md §4, accumulation: the P.V sums and the softmax denominator, with up to one
// rescale per key (online softmax with any tile size), in any order, a V scale, and the final
// division. With N > 1 partials the division is the partials' (§5). The P cast and the store
// are bounded apart, exactly (§4, §6).
Coefficients accumulation(const Units& un, double n_acc) {
  // A term passes through at most n_acc adds (in any order) and the rescales of the tiles after
  // it: with tiles of at least `tile` keys, starting anywhere, min(n_acc, ceil(n_acc / tile) + 1)
  // of them; any tiling (tile 1), one per term: gamma_{2 n_acc}(u).
  const double tile = static_cast<double>(std::max<int64_t>(1, un.a.tile));
  const double rescales = std::min(n_acc, std::ceil(n_acc / tile) + 1.0);
  const double g = gamma_n(n_acc + rescales, un.u);
  const double c_O = un.shards > 1 ? g : g + un.eps_div + un.u_v;
  // §10: the statistical tier counts the same roundings, each random.
  const auto [g_sys, g_rand] = statistical_gamma(un, n_acc + rescales, g);
  return Coefficients{g, g + un.u_v, c_O, g_sys, g_rand};
}

// §4, the absolute floors: accumulator underflow (the denominator's 1 and the numerator's
// max|v|) and the final store into the subnormal range of `out` (the P cast's floor is the cast
// term's, per key). With flush to zero each P.V operand may also lose a subnormal of accum:
// n_eff tiny max|v| more.
double absolute_floor(const Units& un, double n_eff, double max_abs_v) {
  return (n_eff + kAccumExtraFlushes) * un.tiny * (1.0 + max_abs_v) +
         (un.a.ftz ? n_eff * un.tiny * max_abs_v : 0.0) + store_floor(un.a, un.a.out) + un.dq_floor;
}

// §5, one merge of all N: what a partial's weight error C is made of, to take it per partial from
// the exact ones (partial_weight_error): the global lambda and argument error (each partial's at
// most these), the merge's exponential, the tree's rescales, L_mag and the exact merged LSE.
struct PerPartial {
  double lam, arg, eps_m, chain, mag, L;
};

// docs/tolerances.md §5, the merge of N > 1 partials, bounded without a first-order
// approximation: each a relative error that enters the merged output as a factor (1 + x), |x| <=
// the value, for ag_rs and a2a alike (the larger of the two where they differ).
struct Merge {
  double value;      // B_v: a partial's value, its division and its store
  double weight;     // C: a partial's weight, common to the numerator and the denominator
  double num;        // N_b: the numerator's own: products, their sum (and ag_rs's own exp)
  double num_terms;  // N_b less its sum's gamma_N(u_m): the products' own and the exponentials'
  double sum_u;      // the unit roundoff of that sum of N_m = sum_terms terms; 0: no such sum
  int64_t sum_terms;
  double den;         // D_b: the denominator's own: its sum (and the exponentials it sums)
  double whole;       // F: the whole output: a2a's final division, ag_rs's merged-LSE log
  double lse;         // the merged LSE's error beyond the single device's, natural units
  double abs_weight;  // N e^-86: partials whose weight underflows, times (max|v| + |O_i|)
  double abs_floor;   // partial stores and the merge sum in their subnormal ranges
  // The scaled form (Arithmetic::merge_scaled): the products' own error without their cast's
  // (num_terms with its 1 + u_m divided out); nullopt: any form.
  std::optional<double> scaled_uncast;
  DType sum_format;                       // merge_accum
  std::optional<PerPartial> per_partial;  // nullopt: a pairwise tree
};

// §5: the terms of the cross-rank sum in merge_accum: two in each merge of a pairwise tree.
int64_t merge_sum_terms(const Arithmetic& a) {
  if (a.merge_depth > 0) return std::min<int64_t>(2, a.shards);
  return a.merge_terms > 0 ? std::min(a.merge_terms, a.shards) : a.shards;
}

// §5: the merges a partial passes through in a pairwise tree: the claimed depth, at most N - 1
// (a chain); 0 for one merge of all N.
int64_t pairwise_depth(const Arithmetic& a) {
  return a.merge_depth > 0 ? std::min(a.merge_depth, std::max<int64_t>(1, a.shards - 1)) : 0;
}

// Why a merge cannot be bounded, naming the claim's fields that set it: its N terms (a result's
// dcp_size times splits, and the sink's own part) summed in merge_accum make gamma_N(u_m), the
// first-order factor of that sum's error, reach kMaxLogArg, beyond which the bound's logarithm
// has no finite limit.
std::string merge_unbounded(const Arithmetic& a, double u_m) {
  if (const int64_t D = pairwise_depth(a); D > 0) {
    std::ostringstream os;
    os << "the pairwise merges, " << D << " deep (merge_depth), with states stored in partial_o "
       << dtype_name(a.partial_o) << " and weights summed in merge_lse_accum "
       << dtype_name(a.merge_lse_accum.value_or(a.merge_accum))
       << ", compound past a first-order bound (a factor of them reaches 1/2): a shallower tree "
          "or wider states";
    return os.str();
  }
  const int64_t terms = merge_sum_terms(a);
  const double g = gamma_n(static_cast<double>(terms), u_m);
  std::ostringstream os;
  os << "the merge of " << terms << " partials (the claim's dcp_size x splits, with the sink's "
     << "own) summed in merge_accum " << dtype_name(a.merge_accum) << " cannot be bounded: its "
     << "error factor gamma_N(u_m) = N u_m / (1 - N u_m) is " << g << ", not below " << kMaxLogArg
     << " (a smaller dcp_size or splits, or a wider merge_accum)";
  return os.str();
}

// §5: L_abs = M + ln n_eff + 1, a bound on |L_r| and |L|.
double lse_abs_bound(double M, double n_eff) {
  return M + std::log(std::max(1.0, n_eff)) + kLseAbsMargin;
}

// §5: where the merge's roundings scale: mag >= |L_r| and |L| (every partial's, every state's of a
// merge tree, and the merged LSE), spread >= L - L_r >= M - L_r (the exponent arguments, a tree's
// telescoping rescales) for every partial whose weight can matter. Without a layout, L_abs and
// 2 L_abs. With one, from the exact partials' weights w_r = sum_{j in r} P_j = e^(L_r - L) (the
// sink's own part as one more; a sink joined to a rank only raises its weight): spread = max_r
// -ln w_r over the partials of nonzero weight (a rank without keys has LSE -inf and weight 0; one
// whose weights underflow even in double has 0 in any format),
// mag = |L| + spread, each plus kLseAbsMargin for the computed LSEs' own errors and double's;
// neither above the bounds without a layout.
struct LseRange {
  double mag, spread;
};
LseRange lse_range(const Units& un, std::span<const int64_t> keys, const KeyErrors& k, double L_ref,
                   double L_abs) {
  if (un.shards <= 1 || !un.a.layout) return {L_abs, 2.0 * L_abs};
  const RankSlots slots = rank_slots(keys, *un.a.layout);
  std::vector<double> w(static_cast<size_t>(slots.count), 0.0);
  for (size_t x = 0; x < keys.size(); ++x) w[static_cast<size_t>(slots.of(keys[x]))] += k.p[x];
  if (k.p_sink > 0.0) w.push_back(k.p_sink);
  double spread = 0.0;
  for (const double wr : w)
    if (wr > 0.0) spread = std::max(spread, -std::log(wr));
  spread += kLseAbsMargin;
  return {std::min(L_abs, std::fabs(L_ref) + spread), std::min(2.0 * L_abs, spread)};
}

// §5: a partial as any merge receives it: its LSE's own error lam (its log, the add m + ln l and a
// base conversion, its store; its keys' errors cancel in the merge, as on one device), the merge's
// exponential eps_m (merge_exp_rel_err, else the kernel's) and its argument's rounding, and the
// partial's value factor (its division, a V scale, its store in partial_o).
struct PartialEntry {
  double lam, eps_m, arg, value;
};

// §5, a pairwise tree of depth D: each merge joins two normalized states A and B with weights
// exp~(L^_X - m), sums them (u_d), divides the weighted sum of their O (two roundings u_m) and
// stores O in partial_o, its LSE m + ln(w_A + w_B) in partial_lse. A state's LSE error grows by
// lambda_lev a level: the weights' exp (eps_w), their sum, the log of a sum in [1, 2], the add and
// the store. A partial's coefficient at the root is a product over its D merges of w_X / (w_A +
// w_B), each off by at most (1 + eta_d) / (1 - eta_d), eta_d the weight error with the children's
// LSEs off by lam + (d - 1) lambda_lev: C. Its value passes D divisions and D - 1 stores on top of
// its own (the root's store is the output's): B_v. The sums: N_b (two roundings a level), D_b
// (one). The merged LSE: lam + D lambda_lev.
Merge pairwise_merge(const Units& un, const PartialEntry& p, const LseRange& range, int64_t D) {
  const double u_o = unit_roundoff(un.a.partial_o), u_l = unit_roundoff(un.a.partial_lse);
  const double lambda_lev = -ln_one_minus(exp_error(p.arg, p.eps_m)) - ln_one_minus(un.u_d) +
                            un.eps_log(std::log(2.0)) + (un.u_s + u_l) * range.mag;
  const double Dd = static_cast<double>(D);
  double weight = 1.0;
  for (int64_t d = 0; d < D; ++d) {
    const double eta = std::min(
        exp_error(p.lam + static_cast<double>(d) * lambda_lev + p.arg, p.eps_m), kMaxLogArg);
    weight *= (1.0 + eta) / (1.0 - eta);
  }
  return Merge{
      (1.0 + p.value) * (1.0 + compounded(un.eps_div, Dd)) * (1.0 + compounded(u_o, Dd - 1.0)) -
          1.0,
      weight - 1.0,
      compounded(un.u_m, 2.0 * Dd),
      compounded(un.u_m, 2.0 * Dd),
      0.0,
      0,
      compounded(un.u_d, Dd),
      0.0,
      p.lam + Dd * lambda_lev,
      static_cast<double>(un.shards) * std::exp(kUnderflowArg),
      Dd * (store_floor(un.a, un.a.partial_o) +
            2.0 * (un.a.ftz ? 1.0 : un.u_m) * min_normal(un.a.merge_accum)),
      std::nullopt,
      un.a.merge_accum,
      std::nullopt};
}

// docs/tolerances.md §5, the merge of N > 1 partials; nullopt when N = 1. L: the row's exact LSE,
// natural units (for each partial's own weight error, partial_weight_error).
std::optional<Merge> merge_terms(const Units& un, double n_eff, const LseRange& range, double L) {
  if (un.shards <= 1) return std::nullopt;
  const double N = static_cast<double>(un.shards);
  // The terms of the merge_accum sum: N, or fewer where pieces merge in fp32 first.
  const double N_m = static_cast<double>(merge_sum_terms(un.a));
  const PartialEntry p{
      un.eps_log(std::log(std::max(1.0, n_eff))) +
          (kPartialLseRoundings * un.u_s + unit_roundoff(un.a.partial_lse)) * range.mag,
      un.a.merge_exp_rel_err.value_or(un.eps_exp),
      un.u_s * (kMergeArgRoundingsMag * range.mag + kMergeArgRoundingsSpread * range.spread),
      (1.0 + un.eps_div) * (1.0 + un.u_v) * (1.0 + unit_roundoff(un.a.partial_o)) - 1.0};
  if (const int64_t D = pairwise_depth(un.a); D > 0) return pairwise_merge(un, p, range, D);
  const double lam = p.lam, eps_m = p.eps_m;
  const double g_N = gamma_n(N_m, un.u_m);
  // The weights' sum, the denominator's and the merged LSE's, in merge_lse_accum.
  const double g_N_den = gamma_n(N_m, un.u_d);
  // One merge exponential: exp(L_r - M) (a2a, both sums) or exp(L_r - L) (ag_rs, the numerator),
  // with its argument's rounding.
  const double eps_w = exp_error(p.arg, eps_m);
  // A merge may also run as a tree of unnormalized states (a2a's combine): each level rescales a
  // state by an exponential of the change of its max and adds, so a partial passes up to N - 1
  // rescales (their arguments telescope, as in §3) and 2N roundings in the accumulation format.
  const double chain =
      rescale_chain(static_cast<double>(un.shards - 1), eps_m, un.u_s, range.spread);
  const double g_tree = gamma_n(kAccumRoundingsPerTerm * N, un.u_s);
  // ag_rs computes its merged LSE over such a tree too, and there the rescales reach the
  // denominator alone (the numerator's weights exp(L_r - L) are fresh exponentials): D_b carries
  // them as well as C (properties/test_dcp_properties.cpp found the gap with the poly3
  // exponential, whose 2^0 is not 1).
  const double den = (1.0 + eps_w) * (1.0 + chain) * (1.0 + g_N_den) * (1.0 + g_tree) - 1.0;
  // The merged LSE's log (of a sum up to N (1 + D_b)) and its add.
  const double log_N =
      un.eps_log(std::log(N) - std::log1p(-std::min(den, kMaxLogArg))) + un.u_s * range.mag;
  // The merged LSE's error beyond the single device's: the partials' own (lambda), the weights'
  // sum (D_b) and its log.
  const double merged_lse = lam - std::log1p(-std::min(den, kMaxLogArg)) + log_N;
  // The scaled form: each term exp(L^_r - L^) O^_r, L^ the merge's own LSE, so the sum's units
  // are the single device's times exp(L* - L^), |L* - L^| <= the merged LSE's own error.
  const std::optional<double> scaled_uncast =
      un.a.merge_scaled ? std::optional<double>((1.0 + eps_w) * (1.0 + g_tree) - 1.0)
                        : std::nullopt;
  return Merge{p.value,
               // a2a: lambda, the shared exponential and a tree's rescales
               (1.0 + exp_error(lam, eps_w)) * (1.0 + chain) - 1.0,
               (1.0 + eps_w) * (1.0 + un.u_m) * (1.0 + g_N) * (1.0 + g_tree) - 1.0,
               (1.0 + eps_w) * (1.0 + un.u_m) * (1.0 + g_tree) - 1.0, un.u_m,
               static_cast<int64_t>(N_m), den, std::max(un.eps_div, std::expm1(log_N)), merged_lse,
               N * std::exp(kUnderflowArg),
               store_floor(un.a, un.a.partial_o) +
                   N_m * (un.a.ftz ? 1.0 : un.u_m) * min_normal(un.a.merge_accum),
               scaled_uncast, un.a.merge_accum, PerPartial{lam, p.arg, eps_m, chain, range.mag, L}};
}

// §5: C_r, the weight error of a partial of exact weight w_r = e^(L_r - L) > 0 and n_r keys, in one
// merge of all N: C's terms at this partial's own size, each never above C's. The margin mu covers
// the computed partial LSE's own error: its keys' weights within kappa <= kMaxKappa (beyond which
// the row is refused), -ln(1 - kMaxKappa), and its roundings, lambda. Its log, eps_log(ln n_r +
// mu) (l^_r <= n_r (1 + kappa)). Each rounding of its add m_r + ln l_r, base conversion and store,
// half an ulp of the binade of the value it rounds: the add's and the conversion's operands and
// results are within |L_r| + ln n_r + mu (m_r in [L_r - ln n_r, L_r]), the store's within |L_r| +
// mu; in natural units, or log2 e times that in base 2 (an error ln 2 times as much in natural
// units). The merge's argument: u_s (|L^_r| + L_mag) for its operands and 2u_s |L^_r - M^| for the
// subtraction and the rounded log2 e, M^ the largest partial LSE (within ln N + mu of L) or the
// merged one (within mu + Merge::lse): |L^_r - M^| <= max(-ln w_r, ln N) + 2 mu + Merge::lse.
double partial_weight_error(const Units& un, const Merge& m, double w_r, int64_t n_r) {
  const PerPartial& pp = *m.per_partial;
  const double L_r = pp.L + std::log(w_r);
  if (!std::isfinite(L_r)) return m.weight;
  const double mu = -std::log1p(-kMaxKappa) + pp.lam;
  const double ln_n = std::log(std::max<double>(1.0, static_cast<double>(n_r)));
  const double stored = std::fabs(L_r) + mu, summed = stored + ln_n;
  const auto rounding = [](DType t, double y) {
    return std::max(rounding_error(t, y), kLn2 * rounding_error(t, kLog2e * y));
  };
  const double lam =
      std::min(pp.lam, un.eps_log(ln_n + mu) + kPartialLseRoundings * rounding(un.a.accum, summed) +
                           rounding(un.a.partial_lse, stored));
  const double spread =
      std::max(-std::log(w_r), std::log(static_cast<double>(un.shards))) + 2.0 * mu + m.lse;
  const double arg =
      std::min(pp.arg, un.u_s * (stored + pp.mag + kMergeArgRoundingsSpread * spread));
  const double c_r = (1.0 + exp_error(lam, exp_error(arg, pp.eps_m))) * (1.0 + pp.chain) - 1.0;
  return std::min(m.weight, c_r);
}

// §5: whether the merge's factors are small enough to bound (each below 1/2).
bool merge_boundable(const Merge& m) {
  return m.value < kMaxLogArg && m.weight < kMaxLogArg && m.num < kMaxLogArg &&
         m.den < kMaxLogArg && m.whole < kMaxLogArg;
}

// docs/tolerances.md §6, the bound on O, second order: kappa = max_j e_j + c_S + c_O +
// sum_j P_j e_j + g, of the single device (the merge is bounded exactly, §5).
double first_order_kappa(const KeyErrors& k, const Coefficients& co) {
  return k.e_max + co.c_S + co.c_O + k.e_bar + co.g;
}

// §6: the second-order factor exp(8 kappa), with slack for evaluating the bound in double.
double second_order_factor(double kappa) {
  return std::exp(kSecondOrderRate * std::min(kappa, kMaxKappa)) * kEvalSlack;
}

// §4, §5 floors: max |v| over the row's visible keys.
double max_abs_value(const Case& c, std::span<const int64_t> keys, int64_t g) {
  double max_abs_v = 0.0;
  std::vector<double> row_buf(static_cast<size_t>(std::max(c.head_dim(), c.v_dim)));
  for (int64_t j : keys) {
    const double* v = c.v_row(j, g, row_buf.data());
    for (int64_t i = 0; i < c.v_dim; ++i) max_abs_v = std::max(max_abs_v, std::fabs(v[i]));
  }
  return max_abs_v;
}

// §5, the exact partials: A_i = sum_r |sum_{j in r} P_j v_ji| = sum_r w_r |O_r,i| for the
// layout's partition of the row's keys, each i of [Dv] (the sink adds no value). §10, the walk:
// W_i = max_r (max_b P_r,b - min_a P_r,a) over the prefix sums P_r,b of P_j v_ji in the position
// order of rank r's keys (P_r,0 = 0), the largest |sum| of a run of keys contiguous in that order.
// Evaluated in double: each signed sum is off by at most kEvalRel S_i, which the caller adds.
// And the rescales' walk: B_i = sum_r max_b |sum_{j in r, j before b} P_j (v_ji - O_i)|, the
// largest prefix of the keys' first-order coefficients in each rank's position order.
// And the merge's nodes (§5): T_l, l = 2 .. N_m, of the terms t_r = sum_{j in r} P_j v_ji, N_m
// the merge sum's terms (ranks holding no key add terms of 0). And |t_r| for each rank slot.
// And, where the partials merge (SumsScope::slot_error), their spread about the output times
// their weights' errors (§5): sum_r C_r |t_r - w_r O_i| = sum_r C_r w_r |O_r,i - O_i|, w_r =
// sum_{j in r} P_j, the sink's weight apart.
struct PartialSums {
  std::vector<double> a, walk, rescale_walk, dev;  // [Dv] each (dev 0 without slot_error)
  std::vector<double> nodes;                       // [Dv, N_m - 1]: T_2 .. T_N_m of each element
  std::vector<double> terms;                       // [Dv, rank slots]: |t_r| of each element
};

// §5: the weight error C_r of a partial of exact weight w_r and n_r keys; empty: no merge.
using SlotError = std::function<double(double w_r, int64_t n_r)>;

// Accumulates PartialSums one key at a time, the keys in position order: per rank slot and
// element, the running sum of P_j v_ji and its extremes, and the running sum of P_j (v_ji - O_i)
// and its largest magnitude.
class PartialWalks {
 public:
  PartialWalks(const RankSlots& slots, int64_t dv)
      : slots_(slots),
        dv_(dv),
        cells_(static_cast<size_t>(slots.count * dv)),
        p_sum_(static_cast<size_t>(slots.count), 0.0),
        count_(static_cast<size_t>(slots.count), 0),
        num_(cells_, 0.0),
        hi_(cells_, 0.0),
        lo_(cells_, 0.0),
        coef_max_(cells_, 0.0) {}

  void add(int64_t key, double p, const double* v, const double* o) {
    const int64_t slot = slots_.of(key);
    const auto at = static_cast<size_t>(slot * dv_);
    // sum_j P_j (v_ji - O_i) = sum_j P_j v_ji - O_i sum_j P_j
    const double p_sum = p_sum_[static_cast<size_t>(slot)] += p;
    ++count_[static_cast<size_t>(slot)];
    double* num = &num_[at];
    double* hi = &hi_[at];
    double* lo = &lo_[at];
    double* coef_max = &coef_max_[at];
    for (int64_t i = 0; i < dv_; ++i) {
      const double sum = num[i] += p * v[i];
      hi[i] = std::max(hi[i], sum);
      lo[i] = std::min(lo[i], sum);
      coef_max[i] = std::max(coef_max[i], std::fabs(sum - o[i] * p_sum));
    }
  }

  // o [Dv]: the exact output the walks' coefficients were taken about. slot_error(w_r, n_r): the
  // weight error of the partial of weight w_r and n_r keys; empty: no merge, no spread.
  PartialSums finish(int64_t merge_terms, const double* o, const SlotError& slot_error) const {
    const auto n = static_cast<size_t>(dv_);
    PartialSums out{std::vector<double>(n, 0.0),
                    std::vector<double>(n, 0.0),
                    std::vector<double>(n, 0.0),
                    std::vector<double>(n, 0.0),
                    {},
                    {}};
    for (int64_t r = 0; r < slots_.count; ++r) {
      const auto slot = static_cast<size_t>(r);
      const double c_r =
          slot_error && count_[slot] > 0 ? slot_error(p_sum_[slot], count_[slot]) : 0.0;
      for (int64_t i = 0; i < dv_; ++i) {
        out.a[i] += std::fabs(num_[r * dv_ + i]);
        out.dev[i] += c_r * std::fabs(num_[r * dv_ + i] - o[i] * p_sum_[slot]);
        out.walk[i] = std::max(out.walk[i], hi_[r * dv_ + i] - lo_[r * dv_ + i]);
        out.rescale_walk[i] += coef_max_[r * dv_ + i];
      }
    }
    if (merge_terms > 1) {
      const auto nodes = static_cast<size_t>(merge_terms - 1);
      out.nodes.assign(n * nodes, 0.0);
      std::vector<double> t(static_cast<size_t>(slots_.count));
      out.terms.assign(num_.size(), 0.0);
      for (int64_t i = 0; i < dv_; ++i) {
        for (int64_t r = 0; r < slots_.count; ++r) {
          t[static_cast<size_t>(r)] = num_[r * dv_ + i];
          out.terms[static_cast<size_t>(i * slots_.count + r)] = std::fabs(num_[r * dv_ + i]);
        }
        // Past the ranks that hold keys the terms are 0.
        double* T = &out.nodes[static_cast<size_t>(i) * nodes];
        any_order_nodes(t, merge_terms, [&T](double x) { *T++ = x; });
      }
    }
    return out;
  }

 private:
  const RankSlots& slots_;
  int64_t dv_;
  size_t cells_;
  std::vector<double> p_sum_;
  std::vector<int64_t> count_;
  std::vector<double> num_, hi_, lo_, coef_max_;
};

// One element's sums over the row's keys (§2, §3): T_key,i, S_i and S'_i = sum_j P_j (1 + e_j)
// |v_ji| (how large the computed summands may be).
// §10 adds the statistical tier's: the systematic part of T_key, and the root sums of squares,
// over groups of equal logits (KeyErrors::group), of the random parts of T_key and of the P cast's
// roundings. The P cast's (§4): C_i = sum_j (u_p P^_j + min(P^_j, p_floor)) |v_ji|, P^_j = P_j (1 +
// e_j) / den bounding the computed normalized weights, and its root sum of squares over groups.
struct ElementSums {
  double t_key = 0.0, s = 0.0, s_weighted = 0.0;
  double t_sys = 0.0, t_rand = 0.0;
  double q_rand = 0.0;  // sum_j P_j |v_ji - O_i| u x_l2_j: the q-side roundings' scale (§10)
  // §10: sum_j P_j (v_ji - O_i) s_j, signed, where the rounded constants are taken as one relative
  // error of every argument (SumsScope::constants_apart); else t_sys holds them per key.
  double cov = 0.0;
  double t_pv = 0.0;   // sum_j P_j |v_ji - O_i| over the keys whose weight cannot underflow
  double s_pos = 0.0;  // sum_j P_j max(v_ji, 0): S_i less it is the negative terms' (§10)
  // The P cast's C_i; the root sum of squares over groups of its relative part, u_p P^_j |v_ji|;
  // and the sum of its subnormal floors, min(P^_j, p_floor) |v_ji|, which §10 keeps whole.
  double cast = 0.0, cast_rms = 0.0, cast_floor = 0.0;
};

// The P cast's per-key error (§4), in units of the normalized weights: relative u_p, and the
// subnormal floor p_floor (never more than the weight itself); den: the computed denominator's
// least share of the exact one.
struct CastError {
  double u_p, p_floor, den;
  double relative(double p_weighted) const { return u_p * p_weighted / den; }
  double floor(double p_weighted) const { return std::min(p_weighted / den, p_floor); }
};

// Every element's sums of a row (dv of them): one pass over the row's keys, each key's V row read
// once for all its components; a group of keys (KeyErrors::group) is visited together, so that its
// random parts are summed, squared and added before the next.
// With a layout, the same pass writes the row's PartialSums to *parts (a second pass over the
// keys in position order where some logits are equal: their groups are visited apart). Without
// `walk` (§10: no partial sums in position order) it sums t_pv and s_pos instead.
struct SumsScope {
  std::optional<Ownership> layout;  // the accumulators' partition, where known
  bool walk = false;                // §10: each accumulator sums its keys in position order
  int64_t merge_terms = 0;          // §5: the merge sum's terms, for its nodes (0: none)
  bool constants_apart = false;     // §10: the rounded constants by covariance (cov), not per key
  SlotError slot_error;             // §5: each partial's weight error, where known
};
std::vector<ElementSums> element_sums(const Case& c, std::span<const int64_t> keys, int64_t g,
                                      const double* o, const KeyErrors& k, const CastError& cast,
                                      const SumsScope& scope, PartialSums* parts) {
  const std::optional<Ownership>& layout = scope.layout;
  const bool walk = scope.walk, apart = scope.constants_apart;
  const bool cast_on = cast.u_p > 0.0 || cast.p_floor > 0.0;
  const int64_t dv = c.v_dim;
  const size_t n = keys.size(), G = static_cast<size_t>(k.groups);
  std::vector<ElementSums> e(static_cast<size_t>(dv));
  // The sink's weight error, systematic; the keys' common exponential mean cancels in O but for
  // the sink's share, P_sigma |O_i| of it (§10).
  for (int64_t i = 0; i < dv; ++i) {
    e[i].t_key = k.p_sink * k.e_sink * std::fabs(o[i]);
    e[i].t_sys = k.p_sink * (k.e_sink + k.eps_exp) * std::fabs(o[i]);
  }
  // The keys in group order (a counting sort; within a group, in key order).
  std::vector<size_t> start(G + 1, 0), order(n);
  for (size_t x = 0; x < n; ++x) ++start[static_cast<size_t>(k.group[x]) + 1];
  for (size_t q = 0; q < G; ++q) start[q + 1] += start[q];
  {
    std::vector<size_t> next(start.begin(), start.end() - 1);
    for (size_t x = 0; x < n; ++x) order[next[static_cast<size_t>(k.group[x])]++] = x;
  }
  std::vector<double> t_key(dv, 0.0), t_sys(dv, 0.0), s(dv, 0.0), sw(dv, 0.0), cst(dv, 0.0),
      gb(dv, 0.0), gc(dv, 0.0), rand2(dv, 0.0), cast2(dv, 0.0), t_pv(dv, 0.0), s_pos(dv, 0.0),
      q_rand(dv, 0.0), cfl(dv, 0.0), cov(dv, 0.0);
  std::vector<double> row_buf(static_cast<size_t>(std::max(c.head_dim(), dv)));
  const std::optional<RankSlots> slots =
      layout ? std::optional<RankSlots>(rank_slots(keys, *layout)) : std::nullopt;
  std::optional<PartialWalks> walks;
  if (slots) walks.emplace(*slots, dv);
  // Every key alone in its group: the first loop below visits them all in position order.
  const bool fused = walks && G == n;
  // Key x's terms; into the group sums gb, gc, or (a key alone in its group) straight into the
  // sums of squares.
  const auto add_key = [&](size_t x, bool alone) {
    const double* v = c.v_row(keys[x], g, row_buf.data());
    if (fused) walks->add(keys[x], k.p[x], v, o);
    const double p = k.p[x], pe = p * (1.0 + k.e[x]), ek = k.e[x], bk = k.b[x], qk = k.q_rand[x];
    const double mk = k.m[x] + (apart ? 0.0 : k.m_const[x]);
    const double kept = ek < kLostWeight ? 1.0 : 0.0;
    if (!walk) {  // the sums the statistical bound takes in any order (o_bounds)
      for (int64_t i = 0; i < dv; ++i) {
        t_pv[i] += p * std::fabs(v[i] - o[i]) * kept;
        s_pos[i] += p * std::max(v[i], 0.0);
      }
    }
    for (int64_t i = 0; i < dv; ++i) {
      const double av = std::fabs(v[i]);
      const double pv = p * std::fabs(v[i] - o[i]);
      t_key[i] += pv * ek;
      t_sys[i] += pv * mk;
      q_rand[i] += pv * qk;
      s[i] += p * av;
      sw[i] += pe * av;
      if (alone) {
        rand2[i] += (pv * bk) * (pv * bk);
      } else {
        gb[i] += pv * bk;
      }
    }
    if (apart) {
      const double ps = p * k.logit[x];
      for (int64_t i = 0; i < dv; ++i) cov[i] += ps * (v[i] - o[i]);
    }
    if (cast_on) {
      const double cw = cast.relative(pe), cf = cast.floor(pe);
      for (int64_t i = 0; i < dv; ++i) {
        const double av = std::fabs(v[i]);
        cst[i] += (cw + cf) * av;
        cfl[i] += cf * av;
        if (alone) {
          cast2[i] += (cw * av) * (cw * av);
        } else {
          gc[i] += cw * av;
        }
      }
    }
  };
  // Keys alone in their group (distinct logits: most of them) in key order, reading V in order;
  // then each larger group in turn.
  for (size_t x = 0; x < n; ++x) {
    const auto q = static_cast<size_t>(k.group[x]);
    if (start[q + 1] - start[q] == 1) add_key(x, true);
  }
  for (size_t q = 0; q < G; ++q) {
    if (start[q + 1] - start[q] == 1) continue;
    std::fill(gb.begin(), gb.end(), 0.0);
    std::fill(gc.begin(), gc.end(), 0.0);
    for (size_t y = start[q]; y < start[q + 1]; ++y) add_key(order[y], false);
    for (int64_t i = 0; i < dv; ++i) {
      rand2[i] += gb[i] * gb[i];
      cast2[i] += gc[i] * gc[i];
    }
  }
  for (int64_t i = 0; i < dv; ++i) {
    e[i].t_key += t_key[i];
    e[i].t_sys += t_sys[i];
    e[i].s = s[i];
    e[i].s_weighted = sw[i];
    e[i].cast = cst[i];
    e[i].t_rand = std::sqrt(rand2[i]);
    e[i].q_rand = q_rand[i];
    e[i].cov = cov[i];
    e[i].t_pv = t_pv[i];
    e[i].s_pos = s_pos[i];
    e[i].cast_rms = std::sqrt(cast2[i]);
    e[i].cast_floor = cfl[i];
  }
  if (walks) {
    if (!fused) {
      for (size_t x = 0; x < n; ++x)
        walks->add(keys[x], k.p[x], c.v_row(keys[x], g, row_buf.data()), o);
    }
    *parts = walks->finish(scope.merge_terms, o, scope.slot_error);
  }
  return e;
}

// Each name of `names` with its value, in order.
std::vector<BoundTerm> named_terms(const std::array<const char*, 8>& names,
                                   const std::array<double, 8>& values) {
  std::vector<BoundTerm> out;
  for (size_t x = 0; x < names.size(); ++x) out.push_back({names[x], values[x]});
  return out;
}

// Where bound_row writes the terms of one element's bounds (bound_terms): O's of element
// `element` of the row into *o, the LSE's into *lse; null: none.
struct TermsOut {
  std::vector<BoundTerm>* o = nullptr;
  int64_t element = -1;
  std::vector<BoundTerm>* lse = nullptr;
};

// docs/tolerances.md §5, the merged output: the single device's error B1 (its first-order bound
// with its own second-order factor), then the merge, exactly: with Q = F1 S'_i bounding
// sum_r w_r |O_r,i| of the computed partials and R = (1 + C)/(1 - C),
//   E_X   = B_v R Q + (min(C (Q + |O_i|), W) + C B1)/(1 - C)  (partial values, the weights' error)
//   E_div = (E_n + D_b (|O_i| + B1 + E_X))/(1 - D_b)  (the numerator's and denominator's own)
//   |O^ - O| <= (1 + F)(B1 + E_X + E_div + A) + F |O_i|,
// E_n = N_b (1 + B_v) R Q the numerator's own error, A the merge's absolute terms times
// (1 + N_b) R / (1 - D_b), the sums they pass through. The weights' errors c_r, |c_r| <= C_r <= C,
// enter as sum_r w*_r c_r (O~_r - X), their common part cancelling: at most sum_r C_r w*_r
// |O^v_r,i - O_i| + C (B1 + B_v Q + E_X), the computed partials' spread about the output. In any
// partition the first is at most C (Q + |O_i|); where the exact partials are known, at most
// W = sum_r C_r |t_r - w_r O_i| + C V (`spread`; else infinity), V of partial_spread.
// Where the exact partials are known (sums: their terms t_r = w_r O_r,i), E_n is also at most
// the terms' own factors N_p (1 + B_v) R Q plus the sum's roundings over its nodes: any order of
// N_m terms makes N_m - 1 nodes, the l-th largest a sum of at most N_m - l + 1 terms, at most
// T_l = min(the l largest |t_r|, max(sum of the positive t_r, of the negative)) for the exact
// terms; the computed terms differ from them by at most Delta = (1 + N_p)(1 + B_v) R Q - A in all,
// and none exceeds cap = (1 + N_p)(1 + B_v) R Q in all; a node's computed value is its terms'
// computed sum, at most min(T_l + Delta, cap), plus the roundings of the nodes below it, at most
// gamma_{N_m}(u_m) cap in all; its rounding is at most u_m of it (not half an ulp of its binade:
// the kernel's sum is in its own units, e^(L - M) or 1 + the merged LSE's error times these, and a
// binade does not survive that scale). In the scaled form (merge_scaled) the sum's units are the
// single device's times exp(L* - L^), L^ the merged LSE as every rank computes it from the same
// gathered LSEs, |L* - L^| <= rho = Merge::lse (its weights' sum and log): each term's cast and
// each node's rounding cost half an ulp of the binade of its value at most, u_m 2^floor(log2 y)
// for y >= e^rho times its bound in output units (rounding_error), times e^rho back in output
// units; the terms' own errors without the cast stay relative. A rank without a slot (fewer keys
// than ranks) adds exactly 0 (weight 0, value 0).
struct ExactTerms {
  double a;                       // A_i = sum_r |t_r|
  std::span<const double> nodes;  // T_2 .. T_N_m
  std::span<const double> terms;  // |t_r| of each rank slot
  double slack;                   // what double's evaluation may add to each
};
// E_n, the numerator's own error: the same for both tiers (it does not depend on B1).
double numerator_error(double q, const Merge& m, const std::optional<ExactTerms>& terms) {
  const double R = (1.0 + m.weight) / (1.0 - m.weight);
  const double vr = (1.0 + m.value) * R;
  double e_n = m.num * vr * q;
  if (!terms || m.sum_terms <= 1) return e_n;
  const double cap = (1.0 + m.num_terms) * vr * q;
  const double delta = std::max(0.0, cap - terms->a);
  // What the roundings below a node may add to it.
  const double below = gamma_n(static_cast<double>(m.sum_terms), m.sum_u) * cap;
  const double widen = std::exp(m.lse) * (1.0 + kEvalRel);
  const auto binade = [&](double y) { return rounding_error(m.sum_format, y * widen) * widen; };
  // The scaled form's charges (the terms' casts, then the nodes'), beside the nodes' u_m.
  double casts = 0.0;
  if (m.scaled_uncast) {
    casts = *m.scaled_uncast * vr * q;
    for (const double t : terms->terms) casts += binade(std::min(t + terms->slack + delta, cap));
  }
  double nodes = 0.0;
  for (const double T : terms->nodes) {
    const double node = std::min(T + terms->slack + delta, cap) + below;
    nodes += node;
    if (m.scaled_uncast) casts += binade(node);
  }
  e_n = std::min(e_n, m.num_terms * vr * q + m.sum_u * nodes);
  return m.scaled_uncast ? std::min(e_n, casts) : e_n;
}

// §5: the computed partials' spread about the one-device merge O*, from the exact partials:
// w*_r |O^v_r,i - O*_i| <= |w*_r O^v_r,i - t_r| + |t_r - w_r O_i| + |O_i| |w_r - w*_r| + w*_r
// |O_i - O*_i|. The second is partial r's share of Dev_i (PartialSums::dev); over the partials the
// first is at most Q - A (q_less_a: the computed numerators' and denominator's errors, as Q bounds
// them), the third E_w |O_i| (the computed denominators l^_r are within E_l = (1 + g)(1 + e_bar) -
// 1 of the exact weights in all, and so is their total of 1, so w*_r = l^_r / sum_s l^_s is within
// E_w = 2 E_l / (1 - E_l) of them), the last B1 (merged_o_bound adds it); a sink, weight p_sigma
// and no value, adds p_sigma |O_i|. V, all but Dev_i and B1: infinity where E_l reaches kMaxLogArg.
double partial_spread(double q_less_a, double o, double p_sink, double e_l) {
  if (!(e_l < kMaxLogArg)) return std::numeric_limits<double>::infinity();
  return q_less_a + (p_sink + 2.0 * e_l / (1.0 - e_l)) * std::fabs(o);
}

double merged_o_bound(double b1, double o, double q, const Merge& m, double max_abs_v, double e_n,
                      double spread) {
  const double R = (1.0 + m.weight) / (1.0 - m.weight);
  const double vr = (1.0 + m.value) * R;
  const double e_x =
      m.value * R * q +
      (std::min(m.weight * (q + std::fabs(o)), spread) + m.weight * b1) / (1.0 - m.weight);
  // One merge of all N (sum_terms > 0): the denominator's own error scales the merge of the
  // computed partials, X, |X| <= |O_i| + B1 + E_X: Ô = (X + E_n) / (1 + d), d the weights' mean
  // of the terms' errors, |d| <= D_b. A pairwise tree's inner levels divide apart: (1 + B_v) R Q.
  const double scale = m.sum_terms > 0 ? std::fabs(o) + b1 + e_x : vr * q;
  const double e_div = (e_n + m.den * scale) / (1.0 - m.den);
  // The absolute terms pass through the same sums: (1 + N_b) R / (1 - D_b).
  const double through = (1.0 + m.num) * R / (1.0 - m.den);
  const double absolute = through * (m.abs_floor + m.abs_weight * (max_abs_v + std::fabs(o)));
  return (1.0 + m.whole) * (b1 + e_x + e_div + absolute) + m.whole * std::fabs(o);
}

// docs/tolerances.md §6, the bound on O for each i of the row (ob [Dv]): the single device's
// first-order bound first_i exp(8 kappa), the P cast's (§4, exact), then with N > 1 the merge of
// §5 around them, then the output's store, exact: B plus half an ulp of |O_i| + B in out; and the
// oracle's 2^-52 (|O_i| + S_i). The statistical tier (§10) writes os [Dv]: the same with T_key, the
// accumulation and the P cast taken by one concentration bound (StatSum), never above the sound
// bound. terms.o, where set, receives what each step adds to element terms.element's sound bound.
void o_bounds(const Case& c, std::span<const int64_t> keys, int64_t g, const double* o_ref,
              const KeyErrors& k, const Coefficients& co, const std::optional<Merge>& m,
              const Units& un, double floor, double max_abs_v, double second, double* ob,
              double* os, const TermsOut& terms) {
  // The partials' sums against the exact ones (§5): accumulation, P cast (1 + g)(1 + u_p) on the
  // numerators, the denominator's own key errors and accumulation (1 - g)(1 - e_bar).
  const double num_factor = (1.0 + co.g) * (1.0 + un.u_p);
  const double den_factor = (1.0 - co.g) * (1.0 - k.e_bar);
  // §4: the P cast's part of the output, C_i through the accumulation and the division. A weight
  // cast into the subnormal range loses up to p_tiny in units of the largest logit's term, at
  // least l_ratio den / (1 + e_max) of the computed denominator (the computed max logit is at
  // most ln(1 + e_max) above the exact one).
  const CastError cast_error{un.u_p, un.p_tiny * (1.0 + k.e_max) / (k.l_ratio * den_factor),
                             den_factor};
  const double cast_factor = (1.0 + co.g) * (1.0 + un.eps_div);
  // The exact partials (§5) where the layout is known, and the walk of the statistical tier
  // (§10): over one accumulator's keys with N = 1, over each rank's where the layout names them,
  // never for top-k rows (a gather kernel sums them in the list's order, not the positions').
  const std::optional<Ownership> sums_layout = accumulators_of(un);
  PartialSums parts;
  const bool walk = sums_layout.has_value() && un.position_order;
  // §10: the rounded constants every logit shares (KeyErrors::m_const), per key; or, under the
  // order assumption in rows whose logit is the scaled dot itself (no softcap, sink or ALiBi), as
  // one relative error of at most 2u of every exponent argument s_j - m: in O, 2u |sum_j P_j
  // (v_ji - O_i) s_j| for s_j, and for the running max m, by parts over each accumulator's
  // tiles and then over the accumulators, 2u max_range B_i (B_i the prefix walk of the rescales).
  const bool constants_apart =
      un.nearest && walk && c.softcap == 0.0 && !c.has_sink() && c.alibi_slopes.empty();
  const double u_const = compounded(un.u, 2.0);
  // (Without it they are in t_sys.) Evaluated in double, the covariance is off by at most
  // kEvalRel of sum_j P_j |v_ji - O_i| |s_j| <= M (S_i + |O_i|), which is added.
  const auto constants = [&](const ElementSums& e, int64_t i, double o) {
    if (!constants_apart) return 0.0;
    return u_const * (std::fabs(e.cov) + kEvalRel * k.M * (e.s + std::fabs(o)) +
                      k.max_range * (parts.rescale_walk[i] + kEvalRel * e.s));
  };
  // §5: the merge sum's nodes from the exact partials, where the layout names them and each is
  // a term of the sum (not pieces summed first).
  const int64_t merge_n =
      m && un.a.layout && m->sum_terms == un.shards && m->sum_terms <= kMaxExactMergeTerms
          ? m->sum_terms
          : 0;
  // §5: each partial's weight error, where the layout names the partials and all N merge at once:
  // its own where no sink joins one of them, else C.
  SlotError slot_error;
  if (m && un.a.layout && m->sum_terms > 0) {
    const bool own = m->per_partial && k.p_sink == 0.0;
    slot_error = [&un, &m, own](double w_r, int64_t n_r) {
      return own ? partial_weight_error(un, *m, w_r, n_r) : m->weight;
    };
  }
  const std::vector<ElementSums> sums =
      element_sums(c, keys, g, o_ref, k, cast_error,
                   SumsScope{sums_layout, walk, merge_n, constants_apart, slot_error}, &parts);
  // The output's store, of the computed value within `b` of O_i; exact where the scaled form's
  // merge_accum sum is the output and `out` holds every value of merge_accum (§5), unless a
  // subnormal one may be flushed.
  const bool sum_stored_exactly =
      m && m->scaled_uncast && !un.a.ftz &&
      (un.a.out == un.a.merge_accum || (un.a.out == DType::f32 && is_float(un.a.merge_accum) &&
                                        dtype_bytes(un.a.merge_accum) <= dtype_bytes(DType::f32)));
  auto stored = [&](double b, double o) {
    return (b + (sum_stored_exactly ? 0.0 : rounding_error(un.a.out, std::fabs(o) + b))) *
           kEvalSlack;
  };
  for (int64_t i = 0; i < c.v_dim; ++i) {
    const double o = o_ref[i];
    const ElementSums& e = sums[static_cast<size_t>(i)];
    const double first = e.t_key + co.c_S * e.s + co.c_O * std::fabs(o) + floor;
    // §10: the computed numerator's partial sums are exact partial sums of the same keys within
    // num_factor S'_i - S_i, the P cast's C_i and the floors. In any order and partition at most
    // max(S+, S-) (the positive terms' sum, the negative's); where the accumulators sum runs of
    // keys contiguous in position order, at most the walk W_i.
    const double slack = num_factor * e.s_weighted - e.s + e.cast + floor + kEvalRel * e.s;
    const double runs =
        std::min(e.s, walk ? parts.walk[i] + slack : std::max(e.s_pos, e.s - e.s_pos) + slack);
    // The rescales: in runs of contiguous keys, B_i times the chain's total (Abel summation over
    // the tiles); else rho on every weight.
    const double rescales =
        walk ? k.rescale_walk * (parts.rescale_walk[i] + kEvalRel * e.s) : k.rho * e.t_pv;
    const double cast = cast_factor * e.cast;
    const double single = first * second + cast;
    double bound = single;
    // §10, one event per element: the key weights' random parts (the keys' draws and the q-side
    // roundings), the numerator's and the denominator's adds and the P cast's roundings, each
    // independent of the others, in one root sum of squares; the rest kept whole.
    StatSum stat_sum(un.lambda);
    stat_sum.whole(((co.c_S - co.g) * e.s + (co.c_O - co.g) * std::fabs(o) + floor) * second);
    stat_sum.part((e.t_sys + constants(e, i, o) + rescales) * second,
                  std::sqrt(e.t_rand * e.t_rand + e.q_rand * e.q_rand) * second, e.t_key * second);
    stat_sum.part(co.g_sys * runs * second, co.g_rand * runs * second, co.g * e.s * second);
    stat_sum.part(co.g_sys * std::fabs(o) * second, co.g_rand * std::fabs(o) * second,
                  co.g * std::fabs(o) * second);
    stat_sum.part(cast_factor * e.cast_floor, cast_factor * un.cast_sd * e.cast_rms, cast);
    double stat = std::min(single, stat_sum.bound());
    if (m) {
      // Q >= sum_r w*_r |O^v_r,i|, the computed partials' sums, their absolute floors included:
      // each computed numerator is within sum_j P_j |v_ji| ((1 + e_j) num_factor - 1) of the
      // exact one, so Q = (A + num_factor S' - S) / den_factor with A = sum_r |sum_{j in r} P_j
      // v_ji| the exact partials' where the layout is known, else A = S (any partition).
      const double a = un.a.layout ? parts.a[i] + kEvalRel * e.s : e.s;
      // The P cast's subnormal floor is in C_i (with its relative part, counted twice).
      const double a_used = std::min(a, e.s);
      // The P cast's C_i passes through the accumulation too: (1 + g).
      const double q =
          (a_used + num_factor * e.s_weighted - e.s + floor) / den_factor + (1.0 + co.g) * e.cast;
      // The partials' spread about the output times their weights' errors, where the exact
      // partials are known and all N merge at once (a pairwise tree's weights compound over its
      // levels): each partial's own C_r where known, else C.
      double spread = std::numeric_limits<double>::infinity();
      if (un.a.layout && m->sum_terms > 0) {
        spread = parts.dev[i] + m->weight * (kEvalRel * (e.s + std::fabs(o)) +
                                             partial_spread(q - a_used, o, k.p_sink,
                                                            (1.0 + co.g) * (1.0 + k.e_bar) - 1.0));
      }
      std::optional<ExactTerms> exact;
      if (merge_n > 1) {
        const auto nodes = static_cast<size_t>(merge_n - 1);
        const size_t held = parts.terms.size() / static_cast<size_t>(c.v_dim);
        exact = ExactTerms{
            parts.a[i],
            std::span<const double>(&parts.nodes[static_cast<size_t>(i) * nodes], nodes),
            std::span<const double>(parts.terms.data() + static_cast<size_t>(i) * held, held),
            kEvalRel * e.s};
      }
      const double e_n = numerator_error(q, *m, exact);
      bound = merged_o_bound(bound, o, q, *m, max_abs_v, e_n, spread);
      stat = merged_o_bound(stat, o, q, *m, max_abs_v, e_n, spread);
    }
    const double oracle = kOracleRel * (std::fabs(o) + e.s);
    ob[i] = stored(bound, o) + oracle;
    os[i] = std::min(ob[i], stored(stat, o) + oracle);
    if (terms.o && i == terms.element) {
      *terms.o = named_terms(kOBoundTermNames, {e.t_key, co.c_S * e.s + co.c_O * std::fabs(o),
                                                floor, first * (second - 1.0), cast, bound - single,
                                                stored(bound, o) - bound, oracle});
    }
  }
}

// docs/tolerances.md §7, the bound on the LSE (in the case's base). Key-level weight errors and
// the accumulation of the denominator enter as ln(1 + x) with |x| <= x_keys (e_bar + g, or the
// statistical tier's, §10); then the log, the final add, floors, the merge (§5, with N > 1) and
// storage. *terms, where given, receives what each step adds.
double lse_bound(const Units& un, LseBase base, double L, const RowLogits& in, double x_keys,
                 double L_abs, const std::optional<Merge>& m, double second,
                 std::vector<BoundTerm>* terms = nullptr) {
  const double keys = -ln_one_minus(x_keys), log = un.eps_log(L - in.smax),
               add = kLseAddRoundings * un.u_s * L_abs, floors = in.n_eff * un.tiny;
  const double lam = keys + log + add + floors;
  // The merge's part (§5) is bounded exactly, not to first order: no second-order factor.
  const double merge = m ? m->lse + m->abs_weight : 0.0;
  const double units = base == LseBase::two ? kLog2e : 1.0;
  const double computed = (lam * second + merge) * units;
  const double L_out = lse_from_natural(base, L);
  // The store rounds the computed LSE, |L| plus its error.
  const double stored = computed +
                        rounding_error(un.a.lse_out, computed + std::fabs(L_out) * second) +
                        kLseStoreRoundings * un.u_s * std::fabs(L_out) * second;
  const double oracle = kOracleRel * (std::fabs(L_out) + kOracleLseFloor);
  if (terms) {
    *terms = named_terms(kLseBoundTermNames,
                         {keys * units, log * units, add * units, floors * units,
                          lam * (second - 1.0) * units, merge * units, stored - computed, oracle});
  }
  return stored + oracle;
}

struct RowBound {
  double kappa;          // first-order relative coefficient of the single device (§6)
  double lse;            // bound on the row's LSE
  double lse_stat;       // its statistical tier (§10)
  bool merge_ok = true;  // the merge's factors are below 1/2 (§5)
};

// §10: the statistical tier's x_keys of the LSE, one event: sum_j P_j m_j (and the sink's) kept
// whole, and lambda times the root sum of squares of the random parts' scales: over groups of keys
// (KeyErrors::group) of P_j b_j, the q-side roundings' q_lse and the denominator's adds g_rand;
// each part never above its sound one (e_bar, g). Where the claim bounds the exponential's mean
// below its largest error (exp_bias), also the same with that mean charged whole and the
// exponential's deviations random (one more event: case_units counts it), and the smaller of the
// two.
double statistical_lse_keys(const Units& un, const KeyErrors& k, const Coefficients& co) {
  const auto keys = [&](const std::vector<double>& m, const std::vector<double>& b) {
    std::vector<double> grp(static_cast<size_t>(k.groups), 0.0);
    double sys = k.p_sink * k.e_sink;
    for (size_t x = 0; x < k.p.size(); ++x) {
      sys += k.p[x] * m[x];
      grp[static_cast<size_t>(k.group[x])] += k.p[x] * b[x];
    }
    double rand2 = k.q_lse * k.q_lse;
    for (double v : grp) rand2 += v * v;
    StatSum sum(un.lambda);
    sum.part(sys, std::sqrt(rand2), k.e_bar);
    sum.part(co.g_sys, co.g_rand, co.g);
    return sum.bound();
  };
  double x = keys(k.m_lse, k.b_lse);
  if (un.exp_bias < un.eps_exp) x = std::min(x, keys(k.m_bias, k.b));
  return std::min(k.e_bar + co.g, x);
}

// One row (t, h): §2 to §7 in order; writes the row's O bounds to ob [Dv] (and their terms where
// asked).
RowBound bound_row(const Case& c, const Attention& ref, const Units& un,
                   std::span<const int64_t> keys, int64_t t, int64_t h, double tau, double* ob,
                   double* os, const TermsOut& terms = {}) {
  const int64_t r = t * c.q_heads() + h, dv = c.v_dim, g = c.kv_head_of(h);
  const double L_ref = lse_to_natural(ref.base, ref.lse.data[r]);
  if (L_ref == kNegInf) {  // nothing visible, no sink: O must be exactly 0, LSE exactly -inf
    std::fill(ob, ob + dv, 0.0);
    std::fill(os, os + dv, 0.0);
    return RowBound{0.0, 0.0, 0.0, true};
  }
  const RowLogits in = row_logits(c, t, h, keys, tau, un.a.dot_lanes);
  // §10: under the order assumption (as o_bounds' walks), the running max's rise.
  const std::optional<Ownership> accumulators = accumulators_of(un);
  const KeyErrors k =
      key_errors(un, c.softcap, c.seq(), in, L_ref, running_max_of(un, keys, in, accumulators));
  const Coefficients co = accumulation(un, accumulated_terms(un, keys, in));
  const double L_abs = lse_abs_bound(in.M, in.n_eff);
  const std::optional<Merge> m =
      merge_terms(un, in.n_eff, lse_range(un, keys, k, L_ref, L_abs), L_ref);
  const double kappa = first_order_kappa(k, co);
  const double second = second_order_factor(kappa);

  const double max_abs_v = max_abs_value(c, keys, g);
  o_bounds(c, keys, g, &ref.o.data[r * dv], k, co, m, un, absolute_floor(un, in.n_eff, max_abs_v),
           max_abs_v, second, ob, os, terms);
  const double lse =
      lse_bound(un, c.lse_base, L_ref, in, k.e_bar + co.g, L_abs, m, second, terms.lse);
  const double lse_stat =
      lse_bound(un, c.lse_base, L_ref, in, statistical_lse_keys(un, k, co), L_abs, m, second);
  return RowBound{kappa, lse, std::min(lse, lse_stat), !m || merge_boundable(*m)};
}

// §6: what kappa is made of, by the claim term responsible, for a refusal's message: kappa =
// e_max + e_bar + 3g + u_v, and with one device also eps_div + u_v (first_order_kappa adds the
// same terms; the P cast and the stores are bounded exactly, and with N > 1 the divisions are the
// merge's).
std::string kappa_culprit(const Case& c, const Units& un, std::span<const int64_t> keys, int64_t t,
                          int64_t h, double tau, double L_ref) {
  const RowLogits in = row_logits(c, t, h, keys, tau, un.a.dot_lanes);
  // (The running max moves only §10's terms, not kappa: taken at its largest.)
  const KeyErrors k =
      key_errors(un, c.softcap, c.seq(), in, L_ref, running_max_of(un, keys, in, std::nullopt));
  const Coefficients co = accumulation(un, accumulated_terms(un, keys, in));
  const bool one = un.shards <= 1;
  struct Term {
    std::string what;
    double value;
  };
  const std::vector<Term> terms = {
      {"the key weights (exp_rel_err, tile " + std::to_string(un.a.tile) +
           ", the logits in accum " + std::string(un.a.tf32 ? "TF32" : dtype_name(un.a.accum)) +
           (un.a.kv_dequant ? ", keys dequantized to " + std::string(dtype_name(*un.a.kv_dequant))
                            : std::string()) +
           ")",
       k.e_max + k.e_bar},
      {"the accumulation of " +
           std::to_string(static_cast<int64_t>(accumulated_terms(un, keys, in))) +
           " terms in accum " + std::string(dtype_name(un.a.accum)),
       3.0 * co.g},
      {un.a.kv_dequant ? "the V's dequantization (kv_dequant) and scale" : "the V scale",
       (one ? 2.0 : 1.0) * un.u_v},
      {"the division (div_ulps)", one ? un.eps_div : 0.0},
  };
  const Term& worst = *std::max_element(
      terms.begin(), terms.end(), [](const Term& x, const Term& y) { return x.value < y.value; });
  char share[32];
  std::snprintf(share, sizeof share, "%.3g", worst.value);
  std::string why = "mostly " + worst.what + ": " + share;
  // §3: where the rescales make most of the key weights' share (each of R = ceil(S / tile) costs
  // the exponential's error), the kernel's own tile is the claim that sharpens it.
  if (&worst == &terms.front() && 2.0 * k.rho > k.e_max) {
    std::snprintf(share, sizeof share, "%.3g", k.rho);
    why += std::string(", of which the online-softmax rescales ") + share + ": " +
           std::to_string(static_cast<int64_t>(rescale_count(un, c.seq(), in.sink))) +
           " of them with tile " + std::to_string(un.a.tile) +
           (un.a.tile == 1 ? " (any tiling: one per key)" : "") +
           ", each off by the rescale exponential's error; claim the kernel's keys per "
           "online-softmax block (tile) and its rescales' own exponential "
           "(rescale_exp_rel_err), which dcp-verify probe measures";
  }
  return why;
}

// §10: every row's top-k list (padding aside) in ascending position order, or no list.
bool topk_ascending(const Case& c) {
  if (!c.has_topk()) return true;
  for (int64_t t = 0; t < c.topk.dim(0); ++t) {
    int64_t last = -1;
    for (int64_t x = 0; x < c.topk.dim(1); ++x) {
      const int64_t j = c.topk.at({t, x});
      if (j == -1) continue;
      if (j <= last) return false;
      last = j;
    }
  }
  return true;
}

// A claimed layout fits the case: one rank per key position, each in [0, ranks), and no more
// ranks than partials merged.
Status check_layout(const Case& c, const Arithmetic& a) {
  const Ownership& own = *a.layout;
  // One partial per rank: the merge's N terms are the layout's ranks, and a sink added at the merge
  // may be one more (a coarser layout would sum the exact partials over unions of them, §5).
  const int64_t merged = std::max<int64_t>(1, a.shards);
  if (own.ranks != merged && !(c.has_sink() && own.ranks == merged - 1))
    return DCP_ERROR("tolerance: layout of ", own.ranks, " ranks; expected shards = ", merged,
                     c.has_sink() ? " (or shards - 1, a sink merged as its own term)" : "",
                     ": one partial per rank");
  if (own.owner.empty()) {
    if (own.interleave < 1)
      return DCP_ERROR("tolerance: layout interleave ", own.interleave, "; expected >= 1");
    return Status();
  }
  if (static_cast<int64_t>(own.owner.size()) != c.seq())
    return DCP_ERROR("tensor 'owner': ", own.owner.size(),
                     " entries; expected one per key, S = ", c.seq());
  for (size_t p = 0; p < own.owner.size(); ++p) {
    if (own.owner[p] < 0 || own.owner[p] >= own.ranks)
      return DCP_ERROR("tensor 'owner': entry ", p, " is ", own.owner[p],
                       "; expected a rank in [0, ", own.ranks, ")");
  }
  return Status();
}

}  // namespace

// What every row of a case shares (§1, §4, §5, §10): the claim's units with the case's V scale,
// a dequantization and the statistical tier's lambda, and the softmax scale tau. Fails where no
// row can be bounded: a layout that does not fit, a merge too coarse or too shallow for N.
struct CaseUnits {
  Units un;
  double tau;
};

Expected<CaseUnits> case_units(const Case& c, const Attention& ref, const Arithmetic& a) {
  const int64_t T = c.tokens(), Hq = c.q_heads(), dv = c.v_dim;
  if (a.layout) DCP_TRY(check_layout(c, a));
  CaseUnits cu{units_of(a),
               c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim()))};
  // §5: the merge's sum in merge_accum is the same in every row; where its gamma_N(u_m) is 1/2 or
  // more no row that sees anything can be bounded, and that is said before any row is computed
  // (a row that sees nothing, LSE -inf, is exact and needs no merge bound).
  const bool sees_something = std::any_of(ref.lse.data.begin(), ref.lse.data.end(),
                                          [](double l) { return std::isfinite(l); });
  if (const int64_t terms = merge_sum_terms(a);
      cu.un.shards > 1 && sees_something &&
      !(gamma_n(static_cast<double>(terms), cu.un.u_m) < kMaxLogArg)) {
    return DCP_ERROR("tolerance: ", merge_unbounded(a, cu.un.u_m), "; no bound holds in any row");
  }
  // §5: a pairwise tree of depth D joins at most 2^D partials.
  if (a.merge_depth > 0 && cu.un.shards > 1 &&
      (a.merge_depth < 62 && (int64_t{1} << a.merge_depth) < cu.un.shards)) {
    return DCP_ERROR("tolerance: merge_depth ", a.merge_depth, " cannot join ", cu.un.shards,
                     " partials two at a time (the claim's dcp_size x splits, with the sink's "
                     "own): that takes at least ceil(log2 ",
                     cu.un.shards, ") merges deep");
  }
  // §5: the scaled form is one merge of all N.
  if (a.merge_scaled && a.merge_depth > 0) {
    return DCP_ERROR("tolerance: merge_form scaled is one merge of all the partials; merge_depth ",
                     a.merge_depth, " says they merge two at a time (give one of them)");
  }
  // §4: a V scale (a shared latent's V is scaled by K's) costs one rounding of the accumulation.
  if (!c.v_scale.empty() || (c.shared_latent() && !c.k_scale.empty())) cu.un.u_v = cu.un.u_s;
  // §3, §4: K and V dequantized into kv_dequant, each element rounded once (relative u, absolute
  // its subnormal floor): on the logit, u sum |q_k k_k| and the floor times sum |q_k|; on O, u on
  // every value (with the V scale's rounding) and the floor.
  if (a.kv_dequant) {
    const double u_dq = unit_roundoff(*a.kv_dequant);
    cu.un.u_kdq = u_dq;
    cu.un.u_v = (1.0 + cu.un.u_v) * (1.0 + u_dq) - 1.0;
    cu.un.dq_floor = store_floor(a, *a.kv_dequant);
  }
  // §10: the events the statistical tier counts, one per O element (its key weights, sums and P
  // cast together) and one per row (the LSE's key weights and its sum; two where a claimed
  // exp_bias adds the key weights with the exponential's deviations), each with a tail of
  // 2 exp(-lambda^2 / 2): lambda makes their union kStatFalseAlarm.
  const double row_events = cu.un.exp_bias < cu.un.eps_exp ? 2.0 : 1.0;
  const double events = static_cast<double>(T * Hq) * (static_cast<double>(dv) + row_events);
  cu.un.lambda = std::sqrt(2.0 * std::log(2.0 * std::max(1.0, events) / kStatFalseAlarm));
  cu.un.position_order = topk_ascending(c);
  return cu;
}

Expected<Bound> derive_bound(const Case& c, const Attention& ref, const Arithmetic& a,
                             const Watch& watch) {
  const int64_t T = c.tokens(), Hq = c.q_heads(), dv = c.v_dim;
  auto cu = case_units(c, ref, a);
  if (!cu) return cu.status();
  const Units& un = cu->un;
  const double tau = cu->tau;
  Bound b;
  b.o = Tensor<double>({T, Hq, dv});
  b.lse = Tensor<double>({T, Hq});
  b.o_stat = Tensor<double>({T, Hq, dv});
  b.lse_stat = Tensor<double>({T, Hq});

  std::vector<double> kappa_row(T * Hq, 0.0);
  std::vector<char> merge_ok(T * Hq, 1);
  std::vector<std::vector<int64_t>> keys(T);
  int64_t total = 0;
  for (int64_t t = 0; t < T; ++t) {
    keys[t] = visible_keys(c, t);
    total += static_cast<int64_t>(keys[t].size()) * Hq;
  }

  WatchGate gate(watch, total);
  parallel_for(T * Hq, [&](int64_t r) {
    if (gate.stop()) return;
    const int64_t t = r / Hq;
    const RowBound rb =
        bound_row(c, ref, un, keys[t], t, r % Hq, tau, &b.o.data[r * dv], &b.o_stat.data[r * dv]);
    kappa_row[r] = rb.kappa;
    merge_ok[r] = rb.merge_ok ? 1 : 0;
    b.lse.data[r] = rb.lse;
    b.lse_stat.data[r] = rb.lse_stat;
    gate.finished(static_cast<int64_t>(keys[t].size()));
  });
  if (gate.stopped()) return DCP_ERROR("interrupted: ", gate.so_far("(row, key) pairs bounded"));

  for (int64_t r = 0; r < T * Hq; ++r) {
    b.kappa = std::max(b.kappa, kappa_row[r]);
    if (!merge_ok[r])
      return DCP_ERROR("tolerance: row (t=", r / Hq, ", h=", r % Hq,
                       "): ", merge_unbounded(a, un.u_m), "; no bound holds there");
    if (kappa_row[r] > kMaxKappa) {
      const int64_t t = r / Hq, h = r % Hq;
      const std::string culprit =
          kappa_culprit(c, un, keys[t], t, h, tau, lse_to_natural(ref.base, ref.lse.data[r]));
      char kappa[64];
      std::snprintf(kappa, sizeof kappa, "%.4g > %g", kappa_row[r], kMaxKappa);
      return DCP_ERROR("tolerance: row (t=", t, ", h=", h,
                       "): first-order relative error kappa = ", kappa, " (", culprit,
                       "); the claimed arithmetic is too coarse for a first-order bound here")
          .mark_unjudgeable();
    }
  }
  return b;
}

Expected<BoundTerms> bound_terms(const Case& c, const Attention& ref, const Arithmetic& a,
                                 int64_t t, int64_t h, int64_t i) {
  if (t < 0 || t >= c.tokens() || h < 0 || h >= c.q_heads() || i < 0 || i >= c.v_dim)
    return DCP_ERROR(
        "bound terms: element (t=", t, ", h=", h, ", i=", i,
        ") is outside the case's [T, Hq, Dv] = ", shape_string({c.tokens(), c.q_heads(), c.v_dim}));
  auto cu = case_units(c, ref, a);
  if (!cu) return cu.status();
  const int64_t dv = c.v_dim;
  std::vector<double> ob(static_cast<size_t>(dv)), os(static_cast<size_t>(dv));
  BoundTerms out;
  bound_row(c, ref, cu->un, visible_keys(c, t), t, h, cu->tau, ob.data(), os.data(),
            TermsOut{&out.o, i, &out.lse});
  return out;
}

}  // namespace dcp::oracle
