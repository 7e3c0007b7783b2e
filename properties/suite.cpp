#include "properties/suite.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "gpu/host/host_device.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/layout.hpp"
#include "oracle/shard.hpp"
#include "properties/mla_check.hpp"
#include "properties/rc_gen.hpp"

namespace dcp::props {
namespace {

using gpu::DcpLayout;

std::string g_current_case;
BoundTier g_bound = BoundTier::sound;

// Whether a check passes the tier the properties assert.
bool gated(const DcpCheck& chk) {
  return chk.pass && (g_bound == BoundTier::sound || chk.pass_statistical);
}

void set_current_case(std::string s) { g_current_case = std::move(s); }

// A DCP check that is not inside the asserted tier fails the property with `message`, the case
// line saying how: the backend refused (one of its own guards), the oracle could not judge, or
// the bound (sound, or only the statistical one).
// A case the claim is too coarse to judge (oracle::Status::unjudgeable), with nothing else wrong,
// says nothing of the implementation: another is drawn (too many such, and RapidCheck gives up).
void fail_unless_gated(const DcpCheck& chk, const std::string& message) {
  if (gated(chk)) return;
  if (chk.unjudgeable && !chk.backend_error && chk.judged_pass &&
      (g_bound == BoundTier::sound || chk.judged_pass_statistical))
    RC_DISCARD("the claimed arithmetic is too coarse to judge this case");
  const std::string_view how = chk.backend_error  ? kBackendErrorTag
                               : chk.oracle_error ? " | oracle error"
                               : chk.pass         ? " | suspect"
                                                  : " | bound violated";
  set_current_case(current_case() + std::string(how));
  RC_FAIL(message);
}

std::string layout_case(const DcpLayout& l, const char* what, int64_t x) {
  return "N=" + std::to_string(l.ranks) + " I=" + std::to_string(l.interleave) + " " + what + "=" +
         std::to_string(x);
}

rc::Gen<DcpLayout> gen_layout() {
  return rc::gen::exec([] {
    DcpLayout l;
    l.ranks = *rc::gen::inRange<int64_t>(1, 65);
    l.interleave = *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(1)},
                                                     {3, rc::gen::inRange<int64_t>(2, 17)},
                                                     {1, rc::gen::inRange<int64_t>(17, 1000)}});
    return l;
  });
}

// " kv=F8_E4M3/head" for an fp8 cache (the format and its scales), else nothing.
std::string fp8_cache(const CaseSpec& s) {
  if (!oracle::is_quantized(s.kv_dtype)) return "";
  return " kv=" + std::string(oracle::dtype_name(s.kv_dtype)) +
         (s.kv_scale != KvScale::none ? "/" + std::string(kv_scale_name(s.kv_scale)) : "");
}

// The engines' test's atol = rtol (vLLM's DCP kernel test): 1e-5 where every format of the step
// is f32, else 3e-2.
double engine_test_tolerance(const DcpSetup& s) {
  using F = gpu::StorageFormat;
  const gpu::KernelMath& m = s.cfg.math;
  const bool all_f32 = s.spec.q_dtype == oracle::DType::f32 &&
                       s.spec.kv_dtype == oracle::DType::f32 && s.cfg.out_dtype == F::f32 &&
                       m.partial == F::f32 && m.merge == F::f32 && m.p_cast == F::f32 && !m.tf32;
  return all_f32 ? 1e-5 : 3e-2;
}

// A DCP setup's shape in one line ("S=40 N=3 I=2 tp=3 T=1 Hq=3 ...").
std::string dcp_case_line(const DcpSetup& s) {
  return "S=" + std::to_string(s.spec.seq) + " N=" + std::to_string(s.cfg.layout.ranks) +
         " I=" + std::to_string(s.cfg.layout.interleave) + " tp=" + std::to_string(s.cfg.tp_size) +
         " T=" + std::to_string(s.spec.tokens) + " Hq=" + std::to_string(s.spec.q_heads) +
         " Hkv=" + std::to_string(s.spec.kv_heads) + " Dk=" + std::to_string(s.spec.head_dim) +
         " Dv=" + std::to_string(s.spec.v_dim) + fp8_cache(s.spec) +
         (s.cfg.page_size > 0 ? " page=" + std::to_string(s.cfg.page_size) : "");
}

}  // namespace

const std::string& current_case() { return g_current_case; }

void set_property_bound(BoundTier tier) { g_bound = tier; }
BoundTier property_bound() { return g_bound; }

void dcp_path_property(const DcpBackend& backend, const DcpLimits& lim, CacheKind kind) {
  const DcpSetup s = *gen_dcp_setup(lim, kind);
  set_current_case(dcp_case_line(s));
  const oracle::Case c = make_case(s.spec);
  const DcpCheck chk = check_dcp(c, s.cfg, s.chunks, backend);
  RC_CLASSIFY(s.cfg.layout.ranks > 8, "N > 8");
  RC_CLASSIFY(s.spec.seq < s.cfg.layout.ranks, "S < N");
  RC_CLASSIFY(s.cfg.strategy == gpu::CommStrategy::a2a, "a2a");
  fail_unless_gated(chk, describe(s) + "\n" + chk.report + "pin: " + to_json(s).dump());
}

void dcp_batch_property(const DcpBackend& backend, const DcpLimits& lim) {
  const DcpSetup s = draw_dcp_batch_setup(lim);
  const gpu::DcpConfig& cfg = s.cfg;
  const int64_t n = cfg.layout.ranks;
  std::string lens;
  for (const int64_t x : s.batch) lens += (lens.empty() ? "" : ",") + std::to_string(x);
  set_current_case("S=" + lens + " shared=" + std::to_string(s.shared_prefix) +
                   " retired=" + std::to_string(s.retired) + " N=" + std::to_string(n) +
                   " I=" + std::to_string(cfg.layout.interleave) +
                   " page=" + std::to_string(cfg.page_size) + " tp=" + std::to_string(cfg.tp_size) +
                   " Hq=" + std::to_string(s.spec.q_heads) +
                   " Hkv=" + std::to_string(s.spec.kv_heads) + fp8_cache(s.spec));
  const DcpCheck chk = check_dcp_setup(s, backend);
  RC_CLASSIFY(s.shared_prefix >= cfg.page_size * n, "shares a page");
  RC_CLASSIFY(s.retired > 0, "reuses freed pages");
  fail_unless_gated(chk, describe(s) + "\n" + chk.report + "pin: " + to_json(s).dump());
}

void mla_slice_property() {
  MlaSpec s;
  gpu::DcpConfig cfg;
  const int64_t n = *rc::gen::inRange<int64_t>(1, 9);
  cfg.layout = {n, *rc::gen::inRange<int64_t>(1, 6)};
  cfg.tp_size = n * *rc::gen::inRange<int64_t>(1, 3);
  s.heads = cfg.tp_size * *rc::gen::inRange<int64_t>(1, 3);
  s.tokens = *rc::gen::inRange<int64_t>(1, 4);
  s.q_lora = *rc::gen::inRange<int64_t>(1, 33);
  s.nope = *rc::gen::inRange<int64_t>(1, 17);
  s.rope = 2 * *rc::gen::inRange<int64_t>(0, 5);
  s.kv_lora = *rc::gen::inRange<int64_t>(1, 33);
  s.v_head = *rc::gen::inRange<int64_t>(1, 17);
  s.seq = *rc::gen::inRange<int64_t>(0, 400);
  s.apply_rope = *rc::gen::arbitrary<bool>();
  s.explicit_pos = *rc::gen::arbitrary<bool>();
  s.causal = *rc::gen::weightedElement<bool>({{1, false}, {3, true}});
  s.kv_dtype = *rc::gen::element(oracle::DType::bf16, oracle::DType::f16, oracle::DType::f32);
  s.lse_base = *rc::gen::element(oracle::LseBase::e, oracle::LseBase::two);
  s.seed = *rc::gen::arbitrary<uint64_t>();
  draw_step_options(cfg, s.lse_base);
  set_current_case("S=" + std::to_string(s.seq) + " N=" + std::to_string(n) + " I=" +
                   std::to_string(cfg.layout.interleave) + " tp=" + std::to_string(cfg.tp_size) +
                   " T=" + std::to_string(s.tokens) + " heads=" + std::to_string(s.heads) +
                   " kv_lora=" + std::to_string(s.kv_lora) + " rope=" + std::to_string(s.rope));
  const DcpCheck chk = check_mla(s, cfg);
  fail_unless_gated(chk, describe(s) + " | " + describe(cfg) + "\n" + chk.report);
}

void layout_bijection_property() {
  const DcpLayout l = *gen_layout();
  const int64_t span = *rc::gen::inRange<int64_t>(0, 2000);
  set_current_case(layout_case(l, "span", span));
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int64_t p = 0; p < span; ++p) {
    const int64_t r = l.owner(p), row = l.row(p);
    RC_ASSERT(r == oracle::dcp_owner(p, l.ranks, l.interleave));
    RC_ASSERT(l.position(r, row) == p);
    RC_ASSERT(seen.insert({r, row}).second);
  }
  // Every (rank, row) maps back: the rows a rank holds for [0, span) are exactly 0..count-1.
  for (int64_t r = 0; r < l.ranks; ++r) {
    for (int64_t row = 0; row < l.count(r, span); ++row) {
      const int64_t p = l.position(r, row);
      RC_ASSERT(p < span);
      RC_ASSERT(l.owner(p) == r);
      RC_ASSERT(l.row(p) == row);
    }
  }
}

void layout_count_property() {
  const DcpLayout l = *gen_layout();
  const int64_t a = *rc::gen::inRange<int64_t>(0, 3000);
  const int64_t len = *rc::gen::weightedOneOf<int64_t>(
      {{1, rc::gen::just<int64_t>(0)}, {4, rc::gen::inRange<int64_t>(0, 3000)}});
  set_current_case(layout_case(l, "a", a) + " L=" + std::to_string(len));
  std::vector<int64_t> brute(static_cast<size_t>(l.ranks), 0);
  // Brute force from the oracle's own statement of the layout, not from the layout under test.
  for (int64_t p = a; p < a + len; ++p)
    ++brute[static_cast<size_t>(oracle::dcp_owner(p, l.ranks, l.interleave))];
  int64_t total = 0, lo = len, hi = 0;
  for (int64_t r = 0; r < l.ranks; ++r) {
    const int64_t share = l.chunk_share(r, a, len);
    RC_ASSERT(share == brute[static_cast<size_t>(r)]);
    total += share;
    lo = std::min(lo, share);
    hi = std::max(hi, share);
  }
  RC_ASSERT(total == len);
  RC_ASSERT(hi - lo <= l.interleave);
}

void kv_write_property() {
  const DcpLayout l = *rc::gen::exec([] {
    DcpLayout x;
    x.ranks = *rc::gen::inRange<int64_t>(1, 9);
    x.interleave = *rc::gen::inRange<int64_t>(1, 9);
    return x;
  });
  const int64_t seq = *rc::gen::inRange<int64_t>(0, 400);
  const std::vector<int64_t> chunks = make_chunks(seq, *rc::gen::arbitrary<uint64_t>());
  // Every cache format, with or without scales (one per KV head, or by token: one per token or per
  // token and KV head, stored by the write in each token's slot, or in its page's entry when kept
  // by page), written from chunks of stored
  // elements (in the cache's format) or of fp32 values (quantized as x / scale).
  std::vector<gpu::StorageFormat> formats;
  for (const oracle::DType d : production_dtypes(true)) formats.push_back(to_storage_format(d));
  const gpu::StorageFormat fmt = *rc::gen::elementOf(formats);
  const int64_t heads = *rc::gen::inRange<int64_t>(1, 4);
  const bool latent = *rc::gen::arbitrary<bool>();
  const bool scaled = *rc::gen::arbitrary<bool>();
  const bool from_values = *rc::gen::arbitrary<bool>();
  // Paged one case in two: pages of 1 to 4 times I rows in a fragmented pool (plan_pages).
  gpu::DcpConfig paging;
  paging.layout = l;
  paging.page_size =
      l.interleave * *rc::gen::weightedOneOf<int64_t>(
                         {{1, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 5)}});
  paging.page_seed = *rc::gen::arbitrary<uint64_t>();
  const bool by_token = scaled && *rc::gen::arbitrary<bool>();
  const int64_t scale_heads = by_token && *rc::gen::arbitrary<bool>() ? 1 : heads;
  gpu::DcpInputs context;  // the plan's view of the context: one request of seq tokens
  context.seq = seq;
  const gpu::Result<gpu::PagePlan> plan = gpu::plan_pages(context, paging);
  RC_ASSERT(plan.ok());
  // Scales anywhere in [2^-12, 2^8), by token that times 1 + p mod 5: a stored value c in {1, 2}
  // times a scale is exact in fp32 (c is a power of two), so quantizing it back gives c exactly in
  // every format.
  const auto draw_scales = [&] {
    std::vector<float> sc;
    for (int64_t g = 0; scaled && g < scale_heads; ++g)
      sc.push_back(static_cast<float>(*rc::gen::inRange(1, 1 << 20)) / 4096.0f);
    return sc;
  };
  const std::vector<float> k_base = draw_scales(),
                           v_base = latent ? std::vector<float>{} : draw_scales();
  // By token in a paged cache, kept one a page in one case of two (drawn last).
  const bool by_page = by_token && paging.page_size > 0 && *rc::gen::arbitrary<bool>();
  // The scale of token p at KV head g (none: 1): by page, that times 1 + its (rank, page) mod 5.
  const auto scale_of = [&](const std::vector<float>& base, int64_t p, int64_t g) {
    if (base.empty()) return 1.0f;
    const float b = base[static_cast<size_t>(scale_heads == 1 ? 0 : g)];
    const int64_t step =
        by_page ? l.row(p) / paging.page_size * l.ranks + l.owner(p) : p;  // page or token
    return by_token ? b * static_cast<float>(1 + step % 5) : b;
  };
  set_current_case(layout_case(l, "S", seq) + " chunks=" + std::to_string(chunks.size()) +
                   " kv=" + std::string(gpu::format_name(fmt)) + " heads=" + std::to_string(heads) +
                   (latent ? " latent" : "") + (scaled ? " scaled" : "") +
                   (by_token ? (by_page ? " by-page" : " by-token") : "") +
                   (by_token && scale_heads > 1 ? "-head" : "") +
                   (from_values ? " from-values" : " from-stored") +
                   (paging.page_size > 0 ? " page=" + std::to_string(paging.page_size) : ""));
  // Token p's stored component i (of 9, p < 2^9) is 2 where bit i of p is set, else 1, and its
  // value component i + 9 is the opposite: exact in every format, so every stored row says
  // which token it holds, and a value 1 or 2 times a scale quantizes back to it.
  constexpr int64_t kBits = 9;
  const int64_t dk = kBits, dv = kBits;
  const auto code = [](int64_t p, int64_t i) {
    return ((p >> (i % kBits)) & 1) == (i < kBits ? 1 : 0) ? 2.0f : 1.0f;
  };
  const int64_t cycle = l.ranks * l.interleave;
  const int64_t rows = (seq + cycle - 1) / cycle * l.interleave;
  const gpu::StorageFormat src = from_values ? gpu::StorageFormat::f32 : fmt;
  const auto chunk_of = [&](int64_t pos0, int64_t len, int64_t width, int64_t off,
                            const std::vector<float>& base) {
    std::vector<uint8_t> bytes(static_cast<size_t>(len * heads * width * gpu::format_bytes(src)));
    for (int64_t j = 0; j < len; ++j)
      for (int64_t g = 0; g < heads; ++g)
        for (int64_t i = 0; i < width; ++i) {
          const float c = code(pos0 + j, off + i);
          const float x = from_values ? c * scale_of(base, pos0 + j, g) : c;
          gpu::store_element(src, bytes.data(), (j * heads + g) * width + i, x);
        }
    return bytes;
  };
  // By token, the chunk's scales [len, scale_heads] the write stores (empty: by head, or none).
  const auto chunk_scales = [&](int64_t pos0, int64_t len, const std::vector<float>& base) {
    std::vector<float> sc;
    for (int64_t j = 0; by_token && !base.empty() && j < len; ++j)
      for (int64_t g = 0; g < scale_heads; ++g) sc.push_back(scale_of(base, pos0 + j, g));
    return sc;
  };
  for (int64_t r = 0; r < l.ranks; ++r) {
    gpu::KvCacheSpec spec{l, r, rows, heads, 0, dk, dv, latent, fmt};
    if (paging.page_size > 0) {
      spec.page_size = paging.page_size;
      spec.pool_pages = plan->pool_pages;
    }
    spec.scale_grain = by_page    ? gpu::ScaleGrain::page
                       : by_token ? gpu::ScaleGrain::token
                                  : gpu::ScaleGrain::head;
    spec.scale_heads = scale_heads;
    // By head the scales themselves; by token (page) each slot's (page's) entry, stored by the
    // writes (0 before).
    const auto cache_scales = [&](const std::vector<float>& base) {
      return by_token && !base.empty()
                 ? std::vector<float>(static_cast<size_t>(gpu::scale_entries(spec)), 0.0f)
                 : base;
    };
    gpu::HostDevice dev(nullptr);
    const std::vector<int32_t>& table = plan->tables;
    gpu::Result<gpu::HostKvCache> c = gpu::alloc_device_cache(
        dev, spec, gpu::KvScales{cache_scales(k_base), cache_scales(v_base)}, table);
    RC_ASSERT(c.ok());
    int64_t pos0 = 0;
    for (const int64_t len : chunks) {
      const std::vector<uint8_t> k = chunk_of(pos0, len, dk, 0, k_base);
      const std::vector<uint8_t> v =
          latent ? std::vector<uint8_t>{} : chunk_of(pos0, len, dv, kBits, v_base);
      const std::vector<float> ks = chunk_scales(pos0, len, k_base),
                               vs = chunk_scales(pos0, len, v_base);
      RC_ASSERT(
          gpu::write_device_chunk(
              dev, *c,
              gpu::KvChunk{pos0, len, src, k.data(), latent ? nullptr : v.data(), from_values,
                           ks.empty() ? nullptr : ks.data(), vs.empty() ? nullptr : vs.data()})
              .ok());
      pos0 += len;
    }
    // Expected by brute force from the oracle's statement of the layout: rank r holds, in
    // position order, exactly the positions p < S with floor(p / I) mod N = r.
    std::vector<int64_t> mine;
    for (int64_t p = 0; p < seq; ++p)
      if (oracle::dcp_owner(p, l.ranks, l.interleave) == r) mine.push_back(p);
    const auto held = static_cast<int64_t>(mine.size());
    // Row r lives in pool row table[r / P] P + r mod P (computed here from the table, not by the
    // view).
    const int64_t P = spec.page_size;
    const auto pool_row = [&](int64_t row) {
      return P > 0 ? int64_t{table[static_cast<size_t>(row / P)]} * P + row % P : row;
    };
    const auto written = [&](int64_t row) {
      return c->written[static_cast<size_t>(pool_row(row))] != 0;
    };
    int64_t contiguous_rows = 0;  // rows written from row 0 without gaps
    while (contiguous_rows < rows && written(contiguous_rows)) ++contiguous_rows;
    RC_ASSERT(contiguous_rows == held);
    const gpu::KvView view = c->view();
    for (int64_t row = 0; row < rows; ++row) {
      RC_ASSERT(written(row) == (row < held));
      if (row >= held) continue;
      const int64_t p = mine[static_cast<size_t>(row)];
      for (int64_t g = 0; g < heads; ++g) {
        // Each row's scales: its KV head's, or by token (page) its own token's (page's; a
        // latent's V: K's).
        RC_ASSERT(view.k_scale_of(row, g) == scale_of(k_base, p, g));
        RC_ASSERT(view.v_scale_of(row, g) == scale_of(latent ? k_base : v_base, p, g));
        for (int64_t i = 0; i < dk; ++i) RC_ASSERT(view.key(row, g, i) == code(p, i));
        if (!latent)
          for (int64_t i = 0; i < dv; ++i) RC_ASSERT(view.value(row, g, i) == code(p, kBits + i));
      }
    }
    // By page, the scale arrays read by hand, through the table rather than the view: each held
    // page's entry its tokens' scale, every other page's 0.
    const auto page_entries = [&](const auto& entries, const std::vector<float>& base) {
      std::vector<char> held_page(static_cast<size_t>(spec.pool_pages), 0);
      for (int64_t row = 0; row < held; ++row) {
        const int64_t page = table[static_cast<size_t>(row / P)];
        held_page[static_cast<size_t>(page)] = 1;
        for (int64_t g = 0; g < scale_heads; ++g)
          RC_ASSERT(entries[static_cast<size_t>(page * scale_heads + g)] ==
                    scale_of(base, mine[static_cast<size_t>(row)], g));
      }
      for (int64_t page = 0; page < spec.pool_pages; ++page)
        for (int64_t g = 0; !held_page[static_cast<size_t>(page)] && g < scale_heads; ++g)
          RC_ASSERT(entries[static_cast<size_t>(page * scale_heads + g)] == 0.0f);
    };
    if (by_page && !k_base.empty()) page_entries(c->k_scale, k_base);
    if (by_page && !v_base.empty()) page_entries(c->v_scale, v_base);
    // The pool rows no held row maps to (the free pages, the tails of pages) stay zero and
    // unflagged: writes land in the block table's pages only.
    std::vector<char> used(static_cast<size_t>(spec.pool_rows()), 0);
    for (int64_t row = 0; row < held; ++row) used[static_cast<size_t>(pool_row(row))] = 1;
    const int64_t e = gpu::format_bytes(fmt), k_row = heads * dk * e, v_row = heads * dv * e;
    for (int64_t row = 0; row < held; ++row)  // the first key component, read by hand
      RC_ASSERT(gpu::load_element(fmt, c->k.data(), pool_row(row) * heads * dk) ==
                code(mine[static_cast<size_t>(row)], 0));
    for (int64_t slot = 0; slot < spec.pool_rows(); ++slot) {
      if (used[static_cast<size_t>(slot)]) continue;
      RC_ASSERT(c->written[static_cast<size_t>(slot)] == 0);
      for (int64_t b = 0; b < k_row; ++b)
        RC_ASSERT(c->k[static_cast<size_t>(slot * k_row + b)] == 0);
      for (int64_t b = 0; !latent && b < v_row; ++b)
        RC_ASSERT(c->v[static_cast<size_t>(slot * v_row + b)] == 0);
    }
  }
}

SuiteFootprint suite_case_footprint(const DcpLimits& lim) {
  // Every shape gen_dcp_setup and draw_dcp_batch_setup can draw, each count at the largest value
  // the others allow, every interleave and page size: the footprint grows with heads, T, S, Dk,
  // Dv, K, the tile, the splits and the caches' format, but not steadily with N, I and the pages
  // (a rank's rows are whole cycles of I and whole pages), so those are enumerated. The other
  // properties' cases (the MLA slice, the layout, the KV writes) take a few MB at most, within the
  // footprint's base.
  SuiteFootprint out;
  DcpSetup s;
  CaseSpec& p = s.spec;
  p.head_dim = lim.max_head_dim;
  p.v_dim = lim.max_v_dim;  // a separate V: more than a shared latent holds
  p.topk = lim.allows(Feature::topk) ? kMaxDrawnTopk : 0;
  p.kv_dtype = lim.kv_dtypes.front();
  for (const oracle::DType t : lim.kv_dtypes)
    if (oracle::dtype_bytes(t) > oracle::dtype_bytes(p.kv_dtype)) p.kv_dtype = t;
  s.cfg.splits = kMaxDrawnSplits;
  const auto consider = [&](DcpSetup& x) {
    for (int64_t I = 1; I <= kMaxDrawnInterleave; ++I) {
      x.cfg.layout.interleave = I;
      const int64_t pages = std::max<int64_t>(1, kMaxPageRows / I);
      for (int64_t m = x.batch.empty() ? 0 : 1; m <= pages; ++m) {
        x.cfg.page_size = m * I;
        const Footprint f = dcp_check_footprint(x);
        if (f.bytes > out.most.bytes) {
          out.most = f;
          out.worst = x;
        }
      }
    }
  };
  const int64_t short_seq = std::min(kShortSeqLimit - 1, lim.max_seq);
  for (int64_t n = 1; n <= lim.max_dcp; ++n) {
    const int64_t max_groups = n > kSmallGroup ? 1 : lim.max_groups;
    for (int64_t groups = 1; groups <= max_groups; ++groups) {
      const int64_t tp = n * groups, most_heads = tp > kSmallGroup ? 1 : kMaxHeadsPerRank;
      s.cfg.layout.ranks = n;
      s.cfg.tp_size = tp;
      for (int64_t h = 1; h <= most_heads; ++h) {
        p.q_heads = p.kv_heads = tp * h;
        // The long cases (T x Hq <= 12), and the short ones at the most heads.
        const int64_t long_tokens = std::min(kMaxDrawnTokens, kLongCaseMaxRows / p.q_heads);
        std::vector<std::pair<int64_t, int64_t>> shapes;  // (T, S)
        if (h == most_heads) shapes.emplace_back(kMaxDrawnTokens, short_seq);
        if (lim.max_seq >= kShortSeqLimit && long_tokens >= 1)
          shapes.emplace_back(long_tokens, lim.max_seq);
        for (const auto& [T, S] : shapes) {
          p.tokens = T;
          p.seq = S;
          // poly3 raises the tile to S / 128 keys (draw_kernel_math).
          s.cfg.tile = std::max(kMaxDrawnTile, (S + kPoly3MaxRescales - 1) / kPoly3MaxRescales);
          s.chunks = {S};
          s.batch.clear();
          consider(s);
        }
        if (lim.allows(Feature::batch) &&
            h == most_heads) {  // dcp-batch: the most requests, each the longest
          p.tokens = kMaxDrawnTokens;
          p.seq = std::min(kMaxBatchRequestKeys, lim.max_seq);
          s.cfg.tile = kMaxDrawnTile;
          s.chunks = {p.seq};
          s.batch.assign(kMaxBatchRequests, p.seq);
          consider(s);
        }
      }
    }
  }
  return out;
}

DcpSetup draw_dcp(DcpDraw what) {
  if (what == DcpDraw::batch) return draw_dcp_batch_setup({});
  return *gen_dcp_setup({}, what == DcpDraw::path ? CacheKind::values : CacheKind::fp8);
}

std::optional<std::string> fixed_tolerance_flags(const DcpBackend& backend, const DcpSetup& s) {
  gpu::DcpInputs in;
  if (s.batch.empty()) {
    in = to_dcp_inputs(make_case(s.spec), s.chunks);
  } else {
    oracle::Expected<gpu::DcpInputs> b =
        to_dcp_batch_inputs(batch_cases(s), {s.shared_prefix, s.retired});
    if (!b) return b.status().message();
    in = std::move(*b);
  }
  gpu::DcpConfig single = s.cfg;
  single.layout = {1, 1};
  // Scales by page follow the pages of N ranks; one rank's pages group other tokens, so the
  // reference keeps the same scales by token.
  single.page_scales = false;
  const gpu::Result<gpu::GroupRun> got = backend(in, s.cfg), want = backend(in, single);
  if (!got || !want)  // the engines' test fails too: the step errs at one of the sizes
    return (got ? want : got).status().message();
  const double tol = engine_test_tolerance(s);  // atol and rtol alike
  for (size_t i = 0; i < got->o.size(); ++i) {
    const double a = got->o[i], b = want->o[i];
    // NaN is never close (allclose without equal_nan).
    if (a == b || std::fabs(a - b) <= tol + tol * std::fabs(b)) continue;
    return "O element " + std::to_string(i) + " " + std::to_string(a) +
           " at DCP = " + std::to_string(s.cfg.layout.ranks) + ", " + std::to_string(b) +
           " at DCP = 1 (atol = rtol = " + std::to_string(tol) + ")";
  }
  return std::nullopt;
}

std::vector<SuiteProperty> property_suite(const DcpBackend& backend, const DcpLimits& lim) {
  std::vector<SuiteProperty> dcp;  // the DCP path's, for the caches the limits allow
  if (!cache_formats(lim, CacheKind::values).empty())
    dcp.push_back({"dcp-path",
                   "output and every rank's partial of a whole DCP step within the derived bound",
                   [backend, lim] { dcp_path_property(backend, lim, CacheKind::values); }});
  if (!cache_formats(lim, CacheKind::fp8).empty())
    dcp.push_back({"dcp-fp8",
                   "the same with quantized KV caches (fp8, int8) and no scales, or scales per "
                   "tensor, KV head or token",
                   [backend, lim] { dcp_path_property(backend, lim, CacheKind::fp8); }});
  if (lim.allows(Feature::batch))
    dcp.push_back({"dcp-batch",
                   "a decode batch over one fragmented paged pool, sharing a prefix's pages and "
                   "reusing freed ones: each live request's output and partials within its own "
                   "oracle's bound",
                   [backend, lim] { dcp_batch_property(backend, lim); }});
  std::vector<SuiteProperty> rest = {
      {"mla-slice", "the absorbed-MLA slice on the DCP path equals the unabsorbed oracle",
       mla_slice_property},
      {"layout-bijection", "owner/row is a bijection with position as its inverse",
       layout_bijection_property},
      {"layout-count", "count and chunk shares equal brute force at any offset",
       layout_count_property},
      {"kv-writes",
       "chunked KV writes store each token on its owner, in its row, only, in every cache format "
       "(copied or quantized with its scales)",
       kv_write_property},
  };
  dcp.insert(dcp.end(), rest.begin(), rest.end());
  return dcp;
}

}  // namespace dcp::props
