#include "gpu/dcp_step.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace dcp::gpu {

KvSource::KvSource(std::vector<float> values) {
  auto held = std::make_shared<std::vector<float>>(std::move(values));
  data = held->data();
  numel = static_cast<int64_t>(held->size());
  owner = std::move(held);
}

Result<DcpGeometry> DcpGeometry::create(const DcpConfig& cfg, const AttentionDims& d) {
  DCP_GPU_TRY(validate_layout(cfg.layout));
  const int64_t n = cfg.layout.ranks;
  if (cfg.tp_size < 1)
    return DCP_GPU_ERROR("DcpConfig.tp_size: got ", cfg.tp_size, "; expected >= 1");
  if (cfg.tp_size % n != 0)
    return DCP_GPU_ERROR("DcpConfig.tp_size ", cfg.tp_size,
                         " is not a multiple of DcpLayout.ranks ", n);
  if (d.tokens < 1 || d.q_heads < 1 || d.kv_heads < 1 || d.head_dim < 1 || d.v_dim < 1)
    return DCP_GPU_ERROR(
        "AttentionDims: tokens, q_heads, kv_heads, head_dim and v_dim must be >= 1");
  if (d.q_heads % d.kv_heads != 0)
    return DCP_GPU_ERROR("AttentionDims.q_heads ", d.q_heads,
                         " is not a multiple of AttentionDims.kv_heads ", d.kv_heads);
  if (d.q_heads % cfg.tp_size != 0)
    return DCP_GPU_ERROR("AttentionDims.q_heads ", d.q_heads,
                         " is not a multiple of DcpConfig.tp_size ", cfg.tp_size);
  if (d.shared_latent && d.v_dim > d.head_dim)
    return DCP_GPU_ERROR("AttentionDims.v_dim ", d.v_dim, " exceeds AttentionDims.head_dim ",
                         d.head_dim, " for a shared latent");
  if (cfg.tile < 1) return DCP_GPU_ERROR("DcpConfig.tile: got ", cfg.tile, "; expected >= 1");
  if (cfg.splits < 1) return DCP_GPU_ERROR("DcpConfig.splits: got ", cfg.splits, "; expected >= 1");
  if (cfg.page_size < 0)
    return DCP_GPU_ERROR("DcpConfig.page_size: got ", cfg.page_size,
                         "; expected >= 0 (0: not paged)");
  if (cfg.page_size > 0 && cfg.page_size % cfg.layout.interleave != 0)
    return DCP_GPU_ERROR("DcpConfig.page_size: got ", cfg.page_size,
                         "; expected a multiple of the interleave ", cfg.layout.interleave,
                         " (a virtual page of page_size N slots holds whole interleave blocks)");
  if (cfg.strategy == CommStrategy::a2a && cfg.math.merge != StorageFormat::f32)
    return DCP_GPU_ERROR("DcpConfig.math.merge: got ", format_name(cfg.math.merge),
                         "; a2a merges in fp32 on the receiving rank (a 16-bit sum is ag_rs's "
                         "reduce-scatter)");
  DcpGeometry g;
  g.n = n;
  g.tp = cfg.tp_size;
  g.h_loc = d.q_heads / cfg.tp_size;
  g.hg = n * g.h_loc;
  g.group_size = d.q_heads / d.kv_heads;
  return g;
}

int64_t DcpInputs::request_of(int64_t t) const {
  if (!batched()) return 0;
  const auto it = std::upper_bound(cu_seqlens_q.begin(), cu_seqlens_q.end(), t);
  return static_cast<int64_t>(it - cu_seqlens_q.begin()) - 1;
}

int64_t DcpInputs::longest_request() const {
  int64_t most = 0;
  for (int64_t b = 0; b < requests(); ++b) most = std::max(most, request_seq(b));
  return most;
}

int64_t DcpInputs::shortest_request() const {
  int64_t least = request_seq(0);
  for (int64_t b = 1; b < requests(); ++b) least = std::min(least, request_seq(b));
  return least;
}

namespace {

// A batch's offsets, its paging and its shared prefix: what validate_inputs adds for a batch.
GpuStatus validate_batch(const DcpInputs& in, const DcpConfig& cfg) {
  const std::vector<int64_t>&cq = in.cu_seqlens_q, &ck = in.cu_seqlens_k;
  if (cq.size() < 2)
    return DCP_GPU_ERROR("tensor 'cu_seqlens_q': ", cq.size(), " elements; expected B + 1, B >= 1");
  if (ck.size() != cq.size())
    return DCP_GPU_ERROR("tensor 'cu_seqlens_k': ", ck.size(),
                         " elements; expected cu_seqlens_q's ", cq.size(), " (B + 1)");
  if (cq.front() != 0 || ck.front() != 0)
    return DCP_GPU_ERROR("tensors 'cu_seqlens_q', 'cu_seqlens_k': must start at 0");
  const auto requests = static_cast<int64_t>(cq.size()) - 1;
  if (in.retired < 0 || in.retired >= requests)
    return DCP_GPU_ERROR("DcpInputs.retired: got ", in.retired, "; expected [0, ", requests,
                         "), a live request at least");
  for (size_t b = 1; b < cq.size(); ++b) {
    const bool live = static_cast<int64_t>(b) > in.retired;
    if (live && cq[b] <= cq[b - 1])
      return DCP_GPU_ERROR("tensor 'cu_seqlens_q': element [", b, "] = ", cq[b],
                           "; expected more than element [", b - 1,
                           "] (a query token per live request)");
    if (!live && cq[b] != cq[b - 1])
      return DCP_GPU_ERROR("tensor 'cu_seqlens_q': element [", b, "] = ", cq[b],
                           "; expected element [", b - 1, "]'s ", cq[b - 1], " (request ", b - 1,
                           " is retired: no query token)");
    if (ck[b] < ck[b - 1])
      return DCP_GPU_ERROR("tensor 'cu_seqlens_k': element [", b, "] = ", ck[b],
                           "; expected at least element [", b - 1, "]");
  }
  if (cq.back() != in.dims.tokens)
    return DCP_GPU_ERROR("tensor 'cu_seqlens_q': ends at ", cq.back(), "; expected the ",
                         in.dims.tokens, " query tokens");
  if (ck.back() != in.seq)
    return DCP_GPU_ERROR("tensor 'cu_seqlens_k': ends at ", ck.back(), "; expected the ", in.seq,
                         " keys of k");
  if (cfg.page_size <= 0)
    return DCP_GPU_ERROR("DcpConfig.page_size: a batch keeps its requests in a paged pool; got ",
                         cfg.page_size);
  if (!in.chunks.empty() || in.physical_rows != 0)
    return DCP_GPU_ERROR(
        "DcpInputs.chunks, physical_rows: set for a batch, whose requests write "
        "their own tokens into pages");
  const int64_t shortest = in.shortest_request();
  if (in.shared_prefix < 0 || in.shared_prefix > shortest)
    return DCP_GPU_ERROR("DcpInputs.shared_prefix: got ", in.shared_prefix, "; expected [0, ",
                         shortest, "], the shortest request's context");
  // The requests hold the same tokens in the prefix, as the one copy the cache keeps says.
  const AttentionDims& d = in.dims;
  const auto same_prefix = [&](const KvSource& x, int64_t width, const char* name) -> GpuStatus {
    const int64_t row = d.kv_heads * width * format_bytes(x.dtype);
    for (int64_t b = 1; b < in.requests(); ++b)
      for (int64_t p = 0; p < in.shared_prefix; ++p)
        if (std::memcmp(x.bytes_at((in.request_key0(b) + p) * d.kv_heads * width),
                        x.bytes_at(p * d.kv_heads * width), static_cast<size_t>(row)) != 0)
          return DCP_GPU_ERROR("tensor '", name, "': request ", b, " position ", p,
                               " differs from request 0's inside the shared prefix of ",
                               in.shared_prefix);
    return {};
  };
  DCP_GPU_TRY(same_prefix(in.k, d.head_dim, "k"));
  if (!d.shared_latent) DCP_GPU_TRY(same_prefix(in.v, d.v_dim, "v"));
  return {};
}

// cfg.page_scales: a paged cache, scales by token, every token of a rank-local page carrying the
// same ones. A token at position p lives in rank-local page floor(row(p) / P), the same for the
// tokens of one rank in [k N P, (k + 1) N P) (P is a multiple of I).
GpuStatus check_page_scales(const DcpInputs& in, const DcpConfig& cfg) {
  if (!cfg.page_scales) return {};
  if (cfg.page_size <= 0)
    return DCP_GPU_ERROR(
        "DcpConfig.page_scales: scales by page need a paged cache (page_size > 0)");
  if (in.kv_scale_grain != ScaleGrain::token)
    return DCP_GPU_ERROR("DcpConfig.page_scales: the inputs' scales are by head; scales by page ",
                         "are given by token ([S] or [S, Hkv]), the same over each page");
  const DcpLayout& lay = cfg.layout;
  const int64_t S = in.seq, N = lay.ranks, P = cfg.page_size;
  for (const auto& [sc, name] : {std::pair{&in.k_scale, "k_scale"}, {&in.v_scale, "v_scale"}}) {
    if (sc->empty() || S == 0) continue;
    const int64_t heads = static_cast<int64_t>(sc->size()) / S;
    // The first position of each (page index, rank): its scales stand for the page's.
    std::vector<int64_t> first(static_cast<size_t>(((S - 1) / (N * P) + 1) * N), -1);
    for (int64_t pos = 0; pos < S; ++pos) {
      const int64_t page = lay.row(pos) / P, r = lay.owner(pos);
      int64_t& f = first[static_cast<size_t>(page * N + r)];
      if (f < 0) {
        f = pos;
        continue;
      }
      for (int64_t g = 0; g < heads; ++g)
        if ((*sc)[static_cast<size_t>(pos * heads + g)] !=
            (*sc)[static_cast<size_t>(f * heads + g)])
          return DCP_GPU_ERROR("tensor '", name, "': tokens ", f, " and ", pos, " share rank ", r,
                               "'s page ", page, " but their scales differ (",
                               (*sc)[static_cast<size_t>(f * heads + g)], " and ",
                               (*sc)[static_cast<size_t>(pos * heads + g)],
                               "); DcpConfig.page_scales keeps one a page");
    }
  }
  return {};
}

}  // namespace

GpuStatus validate_inputs(const DcpInputs& in, const DcpConfig& cfg) {
  const AttentionDims& d = in.dims;
  Result<DcpGeometry> geo = DcpGeometry::create(cfg, d);
  if (!geo) return geo.status();
  const int64_t T = d.tokens, S = in.seq;
  auto size_err = [](const char* name, size_t got, int64_t want) {
    return DCP_GPU_ERROR("tensor '", name, "': ", got, " elements; expected ", want);
  };
  if (S < 0) return DCP_GPU_ERROR("DcpInputs.seq: got ", S, "; expected >= 0");
  if (in.q.size() != static_cast<size_t>(T * d.q_heads * d.head_dim))
    return size_err("q", in.q.size(), T * d.q_heads * d.head_dim);
  if (in.k.size() != S * d.kv_heads * d.head_dim)
    return size_err("k", static_cast<size_t>(in.k.size()), S * d.kv_heads * d.head_dim);
  if (!d.shared_latent && in.v.size() != S * d.kv_heads * d.v_dim)
    return size_err("v", static_cast<size_t>(in.v.size()), S * d.kv_heads * d.v_dim);
  if (d.shared_latent && !in.v.empty())
    return DCP_GPU_ERROR("tensor 'v': must be empty for a shared latent");
  if (in.k.size() > 0 && in.k.data == nullptr)
    return DCP_GPU_ERROR("tensor 'k': ", in.k.size(), " elements at a null pointer");
  if (in.v.size() > 0 && in.v.data == nullptr)
    return DCP_GPU_ERROR("tensor 'v': ", in.v.size(), " elements at a null pointer");
  if (!d.shared_latent && in.v.dtype != in.k.dtype)
    return DCP_GPU_ERROR("tensor 'v': ", format_name(in.v.dtype), " elements; expected k's ",
                         format_name(in.k.dtype));
  if (!d.shared_latent && in.v.quantize != in.k.quantize)
    return DCP_GPU_ERROR("tensor 'v': quantize is ", in.v.quantize ? "true" : "false",
                         "; expected k's, ", in.k.quantize ? "true" : "false");
  if (in.kv_scale_grain == ScaleGrain::page)
    return DCP_GPU_ERROR("DcpInputs.kv_scale_grain: page; inputs give scales by head or token ",
                         "(DcpConfig.page_scales keeps scales by token one a page)");
  const bool by_token = in.kv_scale_grain == ScaleGrain::token;
  if (by_token && in.batched() && !(in.k_scale.empty() && in.v_scale.empty()))
    return DCP_GPU_ERROR("tensor '", in.k_scale.empty() ? "v_scale" : "k_scale",
                         "': scales by token in a batch; a batch's are by head");
  const auto check_scale = [&](const std::vector<float>& sc, const char* name) -> GpuStatus {
    const auto n = static_cast<int64_t>(sc.size());
    if (!by_token && n != 0 && n != 1 && n != d.kv_heads)
      return DCP_GPU_ERROR("tensor '", name, "': ", sc.size(), " elements; expected none, 1 (per ",
                           "tensor) or ", d.kv_heads, " (per KV head)");
    if (by_token && n != 0 && n != in.seq && n != in.seq * d.kv_heads)
      return DCP_GPU_ERROR("tensor '", name, "': ", sc.size(),
                           " elements by token; expected none, ", in.seq, " (per token) or ",
                           in.seq * d.kv_heads, " (per token and KV head)");
    for (size_t g = 0; g < sc.size(); ++g)
      if (!std::isfinite(sc[g]) || !(sc[g] > 0.0f))
        return DCP_GPU_ERROR("tensor '", name, "': element [", g, "] = ", sc[g],
                             "; expected a finite scale > 0");
    return {};
  };
  DCP_GPU_TRY(check_scale(in.k_scale, "k_scale"));
  DCP_GPU_TRY(check_scale(in.v_scale, "v_scale"));
  if (by_token && !in.k_scale.empty() && !in.v_scale.empty() &&
      in.v_scale.size() != in.k_scale.size())
    return DCP_GPU_ERROR("tensor 'v_scale': ", in.v_scale.size(), " elements by token; expected ",
                         "k_scale's ", in.k_scale.size());
  if (d.shared_latent && !in.v_scale.empty())
    return DCP_GPU_ERROR(
        "tensor 'v_scale': given for a shared latent, whose V is K (k_scale "
        "scales both)");
  DCP_GPU_TRY(check_page_scales(in, cfg));
  if (in.q_pos.size() != static_cast<size_t>(T)) return size_err("q_pos", in.q_pos.size(), T);
  for (int64_t t = 0; t < T; ++t) {
    if (in.q_pos[static_cast<size_t>(t)] < 0)
      return DCP_GPU_ERROR("tensor 'q_pos': element [", t, "] = ", in.q_pos[static_cast<size_t>(t)],
                           "; expected >= 0");
  }
  if (in.batched()) DCP_GPU_TRY(validate_batch(in, cfg));
  if (!in.batched() && !in.cu_seqlens_k.empty())
    return DCP_GPU_ERROR("tensor 'cu_seqlens_k': given without cu_seqlens_q (a batch needs both)");
  if (in.shared_prefix != 0 && !in.batched())
    return DCP_GPU_ERROR("DcpInputs.shared_prefix: got ", in.shared_prefix,
                         "; a shared prefix needs a batch (cu_seqlens_q, cu_seqlens_k)");
  if (in.retired != 0 && !in.batched())
    return DCP_GPU_ERROR("DcpInputs.retired: got ", in.retired,
                         "; retired requests need a batch (cu_seqlens_q, cu_seqlens_k)");
  for (const HeadVector& hv : kHeadVectors) {
    const std::vector<float>& x = in.*hv.values;
    if (!x.empty() && x.size() != static_cast<size_t>(d.q_heads))
      return size_err(hv.name, x.size(), d.q_heads);
  }
  if (in.topk_k < 0) return DCP_GPU_ERROR("DcpInputs.topk_k: got ", in.topk_k, "; expected >= 0");
  if (!in.topk.empty()) {
    if (in.topk.size() != static_cast<size_t>(T * in.topk_k))
      return size_err("topk", in.topk.size(), T * in.topk_k);
    for (size_t x = 0; x < in.topk.size(); ++x) {
      const int64_t p = in.topk[x], t = static_cast<int64_t>(x) / in.topk_k;
      const int64_t s_t = in.batched() ? in.request_seq(in.request_of(t)) : S;
      if (p < -1 || p >= s_t)
        return DCP_GPU_ERROR("tensor 'topk': element [", t, ", ",
                             static_cast<int64_t>(x) % in.topk_k, "] = ", p,
                             "; expected -1 or a position in [0, ", s_t, ")");
    }
  }
  if (in.window < 0) return DCP_GPU_ERROR("DcpInputs.window: got ", in.window, "; expected >= 0");
  if (!(in.softcap >= 0.0f))
    return DCP_GPU_ERROR("DcpInputs.softcap: got ", in.softcap, "; expected >= 0");
  int64_t sum = 0;
  for (size_t i = 0; i < in.chunks.size(); ++i) {
    if (in.chunks[i] < 0)
      return DCP_GPU_ERROR("chunks: element [", i, "] = ", in.chunks[i], "; expected >= 0");
    sum += in.chunks[i];
  }
  if (!in.chunks.empty() && sum != S)
    return DCP_GPU_ERROR("chunks: lengths sum to ", sum, "; expected the context length ", S);
  return {};
}

namespace {

// The rows a rank keeps for the context: in.physical_rows, or just enough for the longest request.
int64_t spec_rows(const DcpInputs& in, const DcpLayout& lay) {
  if (in.physical_rows > 0) return in.physical_rows;
  const int64_t longest = in.longest_request();
  const int64_t cycle = lay.interleave * lay.ranks;
  return (longest + cycle - 1) / cycle * lay.interleave;
}

// The pages of a paged cache: a request's, those the requests share, and all used.
struct PageCounts {
  std::vector<int64_t> pages;  // [requests]
  int64_t stride = 0, shared = 0, used = 0;
};
PageCounts page_counts(const DcpInputs& in, const DcpConfig& cfg) {
  const int64_t P = cfg.page_size, virtual_page = P * cfg.layout.ranks;
  PageCounts c;
  c.stride = (spec_rows(in, cfg.layout) + P - 1) / P;
  if (!in.batched()) {
    c.pages = {c.stride};
    c.used = c.stride;
    return c;
  }
  c.shared = in.shared_prefix / virtual_page;  // whole virtual pages only
  c.used = c.shared;
  for (int64_t b = 0; b < in.requests(); ++b) {
    c.pages.push_back((in.request_seq(b) + virtual_page - 1) / virtual_page);
    c.used += c.pages.back() - c.shared;
  }
  return c;
}

}  // namespace

Result<KvCacheSpec> rank_cache_spec(const DcpInputs& in, const DcpConfig& cfg, int64_t tp_rank) {
  Result<DcpGeometry> geo = DcpGeometry::create(cfg, in.dims);
  if (!geo) return geo.status();
  const AttentionDims& d = in.dims;
  const DcpLayout& lay = cfg.layout;
  KvCacheSpec spec;
  spec.layout = lay;
  spec.rank = geo->dcp_rank(tp_rank);
  spec.physical_rows = spec_rows(in, lay);
  spec.kv_head0 = geo->kv_head0(tp_rank);
  spec.kv_heads = geo->kv_heads(tp_rank);
  spec.head_dim = d.head_dim;
  spec.v_dim = d.v_dim;
  spec.shared_latent = d.shared_latent;
  spec.dtype = in.kv_dtype;
  spec.scale_grain = in.kv_scale_grain == ScaleGrain::token && cfg.page_scales && cfg.page_size > 0
                         ? ScaleGrain::page
                         : in.kv_scale_grain;
  // By token (or page): one scale per token when the inputs' are (S == S x Hkv only for one KV
  // head).
  const std::vector<float>& scales = in.k_scale.empty() ? in.v_scale : in.k_scale;
  spec.scale_heads =
      in.kv_scale_grain == ScaleGrain::token && static_cast<int64_t>(scales.size()) != in.seq
          ? spec.kv_heads
          : 1;
  if (cfg.page_size > 0) {
    const int64_t used = page_counts(in, cfg).used;
    spec.page_size = cfg.page_size;
    spec.pool_pages = used + (used + 1) / 2;  // one free page for every two used
  }
  return spec;
}

Result<PagePlan> plan_pages(const DcpInputs& in, const DcpConfig& cfg) {
  PagePlan plan;
  if (cfg.page_size <= 0) return plan;
  DCP_GPU_TRY(validate_layout(cfg.layout));
  if (in.batched() && in.cu_seqlens_k.size() != in.cu_seqlens_q.size())
    return DCP_GPU_ERROR("tensor 'cu_seqlens_k': ", in.cu_seqlens_k.size(),
                         " elements; expected cu_seqlens_q's ", in.cu_seqlens_q.size());
  if (cfg.page_size % cfg.layout.interleave != 0)
    return DCP_GPU_ERROR("DcpConfig.page_size: got ", cfg.page_size,
                         "; expected a multiple of the interleave ", cfg.layout.interleave);
  for (int64_t b = 0; b < in.requests(); ++b)
    if (in.request_seq(b) < 0)
      return DCP_GPU_ERROR("kv cache: request ", b, " has ", in.request_seq(b), " keys");
  const int64_t shortest = in.shortest_request();
  if (in.shared_prefix < 0 || in.shared_prefix > shortest)
    return DCP_GPU_ERROR("DcpInputs.shared_prefix: got ", in.shared_prefix, "; expected [0, ",
                         shortest, "]");
  if (in.retired < 0 || in.retired >= in.requests())
    return DCP_GPU_ERROR("DcpInputs.retired: got ", in.retired, "; expected [0, ", in.requests(),
                         ")");
  const PageCounts c = page_counts(in, cfg);
  plan.page_size = cfg.page_size;
  plan.pool_pages = c.used + (c.used + 1) / 2;
  plan.stride = c.stride;
  plan.shared_pages = c.shared;
  if (plan.pool_pages > INT32_MAX)
    return DCP_GPU_ERROR("kv cache: ", plan.pool_pages, " pages exceed the block table's int32");
  // splitmix64 (Steele, Lea, Flood 2014): a platform-independent stream for the shuffle.
  uint64_t state = cfg.page_seed ^ 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<int32_t> free_list(static_cast<size_t>(plan.pool_pages));
  for (size_t i = 0; i < free_list.size(); ++i) free_list[i] = static_cast<int32_t>(i);
  for (size_t i = free_list.size(); i > 1; --i)  // Fisher-Yates
    std::swap(free_list[i - 1], free_list[static_cast<size_t>(next() % i)]);
  size_t taken = 0, reused = 0;
  // The next free page: a freed one while any is left (the last freed first), else a new one.
  const auto next_page = [&] {
    return reused < plan.freed.size() ? plan.freed[plan.freed.size() - ++reused]
                                      : free_list[taken++];
  };
  plan.tables.assign(static_cast<size_t>(in.requests() * plan.stride), -1);
  for (int64_t b = 0; b < in.requests(); ++b) {
    if (b == in.retired && b > 0)  // the retired requests finish: their own pages are freed
      for (int64_t r = 0; r < in.retired; ++r)
        for (int64_t j = c.shared; j < c.pages[static_cast<size_t>(r)]; ++j)
          plan.freed.push_back(plan.tables[static_cast<size_t>(r * plan.stride + j)]);
    int32_t* t = plan.tables.data() + b * plan.stride;
    for (int64_t j = 0; j < c.pages[static_cast<size_t>(b)]; ++j)
      t[j] = j < c.shared && b > 0 ? plan.tables[static_cast<size_t>(j)] : next_page();
  }
  return plan;
}

int64_t widened_slot(const PagePlan& plan, const int32_t* table, const DcpLayout& lay,
                     int64_t pos) {
  const int64_t virtual_page = plan.page_size * lay.ranks;
  return table[pos / virtual_page] * virtual_page + pos % virtual_page;
}

float input_scale(const DcpInputs& in, const std::vector<float>& s, int64_t row, int64_t g) {
  if (in.kv_scale_grain == ScaleGrain::head)
    return s.size() == 1 ? s[0] : s[static_cast<size_t>(g)];
  const bool per_token = static_cast<int64_t>(s.size()) == in.seq;  // else [S, Hkv]
  return s[static_cast<size_t>(per_token ? row : row * in.dims.kv_heads + g)];
}

KvScales rank_kv_scales(const DcpInputs& in, const KvCacheSpec& spec) {
  const auto local = [&](const std::vector<float>& s) {
    if (spec.scale_grain != ScaleGrain::head)  // each slot's or page's, stored by the KV write
      return std::vector<float>(s.empty() ? 0 : static_cast<size_t>(scale_entries(spec)), 0.0f);
    std::vector<float> out;
    for (int64_t g = 0; g < (s.empty() ? 0 : spec.kv_heads); ++g)
      out.push_back(input_scale(in, s, 0, spec.kv_head0 + g));
    return out;
  };
  return KvScales{local(in.k_scale), local(in.v_scale)};
}

std::vector<int64_t> write_chunks(const DcpInputs& in, int64_t b, int64_t from) {
  if (!in.batched()) return in.chunks.empty() ? std::vector<int64_t>{in.seq} : in.chunks;
  const int64_t own = in.request_seq(b) - from;
  if (own <= 1) return own == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{};
  return {own - 1, 1};
}

ChunkRows chunk_rows(const DcpInputs& in, const KvCacheSpec& spec, int64_t pos0, int64_t len,
                     int64_t b) {
  const AttentionDims& d = in.dims;
  const int64_t H = spec.kv_heads, dk = d.head_dim, dv = d.v_dim;
  ChunkRows c;
  c.dtype = in.k.dtype;
  c.quantize = in.k.quantize;
  const int64_t e = format_bytes(c.dtype);
  c.k.resize(static_cast<size_t>(len * H * dk * e));
  c.v.resize(d.shared_latent ? 0 : static_cast<size_t>(len * H * dv * e));
  for (int64_t i = 0; i < len; ++i) {
    const int64_t pos = in.request_key0(b) + pos0 + i;  // the row of k and v
    std::copy_n(in.k.bytes_at((pos * d.kv_heads + spec.kv_head0) * dk), H * dk * e,
                &c.k[static_cast<size_t>(i * H * dk * e)]);
    if (!d.shared_latent)
      std::copy_n(in.v.bytes_at((pos * d.kv_heads + spec.kv_head0) * dv), H * dv * e,
                  &c.v[static_cast<size_t>(i * H * dv * e)]);
  }
  if (spec.scale_grain != ScaleGrain::head) {  // each row's scales, of the spec's KV heads
    const auto rows = [&](const std::vector<float>& sc, std::vector<float>& out) {
      for (int64_t i = 0; i < (sc.empty() ? 0 : len); ++i) {
        const int64_t pos = in.request_key0(b) + pos0 + i;  // the row of k and v, as above
        for (int64_t g = 0; g < spec.scale_heads; ++g)
          out.push_back(input_scale(in, sc, pos, spec.kv_head0 + g));
      }
    };
    rows(in.k_scale, c.k_scale);
    rows(in.v_scale, c.v_scale);
  }
  return c;
}

GpuStatus check_group_comm(const DcpGeometry& geo, int64_t tp_rank, int64_t comm_rank,
                           int64_t comm_size) {
  if (comm_size != geo.n || comm_rank != geo.dcp_rank(tp_rank))
    return DCP_GPU_ERROR("communicator: rank ", comm_rank, " of ", comm_size, "; tp rank ", tp_rank,
                         " needs dcp rank ", geo.dcp_rank(tp_rank), " of ", geo.n);
  return {};
}

PartialAttentionParams rank_attention_params(const DcpInputs& in, const DcpConfig& cfg,
                                             const DcpGeometry& geo, const KvCacheSpec& spec,
                                             int64_t tp_rank) {
  const AttentionDims& d = in.dims;
  PartialAttentionParams p;
  p.tokens = d.tokens;
  p.heads = geo.hg;
  p.head_dim = d.head_dim;
  p.head0 = geo.group_head0(tp_rank);
  p.q_heads_total = d.q_heads;
  p.kv_heads_total = d.kv_heads;
  const int64_t longest = in.longest_request();
  p.seq = longest;
  p.layout = cfg.layout;
  p.rank = geo.dcp_rank(tp_rank);
  p.rows = cfg.layout.count(p.rank, longest);
  p.kv = kv_view(spec, nullptr, nullptr, nullptr);  // shapes; the device's pointers come later
  p.kv_head0 = spec.kv_head0;
  p.v_dim = d.v_dim;
  p.scale = in.scale;
  p.causal = in.causal;
  p.window = in.window;
  p.softcap = in.softcap;
  p.topk_k = in.topk_k;
  p.base = cfg.base;
  p.tile = cfg.tile;
  p.splits = cfg.splits;
  p.exp = cfg.math.exp;
  p.p_cast = cfg.math.p_cast;
  p.tf32 = cfg.math.tf32;
  return p;
}

std::vector<float> rank_queries(const DcpInputs& in, const DcpConfig& cfg, const DcpGeometry& geo,
                                int64_t tp_rank) {
  const AttentionDims& d = in.dims;
  const int64_t head0 = cfg.replicate_q ? geo.group_head0(tp_rank) : geo.local_head0(tp_rank);
  const int64_t nh = cfg.replicate_q ? geo.hg : geo.h_loc;
  std::vector<float> q(static_cast<size_t>(d.tokens * nh * d.head_dim));
  for (int64_t t = 0; t < d.tokens; ++t)
    std::copy_n(&in.q[static_cast<size_t>((t * d.q_heads + head0) * d.head_dim)], nh * d.head_dim,
                &q[static_cast<size_t>(t * nh * d.head_dim)]);
  return q;
}

}  // namespace dcp::gpu
