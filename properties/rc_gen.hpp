// rc_gen.hpp — RapidCheck generators of case specs and fp32-model configurations.
//
// Specs are built constructively (no filtering, so no discards): the KV head count first, then a
// multiple of it for the query heads, and so on. Every field shrinks toward the simplest case.
//
//   RC_GTEST_PROP(Suite, Name, ()) {
//     const CaseSpec spec = *gen_case_spec(SpecLimits{});
//     const Case c = make_case(spec);
//   }
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>

#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/fp32_model.hpp"

namespace dcp::props {

using dcp::oracle::quantized_dtypes;
// rc::gen::weightedElement over weights and elements listed at run time (a table's rows): the
// same draws as the initializer-list form with the same pairs.
template <class T>
rc::Gen<T> weighted_element(std::vector<std::pair<size_t, T>> pairs) {
  std::vector<size_t> weights;
  std::vector<T> elements;
  for (auto& [w, e] : pairs) weights.push_back(w), elements.push_back(std::move(e));
  return rc::gen::detail::WeightedElementGen<T>(std::move(weights), std::move(elements));
}
// The fp8 dtypes, in the table's order (oracle/dtype.hpp), as T: DType or std::optional<DType>.
template <class T>
std::vector<T> fp8_dtypes() {
  std::vector<T> out;
  for (const dcp::oracle::DType d : quantized_dtypes())
    if (dcp::oracle::is_fp8(d)) out.push_back(T(d));
  return out;
}

struct SpecLimits {
  int64_t max_tokens = 3;
  int64_t max_kv_heads = 2;
  int64_t max_group = 3;  // Hq / Hkv
  int64_t max_head_dim = 48;
  int64_t max_v_dim = 24;
  int64_t max_seq = 200;
  bool mixed_dtypes = true;  // draw fp16/bf16 inputs too
  // With mixed_dtypes, fp8 inputs too (K/V with scales or without; q in fp8 too, which the
  // production path does not take: its properties draw fp8 K/V only, in dcp-fp8).
  bool fp8 = true;
};

// The switches drawn after every other field of a case (kFeatures' drawn_one_in > 0), in the
// table's order, those the limits allow: a feature added to the table leaves every draw before it
// as it was, so earlier seeds draw the cases they drew. Call inside a generator.
inline void draw_late_switches(CaseSpec& s, const DcpLimits& lim = {}) {
  for (const FeatureInfo& f : kFeatures)
    if (f.toggle != nullptr && f.drawn_one_in > 0 && lim.allows(f.feature))
      s.*f.toggle = *rc::gen::weightedElement<bool>({{f.drawn_one_in - 1, false}, {1, true}});
  // Scales by token in one case of three that has scales: per tensor becomes per token, per KV
  // head per token and KV head (after the switches, so earlier seeds draw as they did). Where
  // only scales by page are allowed, gen_dcp_setup keeps them by page or by head.
  if (s.kv_scale != KvScale::none &&
      (lim.allows(Feature::token_scales) || lim.allows(Feature::page_scales)) &&
      *rc::gen::weightedElement<bool>({{2, false}, {1, true}}))
    s.kv_scale = s.kv_scale == KvScale::per_tensor ? KvScale::per_token : KvScale::per_token_head;
}

inline rc::Gen<CaseSpec> gen_case_spec(SpecLimits lim) {
  using dcp::oracle::DType;
  using dcp::oracle::LseBase;
  return rc::gen::exec([lim] {
    CaseSpec s;
    s.kv_heads = *rc::gen::inRange<int64_t>(1, lim.max_kv_heads + 1);
    s.q_heads = s.kv_heads * *rc::gen::inRange<int64_t>(1, lim.max_group + 1);
    s.tokens = *rc::gen::inRange<int64_t>(1, lim.max_tokens + 1);
    s.head_dim = *rc::gen::inRange<int64_t>(1, lim.max_head_dim + 1);
    s.shared_latent = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    const int64_t vmax = s.shared_latent ? std::min(lim.max_v_dim, s.head_dim) : lim.max_v_dim;
    s.v_dim = *rc::gen::inRange<int64_t>(1, vmax + 1);
    s.seq = *rc::gen::inRange<int64_t>(0, lim.max_seq + 1);
    if (lim.mixed_dtypes) {
      const int fp8 = lim.fp8 ? 1 : 0;
      s.q_dtype = *rc::gen::weightedElement<DType>(
          {{2, DType::f32}, {2, DType::bf16}, {2, DType::f16}, {fp8, DType::f8e4m3}});
      std::vector<std::pair<size_t, DType>> kv = {
          {2, DType::f32}, {2, DType::bf16}, {2, DType::f16}};
      for (const DType d : quantized_dtypes()) kv.push_back({fp8, d});  // fp8 and int8 codes
      s.kv_dtype = *weighted_element(std::move(kv));
      if (dcp::oracle::is_quantized(s.kv_dtype))
        s.kv_scale = *rc::gen::element(KvScale::none, KvScale::per_tensor, KvScale::per_head);
    }
    s.causal = *rc::gen::weightedElement<bool>({{1, false}, {3, true}});
    s.explicit_pos = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    s.window = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, lim.max_seq + 2)}});
    s.softcap = *rc::gen::weightedElement<double>({{3, 0.0}, {1, 4.0}, {1, 30.0}});
    s.sink = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    s.topk = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 33)}});
    s.lse_base = *rc::gen::element(LseBase::e, LseBase::two);
    s.explicit_scale = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    s.values = *rc::gen::element(ValueStyle::normal, ValueStyle::peaked, ValueStyle::wide,
                                 ValueStyle::ties, ValueStyle::tiny, ValueStyle::extreme);
    s.seed = *rc::gen::arbitrary<uint64_t>();
    draw_late_switches(s);
    return s;
  });
}

// A case in which a planted merge, token or sink bug must show: normal values, at least two keys
// on every one of `shards` shards of interleave I (so several shards hold different partials),
// either LSE base, a sink when asked. Call inside a property body.
inline CaseSpec draw_bug_case(int64_t shards, int64_t interleave, bool sink) {
  CaseSpec s;
  s.tokens = *rc::gen::inRange<int64_t>(1, 3);
  s.kv_heads = *rc::gen::inRange<int64_t>(1, 3);
  s.q_heads = s.kv_heads * *rc::gen::inRange<int64_t>(1, 3);
  s.head_dim = *rc::gen::inRange<int64_t>(4, 65);
  s.v_dim = *rc::gen::inRange<int64_t>(4, 33);
  s.seq = *rc::gen::inRange<int64_t>(2 * shards * interleave + s.tokens, 600);
  s.sink = sink;
  s.lse_base = *rc::gen::element(dcp::oracle::LseBase::e, dcp::oracle::LseBase::two);
  s.seed = *rc::gen::arbitrary<uint64_t>();
  return s;
}

// A correct fp32 implementation variant (bug == none).
inline rc::Gen<ModelConfig> gen_model_config() {
  using dcp::oracle::DType;
  return rc::gen::exec([] {
    ModelConfig m;
    m.shards = *rc::gen::inRange<int64_t>(1, 9);
    m.interleave = *rc::gen::inRange<int64_t>(1, 5);
    m.tile = *rc::gen::inRange<int64_t>(1, 65);
    m.base2 = *rc::gen::arbitrary<bool>();
    m.fma = *rc::gen::arbitrary<bool>();
    m.pairwise_dot = *rc::gen::arbitrary<bool>();
    m.perturb = *rc::gen::weightedElement<bool>({{1, false}, {3, true}});
    // Now and then a kernel whose own exp or log is coarser than the intrinsics, claimed so. An
    // exp error is paid once per rescale too (up to S + 1 of them with tiles of one key), so it
    // stays at 10^-4 or less: 10^-3 over 200 rescales is beyond the first-order bound (kappa >
    // 0.1), which refuses such claims.
    m.exp_rel_err = *rc::gen::weightedElement<double>({{6, 0.0}, {1, 1e-6}, {1, 1e-5}, {1, 1e-4}});
    // Now and then rescales with an exp of their own: the library's beside a coarser kernel exp
    // (PyTorch's CPU flash), or a coarse one beside the library's.
    m.rescale_exp_rel_err =
        *rc::gen::weightedElement<std::optional<double>>({{4, std::nullopt}, {1, 0.0}, {1, 1e-5}});
    m.log_rel_err =
        *rc::gen::weightedElement<double>({{6, 0.0}, {1, 1e-6}, {1, 1e-5}, {1, 1e-4}, {1, 1e-3}});
    m.approx_systematic = *rc::gen::arbitrary<bool>();
    m.p_cast = *rc::gen::weightedOneOf<std::optional<DType>>(
        {{4, rc::gen::just(std::optional<DType>())},
         {2, rc::gen::element(std::optional<DType>(DType::bf16), std::optional<DType>(DType::f16))},
         {1, rc::gen::elementOf(fp8_dtypes<std::optional<DType>>())}});
    m.tf32 = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    // Now and then a tensor core's sums: each add truncated (claimed accum_rounding any).
    m.truncate = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    m.ftz = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    // Now and then a kernel that reads its cache into a 16-bit MMA: every dequantized element
    // rounded once (claimed as kv_dequant).
    m.dequantize_to = *rc::gen::weightedElement<std::optional<DType>>(
        {{6, std::nullopt}, {1, DType::bf16}, {1, DType::f16}});
    std::vector<std::pair<size_t, DType>> out = {
        {2, DType::f32}, {2, DType::bf16}, {2, DType::f16}};
    for (const DType d : fp8_dtypes<DType>()) out.push_back({1, d});
    m.out = *weighted_element(std::move(out));
    m.merge = *rc::gen::weightedElement<Merge>(
        {{2, Merge::ag_rs}, {2, Merge::a2a}, {1, Merge::pairwise}});
    m.reverse_merge = *rc::gen::arbitrary<bool>();
    // 16-bit partials and cross-rank sums (a bf16 reduce-scatter). One shard is not merged: its
    // partial is the output.
    if (m.shards > 1) {
      m.partial = *rc::gen::weightedElement<DType>(
          {{4, DType::f32}, {2, DType::bf16}, {2, DType::f16}, {1, DType::f8e4m3}});
      m.merge_accum =
          *rc::gen::weightedElement<DType>({{2, DType::f32}, {1, DType::bf16}, {1, DType::f16}});
      m.merge_lse_accum =
          *rc::gen::weightedElement<DType>({{2, DType::f32}, {1, DType::bf16}, {1, DType::f16}});
      // Pairwise merges store their states in the partials' format: never an fp8 one.
      if (m.merge == Merge::pairwise && oracle::is_fp8(m.partial)) m.partial = DType::bf16;
      m.merge_exp_rel_err = *rc::gen::weightedElement<std::optional<double>>(
          {{2, std::nullopt}, {1, 0.0}, {1, 1e-5}});
    }
    m.seed = *rc::gen::arbitrary<uint64_t>();
    // Now and then dots summed in lanes along the head dimension (a SIMD kernel's), or left to
    // right, claimed so (dot_lanes); drawn last, so earlier seeds draw what they drew.
    m.dot_lanes =
        *rc::gen::weightedElement<int64_t>({{6, 0}, {1, 1}, {1, 2}, {1, 4}, {1, 8}, {1, 32}});
    // Half of the ag_rs merges claimed in their form (merge_form scaled); drawn last too.
    m.claim_scaled = m.merge == Merge::ag_rs && *rc::gen::arbitrary<bool>();
    return m;
  });
}

// A correct variant for the case `spec`: TF32 operands cost 2^-10 of sum_i |q_i k_i| on each
// logit (keys dequantized to bf16 2^-8), and with the large logits of the `peaked`, `wide` and
// `extreme` styles (tens to 100) that moves weights by several percent, too coarse for the
// first-order bound, which refuses such a row by name (ToleranceRefusal); tf32 and 16-bit keys are
// drawn with the other styles.
inline rc::Gen<ModelConfig> gen_model_config_for(const CaseSpec& spec) {
  return rc::gen::map(gen_model_config(), [values = spec.values](ModelConfig m) {
    if (values == ValueStyle::extreme || values == ValueStyle::wide ||
        values == ValueStyle::peaked) {
      m.tf32 = false;
      m.dequantize_to.reset();  // bf16 keys cost 2^-8 of sum_i |q_i k_i| likewise
    }
    return m;
  });
}

// The draws' extremes that suite_case_footprint (suite.cpp) enumerates; keep the two in step
// (test_dcp_properties' FootprintCoversEveryDraw checks every draw against it).
inline constexpr int64_t kMaxDrawnTokens = 3;         // T in [1, 3]
inline constexpr int64_t kSmallGroup = 8;             // N <= 8: TP groups; TP <= 8: heads a rank
inline constexpr int64_t kMaxHeadsPerRank = 3;        // Hq / TP in [1, 3] while TP <= 8, else 1
inline constexpr int64_t kShortSeqLimit = 300;        // S < 300 but for the rare long cases
inline constexpr int64_t kLongCaseMaxRows = 12;       // long cases only where Hq x T <= 12
inline constexpr int64_t kMaxDrawnInterleave = 299;   // I in [1, 299]
inline constexpr int64_t kMaxPageRows = 64;           // pages of m I rows, m <= max(1, 64 / I)
inline constexpr int64_t kMaxDrawnTopk = 64;          // K in [1, 64]
inline constexpr int64_t kMaxDrawnTile = 64;          // tile in [1, 64], more with poly3
inline constexpr int64_t kMaxDrawnSplits = 4;         // split-KV pieces in [1, 4]
inline constexpr int64_t kMaxBatchRequests = 4;       // dcp-batch: 2 to 4 requests
inline constexpr int64_t kMaxBatchRequestKeys = 300;  // of up to min(300, max_seq) keys

// Limits of the DCP property cases. Small shapes are drawn most often; large N, long contexts
// and big interleaves appear with lower weight and with fewer heads so the CI tier stays fast.
// Draws how a DCP step runs (combine strategy, q path, reduction order, tile, split-KV) into cfg,
// with the kernel's LSE base that of the case. Call inside a generator or a property body.
inline void draw_step_options(gpu::DcpConfig& cfg, dcp::oracle::LseBase base) {
  cfg.strategy = *rc::gen::element(gpu::CommStrategy::ag_rs, gpu::CommStrategy::a2a);
  cfg.replicate_q = *rc::gen::arbitrary<bool>();
  cfg.order = *rc::gen::element(gpu::ReduceOrder::sequential, gpu::ReduceOrder::pairwise,
                                gpu::ReduceOrder::random);
  cfg.order_seed = *rc::gen::arbitrary<uint64_t>();
  cfg.base = to_gpu_base(base);
  cfg.tile = *rc::gen::inRange<int64_t>(1, kMaxDrawnTile + 1);
  cfg.splits = *rc::gen::inRange<int64_t>(1, kMaxDrawnSplits + 1);
}

// The online-softmax rescales a row may see with the poly3 exponential (draw_kernel_math).
inline constexpr int64_t kPoly3MaxRescales = 128;

// Draws the kernels' arithmetic (kernel_math.hpp) for a setup: half the cases keep the defaults;
// the rest mix the poly3 exponential, a 16-bit P cast, tf32 operands, 16-bit partials and, for
// ag_rs, a 16-bit reduce-scatter. tf32 is drawn only with values whose logits stay small
// (gen_model_config_for says why). With poly3 the tile grows to at least S/128 keys: its 2^0 is
// 1 - 7e-5, so every online-softmax rescale moves the earlier keys' weights, and the hundreds of
// rescales of 1-key tiles at long context make the weights' first-order error kappa exceed 0.1,
// which the oracle refuses by name (ToleranceRefusal) rather than judges.
inline gpu::KernelMath draw_kernel_math(gpu::DcpConfig& cfg, const CaseSpec& spec) {
  const ValueStyle values = spec.values;
  using gpu::StorageFormat;
  gpu::KernelMath m;
  if (!*rc::gen::arbitrary<bool>()) return m;
  const auto format = [] {
    return *rc::gen::weightedElement<StorageFormat>(
        {{2, StorageFormat::f32}, {1, StorageFormat::bf16}, {1, StorageFormat::f16}});
  };
  m.exp = *rc::gen::element(gpu::ExpImpl::libm, gpu::ExpImpl::poly3);
  if (m.exp == gpu::ExpImpl::poly3)
    cfg.tile = std::max(cfg.tile, (spec.seq + kPoly3MaxRescales - 1) / kPoly3MaxRescales);
  m.p_cast = format();
  m.tf32 = values != ValueStyle::extreme && values != ValueStyle::wide &&
           values != ValueStyle::peaked && *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
  m.partial = format();
  if (cfg.strategy == gpu::CommStrategy::ag_rs) m.merge = format();
  return m;
}

// Draws a paged cache into cfg (always, or one case in three): pages of m I rows, m from 1 to
// max(1, 64 / I), and the seed of the pool's order.
inline void draw_paging(gpu::DcpConfig& cfg, bool always) {
  const int64_t I = cfg.layout.interleave;
  const int64_t m = *rc::gen::weightedOneOf<int64_t>(
      {{always ? 0 : 2, rc::gen::just<int64_t>(0)},
       {1, rc::gen::inRange<int64_t>(1, std::max<int64_t>(1, kMaxPageRows / I) + 1)}});
  cfg.page_size = m * I;
  if (cfg.page_size > 0) cfg.page_seed = *rc::gen::arbitrary<uint64_t>();
}

inline rc::Gen<DcpSetup> gen_dcp_setup(DcpLimits lim, CacheKind kind = CacheKind::values) {
  using dcp::oracle::DType;
  using dcp::oracle::LseBase;
  const std::vector<DType> kv_formats = cache_formats(lim, kind);  // not empty (property_suite)
  return rc::gen::exec([lim, kind, kv_formats] {
    DcpSetup s;
    gpu::DcpConfig& cfg = s.cfg;
    CaseSpec& p = s.spec;
    const int64_t n =
        !lim.dcp_sizes.empty()
            ? *rc::gen::elementOf(lim.dcp_sizes)
            : *rc::gen::weightedOneOf<int64_t>(
                  {{8, rc::gen::inRange<int64_t>(1, std::min(kSmallGroup, lim.max_dcp) + 1)},
                   {lim.max_dcp > kSmallGroup ? 1 : 0,
                    rc::gen::inRange<int64_t>(kSmallGroup + 1,
                                              std::max(kSmallGroup + 2, lim.max_dcp + 1))}});
    const int64_t groups = n > kSmallGroup ? 1 : *rc::gen::inRange<int64_t>(1, lim.max_groups + 1);
    cfg.tp_size = n * groups;
    cfg.layout.ranks = n;
    const int64_t h_loc =
        cfg.tp_size > kSmallGroup ? 1 : *rc::gen::inRange<int64_t>(1, kMaxHeadsPerRank + 1);
    p.q_heads = cfg.tp_size * h_loc;
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d <= p.q_heads; ++d)
      if (p.q_heads % d == 0) divisors.push_back(d);
    p.kv_heads = *rc::gen::elementOf(divisors);
    p.tokens = *rc::gen::inRange<int64_t>(1, kMaxDrawnTokens + 1);
    p.head_dim = lim.head_dims.empty() ? *rc::gen::inRange<int64_t>(1, lim.max_head_dim + 1)
                                       : *rc::gen::elementOf(lim.head_dims);
    p.shared_latent =
        lim.allows(Feature::latent) && *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    if (lim.v_dims.empty()) {
      const int64_t vmax = p.shared_latent ? std::min(lim.max_v_dim, p.head_dim) : lim.max_v_dim;
      p.v_dim = *rc::gen::inRange<int64_t>(1, vmax + 1);
    } else {
      // A shared latent's V is the first Dv components of K: only where a listed Dv fits.
      std::vector<int64_t> fits;
      for (const int64_t v : lim.v_dims)
        if (v <= p.head_dim) fits.push_back(v);
      p.shared_latent = p.shared_latent && !fits.empty();
      p.v_dim = *rc::gen::elementOf(p.shared_latent ? fits : lim.v_dims);
    }
    const bool small = p.q_heads * p.tokens <= kLongCaseMaxRows;
    p.seq = *rc::gen::weightedOneOf<int64_t>(
        {{2,
          rc::gen::inRange<int64_t>(0, std::min(n, lim.max_seq) + 1)},  // S <= N: ranks own nothing
         {6, rc::gen::inRange<int64_t>(0, std::min<int64_t>(kShortSeqLimit, lim.max_seq + 1))},
         {small && lim.max_seq >= kShortSeqLimit ? 1 : 0,
          rc::gen::inRange<int64_t>(kShortSeqLimit,
                                    std::max<int64_t>(kShortSeqLimit + 1, lim.max_seq + 1))}});
    cfg.layout.interleave = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::just<int64_t>(1)},
         {3, rc::gen::inRange<int64_t>(2, 9)},
         {1, rc::gen::inRange<int64_t>(9, kMaxDrawnInterleave + 1)}});
    p.q_dtype = *rc::gen::elementOf(lim.q_dtypes);
    p.kv_dtype = *rc::gen::elementOf(kv_formats);
    if (kind == CacheKind::fp8)
      p.kv_scale = *rc::gen::element(KvScale::none, KvScale::per_tensor, KvScale::per_head);
    // Layout bugs only show under positional masks, top-k or several query positions, so most
    // cases have them.
    p.causal = *rc::gen::weightedElement<bool>({{1, false}, {4, true}});
    p.explicit_pos = *rc::gen::weightedElement<bool>({{1, false}, {1, true}});
    p.window = lim.allows(Feature::window)
                   ? *rc::gen::weightedOneOf<int64_t>(
                         {{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 64)}})
                   : 0;
    p.softcap = lim.allows(Feature::softcap)
                    ? *rc::gen::weightedElement<double>({{3, 0.0}, {1, 4.0}, {1, 30.0}})
                    : 0.0;
    p.sink = lim.allows(Feature::sink) && *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    p.topk = lim.allows(Feature::topk) ? *rc::gen::weightedOneOf<int64_t>(
                                             {{3, rc::gen::just<int64_t>(0)},
                                              {1, rc::gen::inRange<int64_t>(1, kMaxDrawnTopk + 1)}})
                                       : 0;
    p.lse_base = *rc::gen::elementOf(lim.lse_bases);
    p.explicit_scale = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    p.values = *rc::gen::element(ValueStyle::normal, ValueStyle::peaked, ValueStyle::wide,
                                 ValueStyle::ties, ValueStyle::tiny, ValueStyle::extreme);
    p.huge_logits = true;  // the production path's arithmetic is judged there (case_gen.hpp)
    p.seed = *rc::gen::arbitrary<uint64_t>();

    draw_step_options(cfg, p.lse_base);
    cfg.out_dtype = *rc::gen::weightedElement<gpu::StorageFormat>({{3, gpu::StorageFormat::f32},
                                                                   {1, gpu::StorageFormat::bf16},
                                                                   {1, gpu::StorageFormat::f16}});
    cfg.math = draw_kernel_math(cfg, p);
    s.chunks = make_chunks(p.seq, *rc::gen::arbitrary<uint64_t>());
    // A paged cache one case in three, pages of I to about 64 rows (a multiple of I) in a
    // fragmented pool (plan_pages). Drawn last, so every earlier draw is the one it was before
    // paging.
    draw_paging(cfg, false);
    draw_late_switches(p, lim);
    // Scales by token in a paged cache kept one a page in one case of two (drawn last, so earlier
    // seeds draw as they did), in every one where only scales by page are allowed; where neither
    // they nor scales by token may be drawn, by head.
    if (scales_by_token(p.kv_scale)) {
      const bool tokens = lim.allows(Feature::token_scales);
      if (cfg.page_size > 0 && lim.allows(Feature::page_scales) &&
          (!tokens || *rc::gen::arbitrary<bool>()))
        p.kv_scale = p.kv_scale == KvScale::per_token ? KvScale::per_page : KvScale::per_page_head;
      else if (!tokens)
        p.kv_scale = scales_by_head(p.kv_scale);
    }
    follow_pages(s);
    return s;
  });
}

// Draws a decode batch as dcp-batch runs it: the step's shape, variant, formats and options as
// gen_dcp_setup draws them (fp8 caches with their scales in half the cases, where the limits allow
// both), then 2 to 4 requests of up to min(300, max_seq) keys over a paged pool, a shared prefix
// and retired requests. Call inside a property body or a generator.
inline DcpSetup draw_dcp_batch_setup(const DcpLimits& lim) {
  const bool values = !cache_formats(lim, CacheKind::values).empty();
  const bool fp8 = !cache_formats(lim, CacheKind::fp8).empty();
  const CacheKind kind = values && fp8 ? *rc::gen::element(CacheKind::values, CacheKind::fp8)
                         : values      ? CacheKind::values
                                       : CacheKind::fp8;
  DcpSetup s = *gen_dcp_setup(lim, kind);
  gpu::DcpConfig& cfg = s.cfg;
  s.spec.kv_scale = scales_by_head(s.spec.kv_scale);  // a batch shares its scales (batch.hpp)
  if (cfg.page_size == 0) draw_paging(cfg, true);
  follow_pages(s);
  // Every logit offset by +-100 is a per-request construction a shared prefix would mix.
  if (s.spec.values == ValueStyle::extreme) s.spec.values = ValueStyle::normal;
  const int64_t n = cfg.layout.ranks, most = std::min<int64_t>(kMaxBatchRequestKeys, lim.max_seq);
  const int64_t requests = *rc::gen::inRange<int64_t>(2, kMaxBatchRequests + 1);
  for (int64_t b = 0; b < requests; ++b)
    s.batch.push_back(
        *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::inRange<int64_t>(0, std::min(n, most) + 1)},
                                          {4, rc::gen::inRange<int64_t>(0, most + 1)}}));
  const int64_t shortest = *std::min_element(s.batch.begin(), s.batch.end());
  // The prefix a radix cache matched: none, part of the shortest request, or all of it.
  s.shared_prefix =
      *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(0)},
                                        {2, rc::gen::inRange<int64_t>(0, shortest + 1)},
                                        {2, rc::gen::just<int64_t>(int64_t{shortest})}});
  // Requests that finished before the step: written, then their pages freed and reused by the
  // live ones, stale rows and all.
  s.retired = *rc::gen::weightedOneOf<int64_t>(
      {{2, rc::gen::just<int64_t>(0)}, {3, rc::gen::inRange<int64_t>(1, requests)}});
  s.spec.seq = *std::max_element(s.batch.begin(), s.batch.end());
  s.chunks = s.spec.seq > 0 ? std::vector<int64_t>{s.spec.seq} : std::vector<int64_t>{};
  if (cfg.math.exp == gpu::ExpImpl::poly3)  // as draw_kernel_math: at most 128 rescales a row
    cfg.tile = std::max(cfg.tile, (s.spec.seq + kPoly3MaxRescales - 1) / kPoly3MaxRescales);
  return s;
}

}  // namespace dcp::props
