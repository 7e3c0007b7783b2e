// case_gen.hpp — random cases of the case model, from a small spec and a seed.
//
// The spec holds everything that should shrink (shapes, variants, dtypes, value style); the
// values come from a seeded generator, so a failing case is replayed from (spec, seed) alone.
// The RapidCheck generators in rc_gen.hpp draw specs; dcp-verify's self-check uses this directly.
//
//   CaseSpec spec;  spec.seq = 100;  spec.window = 16;  spec.sink = true;  spec.seed = 7;
//   dcp::oracle::Case c = make_case(spec);   // always valid for the oracle
//   dcp::oracle::Case big = make_case(spec, KvHolding::stored);   // K, V as kv_dtype's bytes
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/case.hpp"

namespace dcp::props {

// How values are drawn. normal: N(0,1) rounded to the dtype. peaked: one key per row aligned with
// the query and q scaled up, so a single token dominates (a lost or doubled token is a gross
// error). wide: logits spread over tens of units (max-shift matters; far keys underflow).
// ties: keys repeated, so several logits are equal. tiny: values near and below fp32's smallest
// normal mixed with ordinary ones. extreme: every logit offset by about +/-100 through a shared
// key component, so exponentials overflow (or underflow) in fp32 unless the max is subtracted
// (with huge_logits, one extreme case in eight by about -1.2e4: below a -1e4 mask sentinel); a sink
// beside +100 logits is drawn as large (about 101), beside negative ones near 1 (far above).
// Sinks are otherwise N(1, 1).
enum class ValueStyle { normal, peaked, wide, ties, tiny, extreme };

// An fp8 cache's dequantization scales (as engines keep k_scale / v_scale): none, one per tensor,
// one per KV head, one per token, or one per token and KV head (the last two as LMDeploy and
// TensorRT-LLM keep quantized caches: a scale written with each token), or one per page of a
// paged cache (and KV head), as a cache quantized page by page keeps them. Keys and values are
// drawn, then stored as round(x / scale) in kv_dtype, so the case's values are the stored ones
// times the scale. A case holds scales by page as scales by token, the same over the tokens of
// each rank-local page of the layout in CaseSpec::scale_pages (the oracle knows no pages).
enum class KvScale {
  none,
  per_tensor,
  per_head,
  per_token,
  per_token_head,
  per_page,
  per_page_head
};
inline bool scales_by_page(KvScale s) {
  return s == KvScale::per_page || s == KvScale::per_page_head;
}
// Whether the case's scales are by token (by page too: see above).
inline bool scales_by_token(KvScale s) {
  return s == KvScale::per_token || s == KvScale::per_token_head || scales_by_page(s);
}
// Whether there is one scale a KV head (per KV head, per token and head, per page and head).
inline bool scales_per_kv_head(KvScale s) {
  return s == KvScale::per_head || s == KvScale::per_token_head || s == KvScale::per_page_head;
}
// The same scales by head: per token or page becomes per tensor, per token (page) and KV head per
// KV head (a batch shares its scales: batch.hpp).
inline KvScale scales_by_head(KvScale s) {
  return !scales_by_token(s) ? s : scales_per_kv_head(s) ? KvScale::per_head : KvScale::per_tensor;
}
// Each one's name, in the enum's order: `run --kv-scale NAME`, case labels ("kv=e4m3/token"),
// and "per_NAME" in setup files.
inline constexpr const char* kKvScaleNames[] = {"none",       "tensor", "head",     "token",
                                                "token_head", "page",   "page_head"};
inline const char* kv_scale_name(KvScale s) { return kKvScaleNames[static_cast<int>(s)]; }

// The pages scales by page follow: token p lives on rank floor(p / I) mod N (layout.hpp) in its
// rank-local page floor(p / (N P)) (P a multiple of I), and the tokens of one (rank, page) share
// their scales. A DCP setup's are its configuration's (follow_pages, dcp_setup.hpp).
struct ScalePages {
  int64_t ranks = 1, interleave = 1, page_size = 1;  // N, I, P
  // The (rank, page) of position p, as one index: page N + rank.
  int64_t group(int64_t p) const {
    return p / (ranks * page_size) * ranks + p / interleave % ranks;
  }
};

struct CaseSpec {
  int64_t tokens = 1;    // T
  int64_t q_heads = 1;   // Hq
  int64_t kv_heads = 1;  // Hkv (divides Hq)
  int64_t head_dim = 8;  // Dk
  int64_t v_dim = 8;     // Dv (<= Dk for a shared latent)
  int64_t seq = 16;      // S
  bool shared_latent = false;
  dcp::oracle::DType q_dtype = dcp::oracle::DType::f32;
  dcp::oracle::DType kv_dtype = dcp::oracle::DType::f32;
  KvScale kv_scale = KvScale::none;
  ScalePages scale_pages{};  // with per_page and per_page_head only
  bool causal = true;
  bool explicit_pos = false;  // random q_pos in [0, S + 2) instead of S-T .. S-1
  int64_t window = 0;
  double softcap = 0.0;
  bool sink = false;
  bool alibi = false;  // ALiBi slopes of about 2^(-8 (h + 1) / Hq) each (the paper's), drawn
  int64_t topk = 0;    // K > 0: random selections of K positions per token, with -1 padding
  dcp::oracle::LseBase lse_base = dcp::oracle::LseBase::e;
  bool explicit_scale = false;
  ValueStyle values = ValueStyle::normal;
  // extreme: one case in eight moves the logits by about -1.2e4 instead of -100 (case_gen.cpp,
  // kHugeLogit). The DCP properties draw it: the production path's arithmetic (f32 sums, the
  // library's exponential) is judgeable there; coarser claimed arithmetic (truncating adds, an
  // approximate exponential, base 2) makes the oracle's first-order bound refuse such logits.
  bool huge_logits = false;
  uint64_t seed = 0;
};

// The features a case may use and an implementation may lack, one row each (kFeatures). A row names
// its feature everywhere: `properties --without NAME`, the Python package's keyword, bit i of the
// plug-in ABI's lacks mask for row i < kAbiFeatures (rows past version 2's bits: lacked by every
// plug-in of version 1 or 2; rows past kAbiFeatures the ABI does not carry: never drawn for a
// plug-in, and refused by `run --impl`), and a pinned setup's refusal ("uses a sink").
// A row with a switch (a bool of CaseSpec) is also `run --NAME`, the setup file's "spec.NAME", a
// case label's "+NAME" and, with drawn_one_in > 0, drawn on in one case of that many after every
// other field of a case (a new feature leaves every earlier seed's draws as they were).
enum class Feature { softcap, sink, topk, window, latent, batch, alibi, token_scales, page_scales };
struct FeatureInfo {
  Feature feature;
  const char* name;
  const char* uses;                                // "uses a sink"
  bool (*used)(const CaseSpec& spec, bool batch);  // batch: several requests in one step
  bool CaseSpec::*toggle = nullptr;                // its switch; nullptr: a valued field
  const char* help = nullptr;                      // run --NAME's help, with a switch
  int drawn_one_in = 0;                            // 0: drawn in its place by rc_gen.hpp
};
inline constexpr FeatureInfo kFeatures[] = {
    {Feature::softcap, "softcap", "uses softcap",
     [](const CaseSpec& s, bool) { return s.softcap > 0.0; }},
    {Feature::sink, "sink", "uses a sink", [](const CaseSpec& s, bool) { return s.sink; },
     &CaseSpec::sink, "Per-head sink logits"},
    {Feature::topk, "topk", "uses top-k", [](const CaseSpec& s, bool) { return s.topk > 0; }},
    {Feature::window, "window", "uses a window",
     [](const CaseSpec& s, bool) { return s.window > 0; }},
    {Feature::latent, "latent", "uses a shared latent",
     [](const CaseSpec& s, bool) { return s.shared_latent; }},
    {Feature::batch, "batch", "is a batch", [](const CaseSpec&, bool batch) { return batch; }},
    {Feature::alibi, "alibi", "uses ALiBi", [](const CaseSpec& s, bool) { return s.alibi; },
     &CaseSpec::alibi,
     "ALiBi: per-head slopes m_h, the logit of key j for query i loses m_h |j - i|", 8},
    {Feature::token_scales, "token_scales", "uses per-token KV scales",
     [](const CaseSpec& s, bool) {
       return scales_by_token(s.kv_scale) && !scales_by_page(s.kv_scale);
     }},
    {Feature::page_scales, "page_scales", "uses per-page KV scales",
     [](const CaseSpec& s, bool) { return scales_by_page(s.kv_scale); }},
};
inline constexpr size_t kAbiFeatures = 9;  // DCPV_LACKS_SOFTCAP .. DCPV_LACKS_PAGE_SCALES
constexpr bool features_in_order() {
  for (size_t i = 0; i < std::size(kFeatures); ++i)
    if (static_cast<size_t>(kFeatures[i].feature) != i) return false;
  return std::size(kFeatures) >= kAbiFeatures;
}
static_assert(features_in_order(), "kFeatures: row i is Feature i, the ABI's bits first");
const FeatureInfo* find_feature(std::string_view name);
// "softcap, sink, ..., batch or alibi": every row's name, for a refusal or a help.
std::string feature_names();

// How a generated case holds K and V: as doubles (properties and tests write and read them), or
// as kv_dtype's bytes, as a case file would (a long context: 2 bytes a bf16 element instead of
// 8; read through KvTensor::row). The values are the same either way.
enum class KvHolding { doubles, stored };

dcp::oracle::Case make_case(const CaseSpec& spec, KvHolding holding = KvHolding::doubles);

// make_case, ended early when `stop` returns true (nullopt then): it is asked between blocks of
// 65536 drawn values of K and V held as stored bytes (a few milliseconds each), the draws a long
// context spends its time on. The same case as make_case otherwise.
std::optional<dcp::oracle::Case> make_case_unless(const CaseSpec& spec, KvHolding holding,
                                                  const std::function<bool()>& stop);

// A decode batch's requests (dcp_bridge.hpp, check_dcp_batch): request b is make_case of the spec
// with seqs[b] keys, tokens[b] queries and seed spec.seed + b, then made to agree with request 0
// where a batch shares: its sink and scales are request 0's (its stored elements kept, so its
// values are those times request 0's scales), and its first shared_prefix keys and values are
// request 0's (shared_prefix <= every seqs[b]; a longer one stops at the shorter request).
// tokens[b] queries (spec.tokens past its end). K and V held as doubles.
std::vector<dcp::oracle::Case> make_batch_cases(const CaseSpec& spec,
                                                const std::vector<int64_t>& seqs,
                                                const std::vector<int64_t>& tokens,
                                                int64_t shared_prefix);
// One line that rebuilds the spec, for reproduce messages.
std::string describe(const CaseSpec& spec);

}  // namespace dcp::props
