#include "oracle/mla.hpp"

#include <algorithm>
#include <cmath>

#include "oracle/attention.hpp"

namespace dcp::oracle {
namespace {

// RoPE angle error budget, relative: the inverse frequency theta^(-2i/Dr) from an fp32
// exponent (1 u) through powf (2 u, plus ln(theta) u from the exponent's rounding) and one fp32
// product with the position (1 u): (4 + ln theta) u, doubled for margin.
double angle_rel(double theta, double u) { return 2.0 * (4.0 + std::log(theta)) * u; }
// sinf/cosf absolute error on any argument: 2 ulp of a value <= 1 (CUDA sinf/cosf; glibc < 1).
const double kTrigAbs = std::ldexp(1.0, -22);
// Decompression and sums of the bound evaluated in double: relative 2^-45 of the absolute sums
// covers the products and sums of length up to 2^7 at 2^-53 each, with margin.
const double kDoubleRel = std::ldexp(1.0, -45);

// The exact rotation angle of pair i at position pos: pos * theta^(-2 i / Dr).
double rope_angle(int64_t pos, int64_t i, int64_t dr, double theta) {
  return static_cast<double>(pos) * std::pow(theta, -2.0 * double(i) / double(dr));
}

// Exact NeoX rotation of pairs (i, i + Dr/2) in double.
void rotate(double* x, int64_t dr, int64_t pos, double theta) {
  const int64_t half = dr / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double ang = rope_angle(pos, i, dr, theta);
    const double c = std::cos(ang), s = std::sin(ang), x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

// Error bound of the fp32 rotation of one pair component, given |x1|, |x2| bounds (values plus
// their own error e1, e2) at position pos.
double rope_err(double ax1, double ax2, double e1, double e2, int64_t i, int64_t dr, int64_t pos,
                double theta, double u) {
  const double d_trig =
      angle_rel(theta, u) * rope_angle(pos, i, dr, theta) + kTrigAbs;  // |c~ - c|, |s~ - s|
  // y = x1 c -/+ x2 s: input errors, trig errors, two products and one sum (gamma_2).
  return e1 + e2 + (ax1 + ax2 + e1 + e2) * d_trig + gamma_n(2.0, u) * (ax1 + ax2 + e1 + e2);
}

}  // namespace

Case unabsorbed_case(const MlaCase& m) {
  const int64_t T = m.tokens(), H = m.heads(), Dc = m.q_lora(), Dn = m.nope(), Dr = m.rope(),
                Dl = m.kv_lora(), Dv = m.v_head(), S = m.seq(), dq = Dn + Dr;
  Case c;
  c.q_dtype = DType::f64;
  c.kv_dtype = DType::f64;
  c.q = Tensor<double>({T, H, dq});
  c.k = Tensor<double>({S, H, dq});
  c.v = Tensor<double>({S, H, Dv});
  c.v_dim = Dv;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double* q = c.q.data.data() + c.q.offset({t, h, 0});
      for (int64_t i = 0; i < dq; ++i) {
        double acc = 0.0;
        for (int64_t k = 0; k < Dc; ++k) acc += m.w_qb.at({h, i, k}) * m.c_q.at({t, k});
        q[i] = acc;
      }
      if (m.apply_rope) rotate(q + Dn, Dr, m.q_pos[t], m.rope_theta);
    }
  for (int64_t j = 0; j < S; ++j)
    for (int64_t h = 0; h < H; ++h) {
      double* k = c.k.data.data() + c.k.offset({j, h, 0});
      for (int64_t n = 0; n < Dn; ++n) {
        double acc = 0.0;
        for (int64_t l = 0; l < Dl; ++l) acc += m.w_kc.at({h, n, l}) * m.c_kv.at({j, l});
        k[n] = acc;
      }
      for (int64_t r = 0; r < Dr; ++r) k[Dn + r] = m.k_pe.at({j, r});
      if (m.apply_rope) rotate(k + Dn, Dr, j, m.rope_theta);
      for (int64_t e = 0; e < Dv; ++e) {
        double acc = 0.0;
        for (int64_t l = 0; l < Dl; ++l) acc += m.c_kv.at({j, l}) * m.w_vc.at({h, l, e});
        c.v.at({j, h, e}) = acc;
      }
    }
  c.q_pos = m.q_pos;
  c.scale = m.scale;
  c.causal = m.causal;
  c.lse_base = m.lse_base;
  return c;
}

Expected<Bound> derive_mla_bound(const MlaCase& m, const Tensor<double>& q_att,
                                 const Tensor<double>& k_att, const Arithmetic& a) {
  const int64_t T = m.tokens(), H = m.heads(), Dc = m.q_lora(), Dn = m.nope(), Dr = m.rope(),
                Dl = m.kv_lora(), Dv = m.v_head(), S = m.seq(), dk = Dl + Dr, dq = Dn + Dr;
  const double u = unit_roundoff(a.accum), u_kv = unit_roundoff(m.kv_dtype);
  if (!(u_kv > 0.0))  // the rotated k_pe is rounded to kv_dtype: relative u_kv, a float format's
    return DCP_ERROR("mla: kv_dtype ", dtype_name(m.kv_dtype), "; expected a float format");
  if (q_att.shape != Shape{T, H, dk} || k_att.shape != Shape{S, dk})
    return DCP_ERROR("mla: q_att ", shape_string(q_att.shape), " / k_att ",
                     shape_string(k_att.shape), "; expected [", T, ", ", H, ", ", dk, "] / [", S,
                     ", ", dk, "]");

  // Stage 1: the attention the production kernels ran, on the inputs they read.
  Case att;
  att.q_dtype = DType::f32;
  att.kv_dtype = DType::f32;
  att.q = q_att;
  att.k = Tensor<double>({S, 1, dk});
  att.k.data = k_att.data;
  att.v_dim = Dl;
  att.q_pos = m.q_pos;
  att.scale = m.scale;
  att.causal = m.causal;
  att.lse_base = m.lse_base;
  Arithmetic a_lat = a;
  a_lat.out = a.out;  // O_lat as the step stores it, before the V absorb
  Expected<Attention> r_att = reference(att);
  if (!r_att) return r_att.status();
  Expected<Bound> b_att = derive_bound(att, *r_att, a_lat);
  if (!b_att) return b_att.status();

  // Stage 2: exact absorbed inputs, and a priori bounds on the production's distance to them.
  Tensor<double> qh({T, H, dk}), dqb({T, H, dk}), kh({S, dk}), dkb({S, dk});
  Tensor<double> qn_abs({T, H, Dn});  // |q_nope| + its error: weights the decompressed keys' error
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> q(dq), e(dq);  // exact q_b_proj output and its fp32 error bound
      for (int64_t i = 0; i < dq; ++i) {
        double acc = 0.0, mag = 0.0;
        for (int64_t k = 0; k < Dc; ++k) {
          acc += m.w_qb.at({h, i, k}) * m.c_q.at({t, k});
          mag += std::fabs(m.w_qb.at({h, i, k}) * m.c_q.at({t, k}));
        }
        q[i] = acc;
        e[i] = gamma_n(double(Dc), u) * mag + kDoubleRel * mag;
      }
      for (int64_t n = 0; n < Dn; ++n) qn_abs.at({t, h, n}) = std::fabs(q[n]) + e[n];
      for (int64_t l = 0; l < Dl; ++l) {
        double acc = 0.0, mag = 0.0, prop = 0.0;
        for (int64_t n = 0; n < Dn; ++n) {
          const double w = m.w_kc.at({h, n, l});
          acc += q[n] * w;
          mag += (std::fabs(q[n]) + e[n]) * std::fabs(w);
          prop += e[n] * std::fabs(w);
        }
        qh.at({t, h, l}) = acc;
        dqb.at({t, h, l}) = prop + gamma_n(double(Dn), u) * mag + kDoubleRel * mag;
      }
      for (int64_t r = 0; r < Dr; ++r) {
        qh.at({t, h, Dl + r}) = q[Dn + r];
        dqb.at({t, h, Dl + r}) = e[Dn + r];
      }
      if (m.apply_rope) {
        double* qp = qh.data.data() + qh.offset({t, h, Dl});
        double* ep = dqb.data.data() + dqb.offset({t, h, Dl});
        std::vector<double> e_rot(Dr);
        for (int64_t i = 0; i < Dr / 2; ++i) {
          const double er = rope_err(std::fabs(qp[i]), std::fabs(qp[i + Dr / 2]), ep[i],
                                     ep[i + Dr / 2], i, Dr, m.q_pos[t], m.rope_theta, u);
          e_rot[i] = e_rot[i + Dr / 2] = er;
        }
        rotate(qp, Dr, m.q_pos[t], m.rope_theta);
        for (int64_t r = 0; r < Dr; ++r) ep[r] = e_rot[r];
      }
    }
  for (int64_t j = 0; j < S; ++j) {
    for (int64_t l = 0; l < Dl; ++l) kh.at({j, l}) = m.c_kv.at({j, l});  // stored exactly
    double* kp = kh.data.data() + kh.offset({j, Dl});
    double* ep = dkb.data.data() + dkb.offset({j, Dl});
    for (int64_t r = 0; r < Dr; ++r) kp[r] = m.k_pe.at({j, r});
    if (m.apply_rope) {
      std::vector<double> e_rot(Dr);
      for (int64_t i = 0; i < Dr / 2; ++i)
        e_rot[i] = e_rot[i + Dr / 2] = rope_err(std::fabs(kp[i]), std::fabs(kp[i + Dr / 2]), 0.0,
                                                0.0, i, Dr, j, m.rope_theta, u);
      rotate(kp, Dr, j, m.rope_theta);
      // The rotated fp32 value is rounded to the cache format.
      for (int64_t r = 0; r < Dr; ++r) ep[r] = e_rot[r] + u_kv * (std::fabs(kp[r]) + e_rot[r]);
    }
  }

  // The reference decompresses K_nope = w_kc c_kv and V = c_kv w_vc in double: each element is
  // within kDoubleRel of its absolute sum, which these hold.
  Tensor<double> kn_abs({S, H, Dn}), cv_abs({S, H, Dv});
  for (int64_t j = 0; j < S; ++j)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t n = 0; n < Dn; ++n) {
        double acc = 0.0;
        for (int64_t l = 0; l < Dl; ++l) acc += std::fabs(m.w_kc.at({h, n, l}) * m.c_kv.at({j, l}));
        kn_abs.at({j, h, n}) = acc;
      }
      for (int64_t e = 0; e < Dv; ++e) {
        double acc = 0.0;
        for (int64_t l = 0; l < Dl; ++l) acc += std::fabs(m.c_kv.at({j, l}) * m.w_vc.at({h, l, e}));
        cv_abs.at({j, h, e}) = acc;
      }
    }

  // Per row: the exact weights and output, and Delta = max over visible keys of the logit's
  // possible distance (queries, keys, and the fp32 scale against the exact product).
  Case exact = att;
  exact.q_dtype = DType::f64;
  exact.kv_dtype = DType::f64;
  exact.q = qh;
  exact.k.data = kh.data;
  Expected<Attention> r_exact = reference(exact);
  if (!r_exact) return r_exact.status();
  // The statistical tier (§10): stage 1's statistical bound in place of its sound one. Stages 2
  // and 3 are a priori worst cases, so the sum holds with stage 1's probability.
  const Tensor<double>& att_o_stat = b_att->o_stat.data.empty() ? b_att->o : b_att->o_stat;
  const Tensor<double>& att_lse_stat = b_att->lse_stat.data.empty() ? b_att->lse : b_att->lse_stat;
  Bound out;
  out.o = Tensor<double>({T, H, Dv});
  out.lse = Tensor<double>({T, H});
  out.o_stat = Tensor<double>({T, H, Dv});
  out.lse_stat = Tensor<double>({T, H});
  out.kappa = b_att->kappa;
  const double lse_unit = m.lse_base == LseBase::two ? kLog2e : 1.0;
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int64_t> keys = visible_keys(exact, t);
    for (int64_t h = 0; h < H; ++h) {
      const double L = lse_to_natural(r_exact->base, r_exact->lse.at({t, h}));
      double delta = 0.0;
      std::vector<double> p(keys.size());
      for (size_t x = 0; x < keys.size(); ++x) {
        const int64_t j = keys[x];
        double s = 0.0, d = 0.0, mag = 0.0;
        for (int64_t i = 0; i < dk; ++i) {
          const double qv = qh.at({t, h, i}), kv = kh.at({j, i});
          const double eq = dqb.at({t, h, i}), ek = dkb.at({j, i});
          s += qv * kv;
          d += eq * (std::fabs(kv) + ek) + std::fabs(qv) * ek;
          mag += std::fabs(qv * kv);
        }
        for (int64_t n = 0; n < Dn; ++n) mag += qn_abs.at({t, h, n}) * kn_abs.at({j, h, n});
        s *= m.scale;
        delta = std::max(delta, m.scale * (d + kDoubleRel * mag));
        p[x] = L == kNegInf ? 0.0 : std::exp(s - L);
      }
      const double grow = std::expm1(2.0 * delta);
      // O_lat bound per latent component (each tier's stage 1), then through the fp32 V absorb.
      std::vector<double> e_lat(Dl), e_lat_stat(Dl);
      for (int64_t l = 0; l < Dl; ++l) {
        const double o = r_exact->o.at({t, h, l});
        double spread = 0.0;
        for (size_t x = 0; x < keys.size(); ++x)
          spread += p[x] * std::fabs(kh.at({keys[x], l}) - o);
        e_lat[l] = b_att->o.at({t, h, l}) + grow * spread;
        e_lat_stat[l] = att_o_stat.at({t, h, l}) + grow * spread;
      }
      // Stage 3 for output component e from the O_lat bounds `el`.
      const auto absorbed = [&](int64_t e, const std::vector<double>& el) {
        double prop = 0.0, mag = 0.0, exact_out = 0.0;
        for (size_t x = 0; x < keys.size(); ++x) mag += p[x] * cv_abs.at({keys[x], h, e});
        for (int64_t l = 0; l < Dl; ++l) {
          const double w = std::fabs(m.w_vc.at({h, l, e}));
          const double o = std::fabs(r_exact->o.at({t, h, l}));
          prop += w * el[l];
          mag += w * (o + el[l]);
          exact_out += w * o;
        }
        return prop + gamma_n(double(Dl), u) * mag + unit_roundoff(a.out) * (exact_out + prop) +
               kDoubleRel * mag + unit_roundoff(a.out) * min_normal(a.out);
      };
      for (int64_t e = 0; e < Dv; ++e) {
        out.o.at({t, h, e}) = absorbed(e, e_lat);
        out.o_stat.at({t, h, e}) = absorbed(e, e_lat_stat);
      }
      const double lse_exact = std::fabs(r_exact->lse.at({t, h}));
      const double lse_rest = delta * lse_unit + kDoubleRel * (lse_exact + 1.0);
      out.lse.at({t, h}) = L == kNegInf ? 0.0 : b_att->lse.at({t, h}) + lse_rest;
      out.lse_stat.at({t, h}) = L == kNegInf ? 0.0 : att_lse_stat.at({t, h}) + lse_rest;
    }
  }
  return out;
}

}  // namespace dcp::oracle
