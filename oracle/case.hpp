// case.hpp — the case model: one decode-attention problem, the contract of the whole suite.
// docs/case-model.md states it in prose; this struct is its only encoding in oracle/.
//
//   q [T, Hq, Dk]   k [S, Hkv, Dk]   v [S, Hkv, Dv]     (or a shared latent: no v, V = k[..., :Dv])
//   q_pos [T] global positions (default S-T .. S-1);  GQA: query head h reads KV head h / (Hq/Hkv)
//   s = scale * q.k (scale default 1/sqrt(Dk));  softcap c > 0: s <- c tanh(s / c);
//   ALiBi slopes m_h: s <- s - m_h |j - q_pos[t]| for key position j
//   key j visible to query t iff 0 <= j < S, causal => j <= q_pos[t], window W > 0 =>
//   j > q_pos[t] - W, top-k given => j in topk[t];  sink sigma_h adds exp(sigma_h) to Z only.
//   Z = sum_visible exp(s) + exp(sigma_h);  O = sum_visible exp(s) v_j / Z;  LSE = ln Z or log2 Z
//   fp8 caches: k holds the dequantized keys k8 * k_scale (per tensor, KV head, token, or token
//   and KV head), exactly (4 significand bits times 24 fit a double), and likewise v; the oracle
//   takes them as exact.
//
//   Case c = ...;  DCP_TRY(validate(c));   // names the tensor and index of any violation
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "oracle/convention.hpp"
#include "oracle/dtype.hpp"
#include "oracle/kv_tensor.hpp"
#include "oracle/status.hpp"
#include "oracle/tensor.hpp"

namespace dcp::oracle {

struct Case {
  Tensor<double> q;  // [T, Hq, Dk], values exactly representable in q_dtype
  // Keys and values: held as doubles or as a file stores them (kv_tensor.hpp); read a row at a
  // time with k.row(j, g, buf), which gives the dequantized values either way.
  KvTensor k;  // [S, Hkv, Dk], k_scale_of(g) times values representable in kv_dtype
  KvTensor v;  // [S, Hkv, Dv], likewise with v_scale; empty (rank 0) for a shared latent
  DType q_dtype = DType::f32;
  DType kv_dtype = DType::f32;
  // The dequantization scales of K and V as stored (fp8 caches), finite fp32 values > 0, of
  // kv_scale_grain (kv_tensor.hpp): by head [1] per tensor or [Hkv] per KV head; by token [S] per
  // token or [S * Hkv] per token and KV head. Empty: none (1). A shared latent has no v_scale:
  // its V is K.
  std::vector<double> k_scale, v_scale;
  ScaleGrain kv_scale_grain = ScaleGrain::head;
  int64_t v_dim = 0;  // Dv; for a shared latent V is k[..., :v_dim]; else must equal v's last dim

  std::vector<int64_t> q_pos;   // [T] global query positions; empty means S-T .. S-1
  std::optional<double> scale;  // softmax scale; nullopt means 1/sqrt(Dk) (exact, irrational)
  bool causal = true;
  int64_t window = 0;        // W > 0: key j visible iff j > q_pos - W; 0: no window
  double softcap = 0.0;      // c > 0: s <- c tanh(s / c); 0: none
  std::vector<double> sink;  // [Hq] sink logits (natural-log units); empty: none
  // [Hq] ALiBi slopes m_h (natural-log units per position): key j's logit for a query at
  // position i loses m_h |j - i| after the softcap (m_h (j - i) where j <= i); empty: none
  std::vector<double> alibi_slopes;
  Tensor<int64_t> topk;  // [T, K] global key positions, -1 = padding; empty: none
  LseBase lse_base = LseBase::e;

  bool shared_latent() const { return v.empty(); }
  int64_t tokens() const { return q.dim(0); }    // T
  int64_t q_heads() const { return q.dim(1); }   // Hq
  int64_t head_dim() const { return q.dim(2); }  // Dk
  int64_t seq() const { return k.dim(0); }       // S
  int64_t kv_heads() const { return k.dim(1); }  // Hkv
  bool has_sink() const { return !sink.empty(); }
  bool has_topk() const { return !topk.empty(); }

  // Global position of query t (the default when q_pos is empty).
  int64_t query_pos(int64_t t) const { return q_pos.empty() ? seq() - tokens() + t : q_pos[t]; }
  // The KV head query head h reads: h / (Hq / Hkv), on global head indices.
  int64_t kv_head_of(int64_t h) const { return h / (q_heads() / kv_heads()); }
  // The scale of key j's stored key and value at KV head g (1 without one).
  double k_scale_of(int64_t j, int64_t g) const { return scale_at(k_scale, j, g); }
  double v_scale_of(int64_t j, int64_t g) const {
    return shared_latent() ? k_scale_of(j, g) : scale_at(v_scale, j, g);
  }
  // The scale of element i of k, or of v ([S, Hkv, D] row-major): its key's and KV head's.
  double k_scale_at(int64_t i) const {
    const int64_t r = i / k.dim(2);
    return k_scale_of(r / k.dim(1), r % k.dim(1));
  }
  double v_scale_at(int64_t i) const {
    const int64_t r = i / v.dim(2);
    return v_scale_of(r / v.dim(1), r % v.dim(1));
  }
  // Whether the scales differ from key to key (kernels then apply them per key, inside the sums).
  bool scales_per_token() const {
    return kv_scale_grain == ScaleGrain::token && !(k_scale.empty() && v_scale.empty());
  }
  // V value of key j, KV head g, component i (from k for a shared latent).
  double v_at(int64_t j, int64_t g, int64_t i) const {
    return shared_latent() ? k.at({j, g, i}) : v.at({j, g, i});
  }
  // The V row of key j, KV head g (at least v_dim values; k's row for a shared latent), as
  // KvTensor::row: buf holds a row of k or v.
  const double* v_row(int64_t j, int64_t g, double* buf) const {
    return shared_latent() ? k.row(j, g, buf) : v.row(j, g, buf);
  }

 private:
  double scale_at(const std::vector<double>& s, int64_t j, int64_t g) const {
    return s.empty() ? 1.0 : s[scale_index(kv_scale_grain, s.size(), j, g, seq(), kv_heads())];
  }
};

// The case's per-head vectors: each an F32 tensor [Hq] of finite values in a case file, under
// its name (case_file.cpp reads and writes them, validate checks them, from this list alone).
struct HeadVector {
  const char* name;                   // the case file's tensor
  std::vector<double> Case::*values;  // empty: the case does not use it
  // Each value is a rate per position, multiplied by query-key distances up to D: validate keeps
  // |value| D within half of fp32's range, so a kernel's product stays finite.
  bool per_position = false;
};
inline constexpr HeadVector kHeadVectors[] = {{"sink", &Case::sink},
                                              {"alibi_slopes", &Case::alibi_slopes, true}};

// The variant's logit of key position j for query position i, query head h, from the scaled
// product s = scale * q.k (natural-log units): the softcap, then ALiBi's bias. One definition for
// every arithmetic that evaluates it: the double-double and MPFR tiers, the bounds' doubles, the
// fp32 model's floats (each a Real with +, *, / and an unqualified tanh).
template <class Real>
Real variant_logit(const Case& c, Real s, int64_t h, int64_t i, int64_t j) {
  using std::tanh;
  if (c.softcap > 0.0) {
    const Real cap = static_cast<Real>(c.softcap);
    s = cap * tanh(s / cap);
  }
  if (!c.alibi_slopes.empty()) {
    s = s - static_cast<Real>(c.alibi_slopes[static_cast<size_t>(h)]) *
                static_cast<Real>(static_cast<double>(j < i ? i - j : j - i));
  }
  return s;
}

// Whether the variant's logit is the scaled product itself (no transform: an arithmetic may fold
// the base's log2(e) into the scale).
inline bool plain_logit(const Case& c) { return !(c.softcap > 0.0) && c.alibi_slopes.empty(); }

// Checks shapes, dtypes, finiteness, positions and top-k indices. The message names the tensor,
// the index and what was expected.
Status validate(const Case& c);

// Key positions visible to query t, ascending, per the case model (mask on global positions).
std::vector<int64_t> visible_keys(const Case& c, int64_t t);

}  // namespace dcp::oracle
