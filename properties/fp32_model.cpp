#include "properties/fp32_model.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "oracle/shard.hpp"

namespace dcp::props {
namespace {

using dcp::oracle::Case;
using dcp::oracle::LseBase;

constexpr float kNegInfF = -std::numeric_limits<float>::infinity();
constexpr float kLog2eF = 1.44269504f;
constexpr float kLn2F = 0.693147181f;
// 2 ulp of an fp32 result, relative: the library's rounding and the perturbation's ulp.
constexpr double kModelIntrinsicRel = 0x1p-22;

struct Perturber {
  std::mt19937_64 g;
  bool on;
  // x * (1 + r 2^-23), r in [-1, 1]: at most one more ulp on top of the library's own rounding.
  float operator()(float x) {
    if (!on) return x;
    return static_cast<float>(static_cast<double>(x) * (1.0 + draw() * std::ldexp(1.0, -23)));
  }
  double draw() { return std::uniform_real_distribution<double>(-1.0, 1.0)(g); }
};

// The kernel's own exp and log (ModelConfig::exp_rel_err, log_rel_err): each result off by up to
// the stated error, drawn at random, or every one low by all of it (systematic).
struct ApproximateIntrinsics {
  const ModelConfig& m;
  Perturber& draws;
  float exp(float y) {
    if (m.exp_rel_err <= 0.0) return y;
    const double d = m.approx_systematic ? -1.0 : draws.draw();
    return static_cast<float>(static_cast<double>(y) * (1.0 + d * m.exp_rel_err));
  }
  float log(float y) {
    if (m.log_rel_err <= 0.0) return y;
    const double d = m.approx_systematic ? -1.0 : draws.draw();
    const double y_d = static_cast<double>(y);
    return static_cast<float>(y_d + d * m.log_rel_err * std::max(1.0, std::fabs(y_d)));
  }
};

// An operand of a TF32 tensor-core product: rounded to 10 stored significand bits.
float tf32_operand(float x, const ModelConfig& m) {
  return m.tf32 ? static_cast<float>(oracle::round_to_format(x, 11, -126, FLT_MAX)) : x;
}

// A store to t, flushed to zero in t's subnormal range with ftz.
double store(oracle::DType t, double x, const ModelConfig& m) {
  const double y = oracle::round_to(t, x);
  return m.ftz && std::fabs(y) < oracle::min_normal(t) ? 0.0 : y;
}

// a + b x rounded toward zero, as a truncating accumulator adds an exact product (with
// ModelConfig::truncate; else as the FMA or the add rounds to nearest).
float accumulate(float a, float b, float x, const ModelConfig& m) {
  if (!m.truncate) return m.fma ? std::fma(b, x, a) : a + b * x;
  const double exact = static_cast<double>(a) + static_cast<double>(b) * static_cast<double>(x);
  const float r = static_cast<float>(exact);
  return std::fabs(static_cast<double>(r)) > std::fabs(exact) ? std::nextafter(r, 0.0f) : r;
}

// Terms summed pairwise: adjacent pairs, level by level.
float pairwise_sum(std::vector<float> terms) {
  while (terms.size() > 1) {
    std::vector<float> next;
    for (size_t i = 0; i + 1 < terms.size(); i += 2) next.push_back(terms[i] + terms[i + 1]);
    if (terms.size() % 2) next.push_back(terms.back());
    terms.swap(next);
  }
  return terms.empty() ? 0.0f : terms[0];
}

float dot(const double* q, const double* k, int64_t n, const ModelConfig& m) {
  const auto operand = [&m](const double* x, int64_t i) {
    return tf32_operand(static_cast<float>(x[i]), m);
  };
  if (m.dot_lanes > 1) {
    std::vector<float> lanes(static_cast<size_t>(std::min(m.dot_lanes, std::max<int64_t>(n, 1))),
                             0.0f);
    for (int64_t i = 0; i < n; ++i) {
      float& acc = lanes[static_cast<size_t>(i) % lanes.size()];
      acc = accumulate(acc, operand(q, i), operand(k, i), m);
    }
    return pairwise_sum(std::move(lanes));
  }
  if (m.pairwise_dot && m.dot_lanes == 0) {
    std::vector<float> terms(n);
    for (int64_t i = 0; i < n; ++i) terms[i] = operand(q, i) * operand(k, i);
    return pairwise_sum(std::move(terms));
  }
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc = accumulate(acc, operand(q, i), operand(k, i), m);
  return acc;
}

float round_p(float p, const ModelConfig& m) {
  return tf32_operand(m.p_cast ? static_cast<float>(store(*m.p_cast, p, m)) : p, m);
}

struct Partial {
  std::vector<float> o;  // [Dv]
  float lse;             // in the model's units: natural, or log2 when base2
};

}  // namespace

bool planted_in_model(Bug b) {
  return b == Bug::none || (mutants::mutant_info(b).where & mutants::kInModel) != 0;
}

ModelOutput run_fp32_model(const Case& c, const ModelConfig& m) {
  const int64_t T = c.tokens(), Hq = c.q_heads(), dk = c.head_dim(), dv = c.v_dim;
  ModelOutput out{oracle::Tensor<double>({T, Hq, dv}), oracle::Tensor<double>({T, Hq}),
                  oracle::Tensor<double>({m.shards, T, Hq, dv}),
                  oracle::Tensor<double>({m.shards, T, Hq})};
  Perturber perturb{std::mt19937_64(m.seed), m.perturb};
  const double tau_d = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(dk));
  const float tau = static_cast<float>(tau_d);
  const float tau_log2e = static_cast<float>(tau_d * 1.4426950408889634);
  const bool plain = oracle::plain_logit(c);
  ApproximateIntrinsics approx{m, perturb};
  auto ex = [&](float x) { return approx.exp(perturb(m.base2 ? std::exp2(x) : std::exp(x))); };
  auto lg = [&](float x) { return approx.log(perturb(m.base2 ? std::log2(x) : std::log(x))); };
  // An exp of its own, where a claim states one (else the kernel's), in a base.
  const auto own_exp = [&perturb, &m](const std::optional<double>& rel_err, bool base2) {
    ModelConfig own = m;
    if (rel_err) own.exp_rel_err = *rel_err;
    return [own, base2, &perturb](float x) {
      return ApproximateIntrinsics{own, perturb}.exp(perturb(base2 ? std::exp2(x) : std::exp(x)));
    };
  };
  // The merge's own exp/log pair (the merge_wrong_base bug uses the other base's) and the
  // rescales' own exp.
  const bool merge_base2 = m.bug == Bug::merge_base_mismatch ? !m.base2 : m.base2;
  const auto mex = own_exp(m.merge_exp_rel_err, merge_base2);
  const auto rex = own_exp(m.rescale_exp_rel_err, m.base2);
  auto mlg = [&](float x) { return approx.log(perturb(merge_base2 ? std::log2(x) : std::log(x))); };

  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int64_t> keys = oracle::visible_keys(c, t);
    const int64_t qpos = c.query_pos(t);
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = c.kv_head_of(h);
      const double* q = &c.q.data[c.q.offset({t, h, 0})];
      // An fp8 cache's scales, as kernels apply them: the dot product over the stored keys, the
      // K scale folded into the softmax scale (per key when scales are by token), the V scale
      // applied to the output, or by token to each value as it is dequantized (1: none).
      const bool by_token = c.scales_per_token();
      const auto k_scale = [&](int64_t j) { return static_cast<float>(c.k_scale_of(j, g)); };
      const auto v_scale = [&](int64_t j) { return static_cast<float>(c.v_scale_of(j, g)); };
      const float v_fold = m.dequantize_to || by_token ? 1.0f : v_scale(0);
      std::vector<double> stored_k(static_cast<size_t>(dk)), k_row(static_cast<size_t>(dk));
      // Logits in the model's units (log2 units when base2).
      auto logit = [&](int64_t j) {
        // With dequantize_to the keys are dequantized (rounded) first and the scale is tau alone.
        const float k_fold = m.dequantize_to ? 1.0f : k_scale(j);
        const float tau_k = tau * k_fold, tau_log2e_k = tau_log2e * k_fold;
        const double* kr = c.k.row(j, g, k_row.data());
        for (int64_t i = 0; i < dk; ++i) {
          // kr[i] / k_scale is exact (case.hpp).
          stored_k[i] =
              m.dequantize_to ? oracle::round_to(*m.dequantize_to, kr[i]) : kr[i] / k_scale(j);
        }
        const float d = dot(q, stored_k.data(), dk, m);
        if (!plain) {
          const float s = oracle::variant_logit(c, d * tau_k, h, qpos, j);
          return m.base2 ? s * kLog2eF : s;
        }
        return m.base2 ? d * tau_log2e_k : d * tau_k;
      };
      std::vector<int64_t> row = keys;
      if (m.bug == Bug::drop_token || m.bug == Bug::duplicate_token) {
        if (!row.empty()) {
          int64_t best = 0;
          for (size_t x = 1; x < row.size(); ++x) {
            if (logit(row[x]) > logit(row[best])) best = static_cast<int64_t>(x);
          }
          if (m.bug == Bug::drop_token) {
            row.erase(row.begin() + best);
          } else {
            row.push_back(row[best]);
          }
        }
      }
      const float sink_logit =
          c.has_sink() ? static_cast<float>(m.base2 ? c.sink[h] * 1.4426950408889634 : c.sink[h])
                       : 0.0f;
      std::vector<Partial> parts(m.shards);
      for (int64_t r = 0; r < m.shards; ++r) {
        std::vector<int64_t> mine;
        for (int64_t j : row) {
          if (oracle::dcp_owner(j, m.shards, m.interleave) == r) mine.push_back(j);
        }
        if (m.bug == Bug::lost_token && r == m.shards - 1 && !mine.empty()) {
          size_t best = 0;
          for (size_t x = 1; x < mine.size(); ++x)
            if (logit(mine[x]) > logit(mine[best])) best = x;
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(best));
        }
        const bool with_sink = c.has_sink() && m.bug != Bug::sink_missing &&
                               (r == 0 || m.bug == Bug::sink_on_every_rank);
        float mx = kNegInfF, l = 0.0f;
        std::vector<float> acc(dv, 0.0f);
        for (size_t start = 0; start < mine.size(); start += m.tile) {
          const size_t end = std::min(mine.size(), start + static_cast<size_t>(m.tile));
          std::vector<float> y(end - start);
          float tile_max = kNegInfF;
          for (size_t x = start; x < end; ++x) {
            y[x - start] = logit(mine[x]);
            tile_max = std::max(tile_max, y[x - start]);
          }
          const float m_new = std::max(mx, tile_max);
          const float alpha = mx == kNegInfF ? 0.0f : rex(mx - m_new);
          l *= alpha;
          for (float& a : acc) a *= alpha;
          for (size_t x = start; x < end; ++x) {
            const float p = ex(m.fma ? std::fma(y[x - start], 1.0f, -m_new) : y[x - start] - m_new);
            l = accumulate(l, p, 1.0f, m);
            const float pc = round_p(p, m);
            const int64_t j = mine[x];
            for (int64_t i = 0; i < dv; ++i) {
              // By token, the stored value times its scale, rounded once to fp32.
              const double v_j =
                  m.dequantize_to ? oracle::round_to(*m.dequantize_to, c.v_at(j, g, i))
                  : by_token ? static_cast<float>(static_cast<float>(c.v_at(j, g, i) / v_scale(j)) *
                                                  v_scale(j))
                             : c.v_at(j, g, i) / v_scale(j);
              const float v = tf32_operand(static_cast<float>(v_j), m);
              acc[i] = accumulate(acc[i], pc, v, m);
            }
          }
          mx = m_new;
        }
        if (with_sink) {
          const float m_new = std::max(mx, sink_logit);
          const float alpha = mx == kNegInfF ? 0.0f : rex(mx - m_new);
          l = l * alpha + ex(sink_logit - m_new);
          for (float& a : acc) a *= alpha;
          mx = m_new;
        }
        Partial& part = parts[r];
        part.o.assign(dv, 0.0f);
        if (mx == kNegInfF) {
          part.lse = kNegInfF;
        } else {
          for (int64_t i = 0; i < dv; ++i)
            part.o[i] = static_cast<float>(store(m.partial, acc[i] / l * v_fold, m));
          part.lse = mx + lg(l);
        }
      }

      // Each shard's partial as exchanged: O_r in fp32, L_r in the case's base.
      const bool want_base2 = c.lse_base == LseBase::two;
      for (int64_t r = 0; r < m.shards; ++r) {
        const Partial& p = parts[r];
        const int64_t at = (r * T + t) * Hq + h;
        for (int64_t i = 0; i < dv; ++i) out.o_partial.data[at * dv + i] = p.o[i];
        float l = p.lse;
        if (l != kNegInfF && want_base2 != m.base2) l = m.base2 ? l * kLn2F : l * kLog2eF;
        out.lse_partial.data[at] = l;
      }

      std::vector<float> o(dv, 0.0f);
      float lse;
      if (m.shards == 1) {
        o = parts[0].o;
        lse = parts[0].lse;
      } else if (m.merge == Merge::pairwise && m.bug != Bug::merge_unweighted_mean) {
        // The chain: a state (O, L) joined with each partial in turn, normalized and stored.
        lse = kNegInfF;
        for (int64_t k = 0; k < m.shards; ++k) {
          const Partial& p = parts[m.reverse_merge ? m.shards - 1 - k : k];
          if (p.lse == kNegInfF) continue;
          if (lse == kNegInfF) {
            o = p.o, lse = p.lse;
            continue;
          }
          const float mx = std::max(lse, p.lse);
          const float wa = mex(lse - mx), wb = mex(p.lse - mx);
          const float sum = static_cast<float>(oracle::round_to(m.merge_lse_accum, wa + wb));
          const bool last = k == m.shards - 1;
          for (int64_t i = 0; i < dv; ++i) {
            const auto r = [&](float x) {
              return static_cast<float>(oracle::round_to(m.merge_accum, x));
            };
            const float x = r(r(wa * o[i]) + r(wb * p.o[i])) / sum;
            o[i] = last ? x : static_cast<float>(store(m.partial, x, m));
          }
          lse = mx + mlg(sum);
        }
      } else if (m.bug == Bug::merge_unweighted_mean) {
        float mx = kNegInfF, sum = 0.0f;
        int64_t nonempty = 0;
        for (const Partial& p : parts) mx = std::max(mx, p.lse);
        for (const Partial& p : parts) {
          if (p.lse == kNegInfF) continue;
          ++nonempty;
          sum += mex(p.lse - mx);
          for (int64_t i = 0; i < dv; ++i) o[i] += p.o[i];
        }
        for (float& x : o) x = nonempty ? x / static_cast<float>(nonempty) : 0.0f;
        lse = mx == kNegInfF ? kNegInfF : mx + mlg(sum);
      } else {
        float mx = kNegInfF;
        for (const Partial& p : parts) mx = std::max(mx, p.lse);
        if (mx == kNegInfF) {
          lse = kNegInfF;
        } else {
          std::vector<int64_t> order(m.shards);
          for (int64_t r = 0; r < m.shards; ++r) order[r] = m.reverse_merge ? m.shards - 1 - r : r;
          float sum = 0.0f;
          std::vector<float> w(m.shards, 0.0f);
          const auto merge_round = [&](float x) {
            return static_cast<float>(oracle::round_to(m.merge_accum, x));
          };
          for (int64_t r : order) {
            w[r] = parts[r].lse == kNegInfF ? 0.0f : mex(parts[r].lse - mx);
            sum = static_cast<float>(oracle::round_to(m.merge_lse_accum, sum + w[r]));
          }
          lse = mx + mlg(sum);
          for (int64_t r : order) {
            if (w[r] == 0.0f) continue;  // an empty shard never contributes, not even NaN
            // ag_rs scales each partial by exp(L_r - L) and sums; a2a weights and normalizes.
            const float wr = m.merge == Merge::ag_rs ? mex(parts[r].lse - lse) : w[r];
            for (int64_t i = 0; i < dv; ++i) {
              const float term = merge_round(wr * parts[r].o[i]);
              o[i] = merge_round(o[i] + term);
            }
          }
          if (m.merge == Merge::a2a) {
            for (float& x : o) x /= sum;
          }
        }
      }
      // Report the LSE in the case's base.
      const bool report_base2 = m.bug == Bug::lse_out_wrong_base ? !want_base2 : want_base2;
      if (lse != kNegInfF && report_base2 != m.base2) lse = m.base2 ? lse * kLn2F : lse * kLog2eF;
      const int64_t row_id = t * Hq + h;
      for (int64_t i = 0; i < dv; ++i) {
        out.o.data[row_id * dv + i] = store(m.out, o[i], m);
      }
      out.lse.data[row_id] = lse;
    }
  }
  return out;
}

oracle::Arithmetic claim_of(const ModelConfig& m) {
  oracle::Arithmetic a;
  a.truncating_mma = m.truncate;  // the model's fp32 adds round to nearest unless truncating
  a.p_cast = m.p_cast;
  a.tf32 = m.tf32;
  a.ftz = m.ftz;
  a.out = m.out;
  a.shards = m.shards;
  if (m.shards > 1) a.layout = oracle::Ownership{m.shards, m.interleave, {}};
  a.tile = m.tile;
  a.dot_lanes = m.dot_lanes;
  if (m.merge == Merge::pairwise && m.shards > 1) a.merge_depth = m.shards - 1;
  a.merge_scaled = m.claim_scaled && m.merge == Merge::ag_rs;
  a.partial_o = m.partial;
  a.merge_accum = m.merge_accum;
  a.merge_lse_accum = m.merge_lse_accum;
  a.kv_dequant = m.dequantize_to;
  // The library's exp and log round to within 1 ulp and the perturbation adds at most one more
  // (the default budget of 2 ulp); a claimed error covers the approximation on top of them.
  if (m.exp_rel_err > 0.0) a.exp_rel_err = (1.0 + m.exp_rel_err) * (1.0 + kModelIntrinsicRel) - 1.0;
  // A random approximation's errors have mean zero: the exp's mean is the library's and the
  // perturbation's, within kModelIntrinsicRel (docs/tolerances.md §10); a systematic one's mean is
  // its whole error (not claimed: charged whole).
  if (m.exp_rel_err > 0.0 && !m.approx_systematic) a.exp_bias = kModelIntrinsicRel;
  if (m.log_rel_err > 0.0) a.log_rel_err = m.log_rel_err + kModelIntrinsicRel;
  if (m.merge_exp_rel_err)
    a.merge_exp_rel_err = (1.0 + *m.merge_exp_rel_err) * (1.0 + kModelIntrinsicRel) - 1.0;
  if (m.rescale_exp_rel_err)
    a.rescale_exp_rel_err = (1.0 + *m.rescale_exp_rel_err) * (1.0 + kModelIntrinsicRel) - 1.0;
  return a;
}

std::string describe(const ModelConfig& m) {
  std::ostringstream os;
  os << "shards=" << m.shards << " interleave=" << m.interleave << " tile=" << m.tile
     << " base2=" << m.base2 << " fma=" << m.fma << " pairwise=" << m.pairwise_dot
     << " dot_lanes=" << m.dot_lanes << " perturb=" << m.perturb << " truncate=" << m.truncate
     << " exp_rel_err=" << m.exp_rel_err << " log_rel_err=" << m.log_rel_err
     << " systematic=" << m.approx_systematic << " merge_exp_rel_err="
     << (m.merge_exp_rel_err ? std::to_string(*m.merge_exp_rel_err) : std::string("kernel's"))
     << " rescale_exp_rel_err="
     << (m.rescale_exp_rel_err ? std::to_string(*m.rescale_exp_rel_err) : std::string("kernel's"))
     << " p_cast=" << (m.p_cast ? dcp::oracle::dtype_name(*m.p_cast) : "none") << " tf32=" << m.tf32
     << " ftz=" << m.ftz
     << " dequantize_to=" << (m.dequantize_to ? dcp::oracle::dtype_name(*m.dequantize_to) : "exact")
     << " out=" << dcp::oracle::dtype_name(m.out)
     << " partial=" << dcp::oracle::dtype_name(m.partial)
     << " merge_accum=" << dcp::oracle::dtype_name(m.merge_accum)
     << " merge_lse_accum=" << dcp::oracle::dtype_name(m.merge_lse_accum) << " merge="
     << (m.merge == Merge::ag_rs ? "ag_rs"
         : m.merge == Merge::a2a ? "a2a"
                                 : "pairwise")
     << (m.claim_scaled ? " (claimed scaled)" : "") << " reverse=" << m.reverse_merge
     << " bug=" << (m.bug == Bug::none ? "none" : mutants::mutant_info(m.bug).name)
     << " seed=" << m.seed;
  return os.str();
}

}  // namespace dcp::props
