#include "properties/dcp_setup.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <utility>

#include "oracle/text.hpp"
#include "properties/dcp_bridge.hpp"

namespace dcp::props {

std::vector<int64_t> make_chunks(int64_t seq, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int64_t> out;
  for (int64_t done = 0; done < seq;) {
    const int64_t left = seq - done;
    const int64_t len =
        std::bernoulli_distribution(0.4)(g)
            ? 1
            : std::uniform_int_distribution<int64_t>(1, std::min(left, kMaxWriteChunk))(g);
    out.push_back(len);
    done += len;
  }
  return out;
}

oracle::Status validate_setup(const DcpSetup& s, const SetupNames& n) {
  const CaseSpec& c = s.spec;
  const gpu::DcpConfig& g = s.cfg;
  auto range = [](const char* name, auto v, auto lo, auto hi) -> oracle::Status {
    if (v >= lo && v <= hi) return {};
    return DCP_ERROR(name, ": got ", v, "; expected ", lo, " .. ", hi);
  };
  const std::pair<const char*, int64_t> extents[] = {{n.tokens, c.tokens},
                                                     {n.q_heads, c.q_heads},
                                                     {n.kv_heads, c.kv_heads},
                                                     {n.head_dim, c.head_dim},
                                                     {n.v_dim, c.v_dim}};
  for (const auto& [name, v] : extents) DCP_TRY(range(name, v, int64_t{1}, kMaxExtent));
  if (c.q_heads % c.kv_heads != 0)
    return DCP_ERROR(n.q_heads, " ", c.q_heads, " is not a multiple of ", n.kv_heads, " ",
                     c.kv_heads);
  if (c.shared_latent && c.v_dim > c.head_dim)
    return DCP_ERROR(n.v_dim, " ", c.v_dim, " is larger than ", n.head_dim, " ", c.head_dim,
                     ": a shared latent's V is the first Dv components of K");
  DCP_TRY(range(n.seq, c.seq, int64_t{0}, kMaxSeq));
  DCP_TRY(range(n.window, c.window, int64_t{0}, kMaxSeq));
  if (!(c.softcap >= 0.0) || !std::isfinite(c.softcap))
    return DCP_ERROR(n.softcap, ": got ", c.softcap, "; expected a finite number >= 0");
  // The kernels keep the cap in fp32 (DcpInputs::softcap): outside fp32's normal range it would
  // become 0 (no cap), inf or a subnormal, not the cap the oracle applies.
  if (c.softcap != 0.0 && (c.softcap < std::numeric_limits<float>::min() ||
                           c.softcap > std::numeric_limits<float>::max()))
    return DCP_ERROR(n.softcap, ": got ", c.softcap,
                     "; expected 0 (none) or a normal fp32 number, in [",
                     std::numeric_limits<float>::min(), ", ", std::numeric_limits<float>::max(),
                     "] (the kernels keep the cap in fp32)");
  DCP_TRY(range(n.topk, c.topk, int64_t{0}, kMaxSeq));
  DCP_TRY(range(n.dcp_size, g.layout.ranks, int64_t{1}, kMaxRanks));
  DCP_TRY(range(n.tp_size, g.tp_size, int64_t{1}, kMaxRanks));
  DCP_TRY(range(n.interleave, g.layout.interleave, int64_t{1}, kMaxInterleave));
  if (g.tp_size % g.layout.ranks != 0)
    return DCP_ERROR(n.tp_size, " ", g.tp_size, " is not a multiple of ", n.dcp_size, " ",
                     g.layout.ranks);
  if (c.q_heads % g.tp_size != 0)
    return DCP_ERROR(n.q_heads, " ", c.q_heads, " is not a multiple of ", n.tp_size, " ",
                     g.tp_size);
  DCP_TRY(range(n.tile, g.tile, int64_t{1}, kMaxSeq));
  DCP_TRY(range(n.splits, g.splits, int64_t{1}, kMaxSeq));
  DCP_TRY(range(n.page_size, g.page_size, int64_t{0}, kMaxSeq));
  if (g.page_size > 0 && g.page_size % g.layout.interleave != 0)
    return DCP_ERROR(n.page_size, " ", g.page_size, " is not a multiple of ", n.interleave, " ",
                     g.layout.interleave,
                     " (a virtual page of page_size N slots holds whole "
                     "interleave blocks)");
  if (c.kv_scale != KvScale::none && !oracle::is_quantized(c.kv_dtype))
    return DCP_ERROR(n.kv_scale, ": scales are for fp8 and int8 caches; K/V are ",
                     oracle::dtype_name(c.kv_dtype));
  if (scales_by_page(c.kv_scale) && g.page_size <= 0)
    return DCP_ERROR(n.kv_scale, " ", kv_scale_name(c.kv_scale),
                     ": scales by page need a paged cache; set ", n.page_size);
  if (scales_by_page(c.kv_scale) != g.page_scales ||
      (g.page_scales &&
       (c.scale_pages.ranks != g.layout.ranks || c.scale_pages.interleave != g.layout.interleave ||
        c.scale_pages.page_size != g.page_size)))
    return DCP_ERROR(n.kv_scale, " ", kv_scale_name(c.kv_scale),
                     ": the setup's pages and its scales' disagree (follow_pages sets both)");
  if (g.strategy == gpu::CommStrategy::a2a && g.math.merge != gpu::StorageFormat::f32)
    return DCP_ERROR(n.merge, ": got ", gpu::format_name(g.math.merge),
                     "; a2a merges in fp32 (a 16-bit sum is ag_rs's reduce-scatter)");
  int64_t sum = 0;
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const int64_t len = s.chunks[i];
    if (len < 1 || len > c.seq - sum)
      return DCP_ERROR(n.chunks, ": element [", i, "] = ", len, "; expected 1 .. ", c.seq - sum,
                       " (lengths summing to ", n.seq, " ", c.seq, ")");
    sum += len;
  }
  if (sum != c.seq)
    return DCP_ERROR(n.chunks, ": lengths sum to ", sum, "; expected ", n.seq, " ", c.seq);
  if (s.batch.empty()) {
    if (s.shared_prefix != 0)
      return DCP_ERROR(n.shared_prefix, " ", s.shared_prefix,
                       ": a shared prefix is a batch's; "
                       "give ",
                       n.batch);
    if (s.retired != 0)
      return DCP_ERROR(n.retired, " ", s.retired, ": retired requests are a batch's; give ",
                       n.batch);
    return {};
  }
  if (static_cast<int64_t>(s.batch.size()) > kMaxBatch)
    return DCP_ERROR(n.batch, ": ", s.batch.size(), " requests; expected at most ", kMaxBatch);
  if (g.page_size <= 0)
    return DCP_ERROR(n.batch, ": a batch in one step keeps its requests in a paged pool; set ",
                     n.page_size);
  if (scales_by_token(c.kv_scale))
    return DCP_ERROR(n.kv_scale, " ", kv_scale_name(c.kv_scale),
                     ": a batch shares its requests' scales; expected tensor or head");
  int64_t longest = 0, shortest = kMaxSeq;
  for (size_t b = 0; b < s.batch.size(); ++b) {
    if (s.batch[b] < 0 || s.batch[b] > kMaxSeq)
      return DCP_ERROR(n.batch, ": element [", b, "] = ", s.batch[b], "; expected 0 .. ", kMaxSeq);
    longest = std::max(longest, s.batch[b]);
    shortest = std::min(shortest, s.batch[b]);
  }
  if (c.seq != longest)
    return DCP_ERROR(n.seq, " ", c.seq, ": expected the longest request's ", longest, " keys");
  if (s.shared_prefix < 0 || s.shared_prefix > shortest)
    return DCP_ERROR(n.shared_prefix, " ", s.shared_prefix, ": expected 0 .. ", shortest,
                     ", the shortest request's context");
  if (s.retired < 0 || s.retired >= static_cast<int64_t>(s.batch.size()))
    return DCP_ERROR(n.retired, " ", s.retired, ": expected 0 .. ", s.batch.size() - 1,
                     " (a live request at least)");
  return {};
}

std::vector<oracle::Case> batch_cases(const DcpSetup& s) {
  const std::vector<int64_t> tokens(s.batch.size(), s.spec.tokens);
  return make_batch_cases(s.spec, s.batch, tokens, s.shared_prefix);
}

DcpCheck check_dcp_setup(const DcpSetup& s, const DcpBackend& backend, const oracle::Watch& watch) {
  if (s.batch.empty()) return check_dcp(make_case(s.spec), s.cfg, s.chunks, backend, true, watch);
  return check_dcp_batch(batch_cases(s), {s.shared_prefix, s.retired}, s.cfg, backend, true, watch);
}

std::string describe(const DcpSetup& s) {
  std::ostringstream os;
  os << describe(s.spec) << " | " << describe(s.cfg) << " | chunks=" << s.chunks.size();
  if (!s.batch.empty()) {
    os << " | batch=";
    for (size_t b = 0; b < s.batch.size(); ++b) os << (b > 0 ? "," : "") << s.batch[b];
    os << " shared_prefix=" << s.shared_prefix;
    if (s.retired > 0) os << " retired=" << s.retired;
  }
  return os.str();
}

void follow_pages(DcpSetup& s) {
  s.cfg.page_scales = scales_by_page(s.spec.kv_scale) && s.cfg.page_size > 0;
  if (s.cfg.page_scales)
    s.spec.scale_pages = {s.cfg.layout.ranks, s.cfg.layout.interleave, s.cfg.page_size};
}

namespace {

const char* kStyles[] = {"normal", "peaked", "wide", "ties", "tiny", "extreme"};
// A setup file's name of a KvScale: "per_" and its name ("none" alone).
std::string scale_json_name(KvScale k) {
  return k == KvScale::none ? "none" : "per_" + std::string(kv_scale_name(k));
}

std::string dt(oracle::DType d) { return std::string(oracle::dtype_name(d)); }

}  // namespace

nlohmann::json to_json(const DcpSetup& s) {
  const CaseSpec& c = s.spec;
  nlohmann::json spec = {{"tokens", c.tokens},
                         {"q_heads", c.q_heads},
                         {"kv_heads", c.kv_heads},
                         {"head_dim", c.head_dim},
                         {"v_dim", c.v_dim},
                         {"seq", c.seq},
                         {"shared_latent", c.shared_latent},
                         {"q_dtype", dt(c.q_dtype)},
                         {"kv_dtype", dt(c.kv_dtype)},
                         {"causal", c.causal},
                         {"explicit_pos", c.explicit_pos},
                         {"window", c.window},
                         {"softcap", c.softcap},
                         {"topk", c.topk},
                         {"lse_base", std::string(oracle::lse_base_name(c.lse_base))},
                         {"explicit_scale", c.explicit_scale},
                         {"values", kStyles[static_cast<int>(c.values)]},
                         {"seed", c.seed}};
  // A switch drawn late is written only when on: entries pinned before it was added equal the
  // setups that draw it off, byte for byte.
  for (const FeatureInfo& f : kFeatures)
    if (f.toggle != nullptr && (f.drawn_one_in == 0 || c.*f.toggle)) spec[f.name] = c.*f.toggle;
  if (c.kv_scale != KvScale::none) spec["kv_scale"] = scale_json_name(c.kv_scale);
  const gpu::DcpConfig& g = s.cfg;
  nlohmann::json cfg = {{"tp_size", g.tp_size},
                        {"dcp_size", g.layout.ranks},
                        {"interleave", g.layout.interleave},
                        {"comm", std::string(gpu::strategy_name(g.strategy))},
                        {"replicate_q", g.replicate_q},
                        {"order", std::string(gpu::reduce_order_name(g.order))},
                        {"order_seed", g.order_seed},
                        {"tile", g.tile},
                        {"splits", g.splits},
                        {"out_dtype", std::string(gpu::format_name(g.out_dtype))}};
  if (g.page_size > 0) {  // absent: not paged (entries pinned before paging read the same)
    cfg["page_size"] = g.page_size;
    cfg["page_seed"] = g.page_seed;
  }
  // The kernels' arithmetic where it is not the default (entries read without it get the
  // defaults, so a pin stays the same JSON as before the field existed).
  if (!describe(g.math).empty())
    cfg["math"] = {{"exp", std::string(gpu::exp_impl_name(g.math.exp))},
                   {"p_cast", std::string(gpu::format_name(g.math.p_cast))},
                   {"tf32", g.math.tf32},
                   {"partial", std::string(gpu::format_name(g.math.partial))},
                   {"merge", std::string(gpu::format_name(g.math.merge))}};
  nlohmann::json out = {{"spec", spec}, {"config", cfg}, {"chunks", s.chunks}};
  if (!s.batch.empty()) {  // absent: one request (entries pinned before batches read the same)
    out["batch"] = s.batch;
    out["shared_prefix"] = s.shared_prefix;
    if (s.retired > 0) out["retired"] = s.retired;  // absent: none (pins before it read the same)
  }
  return out;
}

namespace {

using nlohmann::json;

// A JSON value for a message: its text, cut short.
std::string shown(const json& v) {
  const std::string t = v.dump();
  return t.size() <= 40 ? t : t.substr(0, 37) + "...";
}

// Reads the fields of one JSON object, naming the first one missing, mistyped or unknown
// ("spec.seq: expected an integer, got \"12\"").
class FieldReader {
 public:
  FieldReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  oracle::Status object() const {
    if (!j_.is_object())
      return DCP_ERROR(path_.empty() ? "the setup" : path_, ": expected an object, got ",
                       shown(j_));
    return {};
  }
  // Every key of the object must be one of `known`.
  oracle::Status only(std::initializer_list<const char*> known) const {
    return only(std::vector<std::string>(known.begin(), known.end()));
  }
  oracle::Status only(const std::vector<std::string>& known) const {
    for (const auto& [key, value] : j_.items())
      if (std::find(known.begin(), known.end(), key) == known.end())
        return DCP_ERROR(oracle::printable(name(key)), ": unknown field");
    return {};
  }
  oracle::Status get(const char* key, int64_t& out) const {
    return typed(key, out, fits_int64, "an integer");
  }
  oracle::Status get(const char* key, uint64_t& out) const {
    return typed(
        key, out, [](const json& v) { return v.is_number_unsigned(); },
        "an integer in 0 .. 2^64 - 1");
  }
  oracle::Status get(const char* key, bool& out) const {
    return typed(
        key, out, [](const json& v) { return v.is_boolean(); }, "true or false");
  }
  oracle::Status get(const char* key, double& out) const {
    return typed(
        key, out, [](const json& v) { return v.is_number(); }, "a number");
  }
  oracle::Status get(const char* key, std::string& out) const {
    return typed(
        key, out, [](const json& v) { return v.is_string(); }, "a string");
  }
  oracle::Status get(const char* key, std::vector<int64_t>& out) const {
    DCP_TRY(present(key));
    const json& v = j_.at(key);
    if (!v.is_array()) return DCP_ERROR(name(key), ": expected an array of integers");
    out.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      if (!fits_int64(v[i]))
        return DCP_ERROR(name(key), ": element [", i, "]: expected an integer, got ", shown(v[i]));
      out.push_back(v[i].get<int64_t>());
    }
    return {};
  }
  FieldReader child(const char* key) const { return {j_.at(key), name(key)}; }
  bool has(const char* key) const { return j_.contains(key); }
  oracle::Status present(const char* key) const {
    if (!j_.contains(key)) return DCP_ERROR(name(key), ": missing");
    return {};
  }

 private:
  static bool fits_int64(const json& v) {
    return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX);
  }
  // Field `key` into `out` when `fits` accepts it; else "NAME: expected WHAT, got VALUE".
  template <class T, class Fits>
  oracle::Status typed(const char* key, T& out, Fits fits, const char* expected) const {
    DCP_TRY(present(key));
    const json& v = j_.at(key);
    if (!fits(v)) return DCP_ERROR(name(key), ": expected ", expected, ", got ", shown(v));
    out = v.get<T>();
    return {};
  }
  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const json& j_;
  std::string path_;
};

// A storage format field of config.math ("config.math.p_cast").
oracle::Status get_format(const FieldReader& m, const char* key, gpu::StorageFormat& out) {
  std::string s;
  DCP_TRY(m.get(key, s));
  const auto f = gpu::parse_format(s);
  if (!f)
    return DCP_ERROR("config.math.", key, ": got \"", oracle::printable(s), "\"; expected ",
                     gpu::format_names(false));
  out = *f;
  return {};
}

// config.math, the kernels' arithmetic; absent in entries pinned before it existed (then the
// defaults).
oracle::Status get_math(const FieldReader& config, gpu::KernelMath& m) {
  if (!config.has("math")) return {};
  const FieldReader r = config.child("math");
  DCP_TRY(r.object());
  DCP_TRY(r.only({"exp", "p_cast", "tf32", "partial", "merge"}));
  std::string exp;
  DCP_TRY(r.get("exp", exp));
  const auto e = gpu::parse_exp_impl(exp);
  if (!e)
    return DCP_ERROR("config.math.exp: got \"", oracle::printable(exp), "\"; expected ",
                     gpu::names_in(gpu::kExpImplNames));
  m.exp = *e;
  DCP_TRY(get_format(r, "p_cast", m.p_cast));
  DCP_TRY(r.get("tf32", m.tf32));
  DCP_TRY(get_format(r, "partial", m.partial));
  return get_format(r, "merge", m.merge);
}

}  // namespace

oracle::Expected<DcpSetup> setup_from_json(const nlohmann::json& j) {
  DcpSetup s;
  const FieldReader top(j, "");
  DCP_TRY(top.object());
  DCP_TRY(top.only({"spec", "config", "chunks", "batch", "shared_prefix", "retired"}));
  DCP_TRY(top.present("spec"));
  const FieldReader c = top.child("spec");
  DCP_TRY(c.object());
  std::vector<std::string> keys = {"tokens",   "q_heads", "kv_heads",      "head_dim",
                                   "v_dim",    "seq",     "shared_latent", "q_dtype",
                                   "kv_dtype", "causal",  "explicit_pos",  "window",
                                   "softcap",  "topk",    "lse_base",      "explicit_scale",
                                   "values",   "seed",    "kv_scale"};
  for (const FeatureInfo& f : kFeatures)
    if (f.toggle != nullptr) keys.emplace_back(f.name);
  DCP_TRY(c.only(keys));
  CaseSpec& p = s.spec;
  DCP_TRY(c.get("tokens", p.tokens));
  DCP_TRY(c.get("q_heads", p.q_heads));
  DCP_TRY(c.get("kv_heads", p.kv_heads));
  DCP_TRY(c.get("head_dim", p.head_dim));
  DCP_TRY(c.get("v_dim", p.v_dim));
  DCP_TRY(c.get("seq", p.seq));
  DCP_TRY(c.get("shared_latent", p.shared_latent));
  std::string qd, kd, base, style;
  DCP_TRY(c.get("q_dtype", qd));
  DCP_TRY(c.get("kv_dtype", kd));
  // The production path keeps q in a value format and K/V in those, fp8 or int8.
  const auto q_dtype = oracle::parse_dtype(qd), kv_dtype = oracle::parse_dtype(kd);
  if (!q_dtype || !is_production_dtype(*q_dtype, false))
    return DCP_ERROR("spec.q_dtype: got \"", oracle::printable(qd), "\"; expected ",
                     production_dtype_names(false));
  if (!kv_dtype || !is_production_dtype(*kv_dtype, true))
    return DCP_ERROR("spec.kv_dtype: got \"", oracle::printable(kd), "\"; expected ",
                     production_dtype_names(true));
  p.q_dtype = *q_dtype;
  p.kv_dtype = *kv_dtype;
  if (c.has("kv_scale")) {  // absent in entries pinned before fp8 caches, and for none
    std::string sc;
    DCP_TRY(c.get("kv_scale", sc));
    std::vector<std::string> names;
    for (size_t k = 0; k < std::size(kKvScaleNames); ++k)
      names.push_back(scale_json_name(static_cast<KvScale>(k)));
    const auto at = std::find(names.begin(), names.end(), sc);
    if (at == names.end())
      return DCP_ERROR(
          "spec.kv_scale: got \"", oracle::printable(sc), "\"; expected ",
          oracle::choices_text(std::vector<std::string_view>(names.begin(), names.end())));
    p.kv_scale = static_cast<KvScale>(at - names.begin());
  }
  DCP_TRY(c.get("causal", p.causal));
  DCP_TRY(c.get("explicit_pos", p.explicit_pos));
  DCP_TRY(c.get("window", p.window));
  DCP_TRY(c.get("softcap", p.softcap));
  for (const FeatureInfo& f : kFeatures)  // a switch added since an entry was pinned: off
    if (f.toggle != nullptr && (f.drawn_one_in == 0 || c.has(f.name)))
      DCP_TRY(c.get(f.name, p.*f.toggle));
  DCP_TRY(c.get("topk", p.topk));
  DCP_TRY(c.get("lse_base", base));
  const auto b = oracle::parse_lse_base(base);
  if (!b)
    return DCP_ERROR("spec.lse_base: got \"", oracle::printable(base),
                     "\"; expected \"e\" or \"2\"");
  p.lse_base = *b;
  DCP_TRY(c.get("explicit_scale", p.explicit_scale));
  DCP_TRY(c.get("values", style));
  const auto found = std::find(std::begin(kStyles), std::end(kStyles), style);
  if (found == std::end(kStyles))
    return DCP_ERROR("spec.values: got \"", oracle::printable(style),
                     "\"; expected normal, peaked, wide, ties, tiny or extreme");
  p.values = static_cast<ValueStyle>(found - std::begin(kStyles));
  DCP_TRY(c.get("seed", p.seed));

  DCP_TRY(top.present("config"));
  const FieldReader g = top.child("config");
  DCP_TRY(g.object());
  DCP_TRY(g.only({"tp_size", "dcp_size", "interleave", "comm", "replicate_q", "order", "order_seed",
                  "tile", "splits", "out_dtype", "math", "page_size", "page_seed"}));
  gpu::DcpConfig& q = s.cfg;
  DCP_TRY(g.get("tp_size", q.tp_size));
  DCP_TRY(g.get("dcp_size", q.layout.ranks));
  DCP_TRY(g.get("interleave", q.layout.interleave));
  std::string comm, order, out;
  DCP_TRY(g.get("comm", comm));
  DCP_TRY(g.get("order", order));
  DCP_TRY(g.get("out_dtype", out));
  const auto strat = gpu::parse_strategy(comm);
  if (!strat)
    return DCP_ERROR("config.comm: got \"", oracle::printable(comm),
                     "\"; expected \"ag_rs\" or \"a2a\"");
  const auto ord = gpu::parse_reduce_order(order);
  if (!ord)
    return DCP_ERROR("config.order: got \"", oracle::printable(order), "\"; expected ",
                     gpu::names_in(gpu::kReduceOrderNames));
  const auto od = gpu::parse_format(out);
  if (!od)
    return DCP_ERROR("config.out_dtype: got \"", oracle::printable(out), "\"; expected ",
                     gpu::format_names(false));
  q.strategy = *strat;
  q.order = *ord;
  q.out_dtype = *od;
  DCP_TRY(g.get("replicate_q", q.replicate_q));
  DCP_TRY(g.get("order_seed", q.order_seed));
  DCP_TRY(g.get("tile", q.tile));
  DCP_TRY(g.get("splits", q.splits));
  if (g.has("page_size") || g.has("page_seed")) {  // both, or neither (not paged)
    DCP_TRY(g.get("page_size", q.page_size));
    DCP_TRY(g.get("page_seed", q.page_seed));
  }
  DCP_TRY(get_math(g, q.math));
  q.base = to_gpu_base(p.lse_base);
  DCP_TRY(top.get("chunks", s.chunks));
  if (top.has("batch") || top.has("shared_prefix")) {  // both, or neither (one request)
    DCP_TRY(top.get("batch", s.batch));
    DCP_TRY(top.get("shared_prefix", s.shared_prefix));
  }
  if (top.has("retired")) DCP_TRY(top.get("retired", s.retired));  // absent: none
  follow_pages(s);
  DCP_TRY(validate_setup(s, kJsonNames));
  return s;
}

std::vector<oracle::DType> cache_formats(const DcpLimits& lim, CacheKind kind) {
  std::vector<oracle::DType> out;
  for (const oracle::DType d : lim.kv_dtypes)
    if (oracle::is_quantized(d) == (kind == CacheKind::fp8)) out.push_back(d);
  return out;
}

std::optional<std::string> outside(const DcpSetup& s, const DcpLimits& lim) {
  const CaseSpec& p = s.spec;
  const auto over = [](const char* what, int64_t got, int64_t most) -> std::optional<std::string> {
    if (got <= most) return std::nullopt;
    return std::string(what) + " " + std::to_string(got) + " > " + std::to_string(most);
  };
  const auto among = [](const auto& v, const auto& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  if (auto why = over("N", s.cfg.layout.ranks, lim.max_dcp)) return why;
  if (auto why = over("TP groups", s.cfg.tp_size / std::max<int64_t>(1, s.cfg.layout.ranks),
                      lim.max_groups))
    return why;
  if (auto why = over("S", p.seq, lim.max_seq)) return why;
  if (auto why = over("Dk", p.head_dim, lim.max_head_dim)) return why;
  if (auto why = over("Dv", p.v_dim, lim.max_v_dim)) return why;
  const auto listed = [](const char* what, int64_t got,
                         const std::vector<int64_t>& set) -> std::optional<std::string> {
    if (set.empty() || std::find(set.begin(), set.end(), got) != set.end()) return std::nullopt;
    return std::string(what) + " " + std::to_string(got) + " is not listed";
  };
  if (auto why = listed("N", s.cfg.layout.ranks, lim.dcp_sizes)) return why;
  if (auto why = listed("Dk", p.head_dim, lim.head_dims)) return why;
  if (auto why = listed("Dv", p.v_dim, lim.v_dims)) return why;
  for (const FeatureInfo& f : kFeatures)
    if (!lim.allows(f.feature) && f.used(p, !s.batch.empty())) return std::string(f.uses);
  if (!among(lim.q_dtypes, p.q_dtype)) return "q is " + std::string(oracle::dtype_name(p.q_dtype));
  if (!among(lim.kv_dtypes, p.kv_dtype))
    return "K/V are " + std::string(oracle::dtype_name(p.kv_dtype));
  if (!among(lim.lse_bases, p.lse_base))
    return "LSE base " + std::string(oracle::lse_base_name(p.lse_base));
  return std::nullopt;
}

}  // namespace dcp::props
