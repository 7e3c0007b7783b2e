#include "properties/case_gen.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

namespace dcp::props {
namespace {

using dcp::oracle::DType;
using dcp::oracle::round_to;

constexpr double kPeakedGain = 6.0;  // q multiplier that makes one aligned key dominate
constexpr double kWideGain = 12.0;   // spreads logits over tens of units
constexpr double kTinyExp = -130.0;  // log2 of the smallest magnitudes drawn for "tiny"
// |logit offset| for "extreme": e^100 overflows fp32 (largest finite e^88.72) and so does
// 2^(100 log2 e) = 2^144 (largest 2^128), so exp or exp2 of an unshifted logit or LSE is inf;
// e^-100 = 3.7e-44 is an fp32 subnormal with 5 significant bits, so a running max that starts
// at 0 instead of -inf loses the weights. (At 80 neither happens: e^80 is finite and e^-80
// still normal, and two planted bugs survived.) q stays finite in f16: 100 sqrt(Dk) << 65504.
constexpr double kExtremeLogit = 100.0;
// |logit offset| of one "extreme" case in eight where the spec allows it (huge_logits): below the
// finite sentinel many kernels write for a masked logit (-1e4), so a masked key given that
// sentinel instead of -inf outweighs every real key. As far as the oracle can judge: a logit's
// own roundings (the dot product's, the scale's, the base's) reach a few Dk u |s|, and the
// oracle's first-order bound refuses a weight error past 0.1, so the offset is at most
// kHugeLogitDk / Dk: 1.2e4 up to Dk = 10, less above. (FlashInfer's -5e4 stays out of reach.)
constexpr double kHugeLogit = 1.2e4, kHugeLogitDk = 1.2e5;

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(g); }
  int64_t below(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(g); }
  bool coin(double p) { return std::bernoulli_distribution(p)(g); }
};

// An fp8 cache's scales: amax / (the format's largest value) for N(0, 1) data taken to reach
// |x| = 4, times a random factor in [1, 2), rounded to fp32 (so seldom a power of two).
constexpr double kDrawnAmax = 4.0;

void fill(std::vector<double>& data, DType dtype, ValueStyle style, Rng& rng) {
  for (double& x : data) {
    double v = rng.normal();
    if (style == ValueStyle::tiny && rng.coin(0.3)) {
      v = std::ldexp(v, static_cast<int>(kTinyExp + static_cast<double>(rng.below(12))));
    }
    x = round_to(dtype, v);
  }
}

// Values drawn a block at a time when K and V are generated as stored bytes.
constexpr int64_t kFillBlock = 1 << 16;

// K or V of `shape` as fill() draws them (the same values in the same order), held as dtype's
// bytes: never an array of doubles of the whole tensor. nullopt when `stop` (polled before each
// block) says so.
std::optional<dcp::oracle::KvTensor> fill_stored(dcp::oracle::Shape shape, DType dtype,
                                                 ValueStyle style, Rng& rng,
                                                 const std::function<bool()>& stop) {
  const int64_t n = dcp::oracle::numel_of(shape), e = dcp::oracle::dtype_bytes(dtype);
  auto held = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n * e));
  std::vector<double> block;
  for (int64_t i0 = 0; i0 < n; i0 += kFillBlock) {
    if (stop && stop()) return std::nullopt;
    block.resize(static_cast<size_t>(std::min(kFillBlock, n - i0)));
    fill(block, dtype, style, rng);
    dcp::oracle::narrow_to_stored(dtype, block.data(), static_cast<int64_t>(block.size()),
                                  held->data() + i0 * e);
  }
  const uint8_t* bytes = held->data();
  return dcp::oracle::KvTensor::stored(std::move(shape), dtype, bytes, std::move(held), {});
}

// K or V of `shape` drawn by fill(), held as asked: stored bytes straight from the draws where
// nothing rewrites them later (ties and extreme rewrite keys; a scale quantizes them), else
// doubles (make_case stores those at its end).
std::optional<dcp::oracle::KvTensor> draw_kv(dcp::oracle::Shape shape, const CaseSpec& s,
                                             KvHolding holding, Rng& rng,
                                             const std::function<bool()>& stop) {
  const bool rewritten = s.values == ValueStyle::ties || s.values == ValueStyle::extreme ||
                         s.kv_scale != KvScale::none;
  if (holding == KvHolding::stored && !rewritten)
    return fill_stored(std::move(shape), s.kv_dtype, s.values, rng, stop);
  dcp::oracle::KvTensor t(std::move(shape));
  fill(t.data, s.kv_dtype, s.values, rng);
  return t;
}

}  // namespace

dcp::oracle::Case make_case(const CaseSpec& s, KvHolding holding) {
  return std::move(*make_case_unless(s, holding, nullptr));  // never stopped
}

std::optional<dcp::oracle::Case> make_case_unless(const CaseSpec& s, KvHolding holding,
                                                  const std::function<bool()>& stop) {
  Rng rng(s.seed);
  dcp::oracle::Case c;
  const int64_t T = s.tokens, Hq = s.q_heads, Hkv = s.kv_heads, Dk = s.head_dim, S = s.seq;
  c.q_dtype = s.q_dtype;
  c.kv_dtype = s.kv_dtype;
  c.q = dcp::oracle::Tensor<double>({T, Hq, Dk});
  fill(c.q.data, s.q_dtype, s.values, rng);
  auto k = draw_kv({S, Hkv, Dk}, s, holding, rng, stop);
  if (!k) return std::nullopt;
  c.k = std::move(*k);
  if (s.shared_latent) {
    c.v_dim = std::min(s.v_dim, Dk);
  } else {
    auto v = draw_kv({S, Hkv, s.v_dim}, s, holding, rng, stop);
    if (!v) return std::nullopt;
    c.v = std::move(*v);
    c.v_dim = s.v_dim;
  }
  if (s.values == ValueStyle::ties && S > 1) {
    // Repeat a few keys (and their values), so equal logits appear.
    for (int64_t j = 1; j < S; ++j) {
      if (!rng.coin(0.5)) continue;
      const int64_t src = rng.below(j);
      for (int64_t g = 0; g < Hkv; ++g) {
        for (int64_t d = 0; d < Dk; ++d) c.k.at({j, g, d}) = c.k.at({src, g, d});
        if (!s.shared_latent) {
          for (int64_t d = 0; d < s.v_dim; ++d) c.v.at({j, g, d}) = c.v.at({src, g, d});
        }
      }
    }
  }
  if (s.values == ValueStyle::peaked || s.values == ValueStyle::wide) {
    const double gain = s.values == ValueStyle::peaked ? kPeakedGain : kWideGain;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < Hq; ++h) {
        // Align q with one random key of its KV head, then scale: that key dominates the row.
        const int64_t j = S > 0 ? rng.below(S) : 0;
        const int64_t g = h / (Hq / Hkv);
        for (int64_t d = 0; d < Dk; ++d) {
          const double base = S > 0 && s.values == ValueStyle::peaked
                                  ? std::as_const(c.k).at({j, g, d})
                                  : c.q.at({t, h, d});
          c.q.at({t, h, d}) = round_to(s.q_dtype, gain * base / std::sqrt(std::sqrt(double(Dk))));
        }
      }
    }
  }
  if (s.explicit_scale) c.scale = round_to(DType::f32, 0.5 / std::sqrt(double(Dk)) + 0.01);
  double sink_offset = 0.0;
  if (s.values == ValueStyle::extreme) {
    // Component 0 of every key is k0 and of every query B / (scale k0): all logits move by about
    // B. k0 is 1, or the power of two that keeps q's component within half its format's range
    // (fp8 E4M3 ends at 448).
    const double tau = c.scale ? *c.scale : 1.0 / std::sqrt(double(Dk));
    const double b = rng.coin(0.5) ? kExtremeLogit
                     : s.huge_logits && rng.coin(0.25)
                         ? -std::min(kHugeLogit, kHugeLogitDk / double(Dk))
                         : -kExtremeLogit;
    // A sink beside logits near +100 is as large (e^101 overflows fp32: a kernel must shift the
    // sink by the running max too); beside logits near -100 it stays near 1, far above them.
    if (b > 0) sink_offset = b;
    double k0 = 1.0;
    while (std::fabs(b / (tau * k0)) > dcp::oracle::max_finite(s.q_dtype) / 2) k0 *= 2.0;
    for (int64_t j = 0; j < S; ++j)
      for (int64_t g = 0; g < Hkv; ++g) c.k.at({j, g, 0}) = k0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < Hq; ++h) c.q.at({t, h, 0}) = round_to(s.q_dtype, b / (tau * k0));
  }
  if (s.explicit_pos) {
    c.q_pos.resize(T);
    for (int64_t t = 0; t < T; ++t) c.q_pos[t] = rng.below(S + 2);
  } else if (S < T) {
    c.q_pos.resize(T);
    for (int64_t t = 0; t < T; ++t) c.q_pos[t] = t;
  }
  c.causal = s.causal;
  c.window = s.window;
  c.softcap = s.softcap;
  if (s.sink) {
    c.sink.resize(Hq);
    for (double& x : c.sink) x = round_to(DType::f32, rng.normal() + 1.0 + sink_offset);
  }
  if (s.topk > 0) {
    c.topk = dcp::oracle::Tensor<int64_t>({T, s.topk}, -1);
    std::vector<int64_t> perm(S);
    for (int64_t t = 0; t < T; ++t) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng.g);
      const int64_t take = std::min(s.topk, S);
      for (int64_t x = 0; x < take; ++x) {
        // Some slots stay -1 (padding), as real top-k outputs do for short rows.
        if (rng.coin(0.9)) c.topk.at({t, x}) = perm[x];
      }
    }
  }
  c.lse_base = s.lse_base;
  if (s.kv_scale != KvScale::none) {
    // Quantize last, so every value style's keys are the stored values times their scale.
    const double fmt_max = dcp::oracle::max_finite(s.kv_dtype);
    const bool by_token = scales_by_token(s.kv_scale), by_page = scales_by_page(s.kv_scale);
    const int64_t heads = scales_per_kv_head(s.kv_scale) ? Hkv : 1;
    // Drawn: one a tensor, KV head, token or (rank, page), times the KV heads where per head.
    const ScalePages& pg = s.scale_pages;
    const int64_t groups = !by_token ? 1
                           : by_page
                               ? (S > 0 ? ((S - 1) / (pg.ranks * pg.page_size) + 1) * pg.ranks : 0)
                               : S;
    c.kv_scale_grain = by_token ? dcp::oracle::ScaleGrain::token : dcp::oracle::ScaleGrain::head;
    auto draw_scales = [&] {
      std::vector<double> sc(static_cast<size_t>(groups * heads));
      for (double& x : sc)
        x = round_to(DType::f32,
                     kDrawnAmax / fmt_max * (1.0 + std::ldexp(rng.below(1 << 20), -20)));
      if (!by_page) return sc;
      std::vector<double> by_pos(static_cast<size_t>(S * heads));  // each token its page's
      for (int64_t p = 0; p < S; ++p)
        for (int64_t h = 0; h < heads; ++h)
          by_pos[static_cast<size_t>(p * heads + h)] =
              sc[static_cast<size_t>(pg.group(p) * heads + h)];
      return by_pos;
    };
    // Saturated to the format's range, as engines quantize.
    auto quantize = [&](double x, double scale) {
      return round_to(s.kv_dtype, std::clamp(x / scale, -fmt_max, fmt_max)) * scale;
    };
    c.k_scale = draw_scales();
    for (int64_t i = 0; i < c.k.numel(); ++i) c.k.data[i] = quantize(c.k.data[i], c.k_scale_at(i));
    if (!s.shared_latent) {
      c.v_scale = draw_scales();
      for (int64_t i = 0; i < c.v.numel(); ++i)
        c.v.data[i] = quantize(c.v.data[i], c.v_scale_at(i));
    }
  }
  if (s.alibi) {  // drawn last: every other value is the one it was without it
    c.alibi_slopes.resize(static_cast<size_t>(Hq));
    for (int64_t h = 0; h < Hq; ++h)
      c.alibi_slopes[h] =
          round_to(DType::f32, std::exp2(-8.0 * double(h + 1) / double(Hq)) *
                                   (0.5 + 1.5 * std::ldexp(double(rng.below(1 << 20)), -20)));
  }
  if (holding == KvHolding::stored) {
    if (!c.k.is_stored()) c.k = c.k.to_stored(s.kv_dtype, c.k_scale, c.kv_scale_grain);
    if (!s.shared_latent && !c.v.is_stored())
      c.v = c.v.to_stored(s.kv_dtype, c.v_scale, c.kv_scale_grain);
  }
  return c;
}

std::vector<dcp::oracle::Case> make_batch_cases(const CaseSpec& spec,
                                                const std::vector<int64_t>& seqs,
                                                const std::vector<int64_t>& tokens,
                                                int64_t shared_prefix) {
  std::vector<dcp::oracle::Case> out;
  for (size_t b = 0; b < seqs.size(); ++b) {
    CaseSpec sb = spec;
    // The batch shares request 0's scales (batch.hpp): scales by token are not shared, so a
    // batch takes them per tensor or per KV head.
    sb.kv_scale = scales_by_head(sb.kv_scale);
    sb.seq = seqs[b];
    sb.tokens = b < tokens.size() ? tokens[b] : spec.tokens;
    sb.seed = spec.seed + b;
    dcp::oracle::Case c = make_case(sb);
    if (b > 0) {
      const dcp::oracle::Case& c0 = out.front();
      for (const dcp::oracle::HeadVector& hv : dcp::oracle::kHeadVectors)
        c.*hv.values = c0.*hv.values;  // the model's per-head vectors are one for the batch
      // Request 0's scales over this request's stored elements (value / own scale, exact).
      const auto rescale = [](dcp::oracle::KvTensor& x, const std::vector<double>& own,
                              const std::vector<double>& to) {
        if (own.empty()) return;
        const int64_t width = x.shape[2], heads = x.shape[1];
        for (int64_t i = 0; i < x.numel(); ++i) {
          const size_t g = own.size() == 1 ? 0 : static_cast<size_t>(i / width % heads);
          x.data[static_cast<size_t>(i)] = x.data[static_cast<size_t>(i)] / own[g] * to[g];
        }
      };
      rescale(c.k, c.k_scale, c0.k_scale);
      if (!c.shared_latent()) rescale(c.v, c.v_scale, c0.v_scale);
      c.k_scale = c0.k_scale;
      c.v_scale = c0.v_scale;
      // The shared prefix: request 0's keys and values.
      // (At most the shorter of the two: shared_prefix is every request's by contract.)
      const int64_t shared = std::min({shared_prefix, seqs[0], seqs[b]});
      const auto share = [&](dcp::oracle::KvTensor& x, const dcp::oracle::KvTensor& x0) {
        const int64_t row = x.shape[1] * x.shape[2];
        std::copy_n(x0.data.begin(), std::max<int64_t>(0, shared) * row, x.data.begin());
      };
      share(c.k, c0.k);
      if (!c.shared_latent()) share(c.v, c0.v);
    }
    out.push_back(std::move(c));
  }
  return out;
}

const FeatureInfo* find_feature(std::string_view name) {
  for (const FeatureInfo& f : kFeatures)
    if (name == f.name) return &f;
  return nullptr;
}

std::string feature_names() {
  std::string s;
  const size_t n = std::size(kFeatures);
  for (size_t i = 0; i < n; ++i)
    s += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + kFeatures[i].name;
  return s;
}

std::string describe(const CaseSpec& s) {
  std::ostringstream os;
  static const char* styles[] = {"normal", "peaked", "wide", "ties", "tiny", "extreme"};
  os << "T=" << s.tokens << " Hq=" << s.q_heads << " Hkv=" << s.kv_heads << " Dk=" << s.head_dim
     << " Dv=" << s.v_dim << " S=" << s.seq << (s.shared_latent ? " latent" : "")
     << " q=" << dcp::oracle::dtype_name(s.q_dtype) << " kv=" << dcp::oracle::dtype_name(s.kv_dtype)
     << (s.kv_scale != KvScale::none ? std::string(" kv_scale=") + kv_scale_name(s.kv_scale)
                                     : std::string())
     << (scales_by_page(s.kv_scale) ? " pages=" + std::to_string(s.scale_pages.ranks) + "x" +
                                          std::to_string(s.scale_pages.interleave) + "x" +
                                          std::to_string(s.scale_pages.page_size)
                                    : std::string())
     << " causal=" << s.causal << (s.explicit_pos ? " q_pos=random" : "") << " window=" << s.window
     << " softcap=" << s.softcap << " sink=" << s.sink << (s.alibi ? " alibi" : "")
     << " topk=" << s.topk << " base=" << dcp::oracle::lse_base_name(s.lse_base)
     << (s.explicit_scale ? " scale=explicit" : "") << " values=" << styles[int(s.values)]
     << " seed=" << s.seed;
  return os.str();
}

}  // namespace dcp::props
