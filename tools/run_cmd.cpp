#include "tools/run_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "gpu/run_threads.hpp"
#include "harness/presets.hpp"
#include "harness/report.hpp"
#include "harness/tiers.hpp"
#include "oracle/text.hpp"
#include "plugin/plugin.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/footprint.hpp"
#include "tools/backends.hpp"
#include "tools/flags.hpp"
#include "tools/junit.hpp"
#include "tools/session.hpp"
#ifdef DCP_HAVE_MPI
#include "gpu/run_mpi.hpp"
#include "harness/wire.hpp"
#include "tools/mpi_jobs.hpp"
#endif

namespace dcp::tools {

using harness::batch_step;
using harness::RequestResult;
using harness::RequestRunner;
using harness::RowOutcome;
using harness::RowResult;

namespace {

using oracle::DType;
using props::CaseSpec;
using props::DcpSetup;
using props::KvScale;

template <class T>
T pick(const std::optional<T>& x, T dflt) {
  return x ? *x : dflt;
}

}  // namespace

namespace {

// The case-shaping flags, once: their names, help and ranges, and the field each fills. The help
// (add_case_flags), any() and the reproduce line (case_flags) all walk this table, in its order.
using IntField = std::optional<int64_t> CaseOptions::*;
using RealField = std::optional<double> CaseOptions::*;
using TextField = std::optional<std::string> CaseOptions::*;
using SwitchField = bool CaseOptions::*;
using OnOffField = std::optional<bool> CaseOptions::*;  // --x, --x=false or unset
struct CaseFlag {
  const char* name;
  std::string help;
  std::variant<IntField, RealField, TextField, SwitchField, OnOffField> field;
  double lo = 0.0, hi = 0.0;  // IntField and RealField: the accepted range
};

const std::vector<CaseFlag>& case_flag_table() {
  constexpr double kExtent = static_cast<double>(kMaxExtent), kSeq = static_cast<double>(kMaxSeq);
  static const std::vector<CaseFlag> table = {
      {"--preset", std::string("Model preset: ") + harness::kPresetNames, &CaseOptions::preset},
      {"--dcp-size", "N, ranks in a DCP group", &CaseOptions::dcp_size, 1,
       static_cast<double>(kMaxRanks)},
      {"--tp-size", "Attention TP size, a multiple of N (default N; mpi: world)",
       &CaseOptions::tp_size, 1, static_cast<double>(kMaxRanks)},
      {"--interleave", "I, tokens per block dealt to a rank (1: round-robin)",
       &CaseOptions::interleave, 1, static_cast<double>(kMaxInterleave)},
      {"--seq", "S, context length (tokens)", &CaseOptions::seq, 0, kSeq},
      {"--batch",
       "B, requests (contexts from S/2 to S): run one after another, or with --page-size in one "
       "step over one paged pool",
       &CaseOptions::batch, 1, static_cast<double>(kMaxBatch)},
      {"--shared-prefix",
       "L, tokens every request of a --batch in one step shares (a radix cache's match: its whole "
       "pages are kept once)",
       &CaseOptions::shared_prefix, 0, kSeq},
      {"--retired",
       "R, the first requests of a --batch in one step that finished before it: written, then "
       "their pages freed and reused by the live ones (their queries not run)",
       &CaseOptions::retired, 0, static_cast<double>(kMaxBatch)},
      {"--tokens", "T, query tokens per request", &CaseOptions::tokens, 1, kExtent},
      {"--heads", "Hq, query heads of the model", &CaseOptions::heads, 1, kExtent},
      {"--kv-heads", "Hkv, KV heads (divides Hq)", &CaseOptions::kv_heads, 1, kExtent},
      {"--head-dim", "Dk", &CaseOptions::head_dim, 1, kExtent},
      {"--v-dim", "Dv", &CaseOptions::v_dim, 1, kExtent},
      {"--window", "Sliding window W (0: none)", &CaseOptions::window, 0, kSeq},
      {"--topk",
       "Top-k sparse attention with K selected positions (0: dense; at most the keys a query "
       "sees)",
       &CaseOptions::topk, 0, kSeq},
      {"--splits", "Split-KV pieces inside a rank (at most the keys of the busiest rank)",
       &CaseOptions::splits, 1, kSeq},
      {"--tile", "Online-softmax tile, keys", &CaseOptions::tile, 1, kSeq},
      {"--page-size",
       "Paged caches: each rank's rows in pages of P rows, placed through a block table in a "
       "fragmented pool (0: one contiguous cache)",
       &CaseOptions::page_size, 0, kSeq},
      {"--softcap", "Logit softcap c (0: none)", &CaseOptions::softcap, 0.0,
       std::numeric_limits<double>::max()},
      {"--comm-backend", "Combine: ag_rs or a2a", &CaseOptions::comm_backend},
      {"--lse-base", "The kernel's LSE base: e or 2", &CaseOptions::lse_base},
      {"--dtype", "Storage of q, and of KV without --kv-dtype: f32, f16 or bf16 (default bf16)",
       &CaseOptions::dtype},
      {"--kv-dtype",
       "Storage of the KV caches: " + gpu::format_names(true) +
           " (default the preset's, else --dtype)",
       &CaseOptions::kv_dtype},
      {"--kv-scale",
       "The caches' dequantization scales: none, tensor (one k_scale and one v_scale), head "
       "(one per KV head), token (one per token, written with it), token_head (per token and "
       "KV head), page or page_head (one per page of a paged cache, and KV head: with "
       "--page-size); fp8 and int8 caches only (default tensor for them)",
       &CaseOptions::kv_scale},
      {"--out-dtype", "Storage of the output: f32, f16 or bf16", &CaseOptions::out_dtype},
      {"--order", "Combine reduction order: seq, pair or rand", &CaseOptions::order},
      {"--exp",
       "The kernels' exponential: libm, or poly3 (a cubic, relative error 7.6e-5, claimed as "
       "exp_rel_err)",
       &CaseOptions::exp},
      {"--p-cast", "P rounded before P.V (numerator only): none, bf16 or f16",
       &CaseOptions::p_cast},
      {"--tf32", "Operands of every q.k and P.V product rounded to tf32", &CaseOptions::tf32},
      {"--partial-dtype", "Storage of each rank's partial output O_r: f32, bf16 or f16",
       &CaseOptions::partial_dtype},
      {"--merge-dtype",
       "ag_rs: the reduce-scatter's format, its inputs and every partial sum: f32, bf16 or f16",
       &CaseOptions::merge_dtype},
      {"--replicate-q", "Every rank projects all its group's query heads (no q gather)",
       &CaseOptions::replicate_q},
      {"--latent", "", &CaseOptions::latent},  // add_latent_flag owns its help
  };
  return table;
}

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

}  // namespace

bool CaseOptions::any() const {
  bool set = false;
  for (const CaseFlag& f : case_flag_table())
    std::visit(Overload{[&](SwitchField m) { set = set || this->*m; },
                        [&](auto m) { set = set || (this->*m).has_value(); }},
               f.field);
  for (const bool on : switches) set = set || on;
  return set;
}

namespace {

// The case of the flags (the preset's shapes where a flag is absent), before the layout.
oracle::Expected<CaseSpec> configured_spec(const CaseOptions& o, const harness::ModelPreset* p,
                                           uint64_t seed) {
  CaseSpec s{.tokens = pick(o.tokens, int64_t{1}),
             .q_heads = pick(o.heads, p ? p->shape.heads : int64_t{8}),
             .kv_heads = pick(o.kv_heads, p ? p->shape.kv_heads : int64_t{2}),
             .head_dim = pick(o.head_dim, p ? p->shape.head_dim : int64_t{64}),
             .v_dim = pick(o.v_dim, p ? p->shape.v_dim : int64_t{64}),
             .seq = pick(o.seq, p ? int64_t{4096} : int64_t{1024}),
             .shared_latent = o.latent.value_or(p && p->shape.latent)};
  const std::string dt = pick(o.dtype, std::string("bf16"));
  const auto d = gpu::parse_format(dt);
  if (!d) return DCP_ERROR("--dtype: got '", dt, "'; expected ", gpu::format_names(false));
  s.q_dtype = props::to_oracle_dtype(*d);
  const std::string kvt = o.kv_dtype ? *o.kv_dtype : p && p->kv_dtype ? p->kv_dtype : dt;
  const auto kd = gpu::parse_kv_format(kvt);
  if (!kd) return DCP_ERROR("--kv-dtype: got '", kvt, "'; expected ", gpu::format_names(true));
  s.kv_dtype = props::to_oracle_dtype(*kd);
  const std::string sc = pick(o.kv_scale, std::string(gpu::is_cache_only(*kd) ? "tensor" : "none"));
  const auto named =
      std::find(std::begin(props::kKvScaleNames), std::end(props::kKvScaleNames), sc);
  if (named == std::end(props::kKvScaleNames))
    return DCP_ERROR("--kv-scale: got '", sc, "'; expected ",
                     oracle::choices_text(std::vector<std::string_view>(
                         std::begin(props::kKvScaleNames), std::end(props::kKvScaleNames))));
  s.kv_scale = static_cast<KvScale>(named - std::begin(props::kKvScaleNames));
  s.window = pick(o.window, int64_t{0});
  s.softcap = pick(o.softcap, 0.0);
  for (size_t i = 0; i < o.switches.size(); ++i)
    if (const props::FeatureInfo& f = props::kFeatures[i]; f.toggle != nullptr)
      s.*f.toggle = o.switches[i];
  s.topk = pick(o.topk, int64_t{0});
  const std::string base = pick(o.lse_base, std::string("e"));
  const auto b = oracle::parse_lse_base(base);
  if (!b) return DCP_ERROR("--lse-base: got '", base, "'; expected ", oracle::lse_base_names());
  s.lse_base = *b;
  s.seed = seed;
  return s;
}

// A storage-format flag: f32, f16 or bf16 (none: f32, where the flag allows it).
oracle::Status format_flag(const char* flag, const std::optional<std::string>& given,
                           bool none_allowed, gpu::StorageFormat& out) {
  if (!given) return {};
  if (none_allowed && *given == "none") {
    out = gpu::StorageFormat::f32;
    return {};
  }
  const auto f = none_allowed && *given == "f32" ? std::nullopt : gpu::parse_format(*given);
  if (!f)
    return DCP_ERROR(flag, ": got '", *given, "'; expected ",
                     none_allowed ? "none, bf16 or f16" : gpu::format_names(false));
  out = *f;
  return {};
}

// The kernels' arithmetic of the flags (--exp, --p-cast, --tf32, --partial-dtype, --merge-dtype).
oracle::Status configured_math(const CaseOptions& o, gpu::DcpConfig& cfg) {
  gpu::KernelMath& m = cfg.math;
  if (o.exp) {
    const auto e = gpu::parse_exp_impl(*o.exp);
    if (!e)
      return DCP_ERROR("--exp: got '", *o.exp, "'; expected ", gpu::names_in(gpu::kExpImplNames));
    m.exp = *e;
  }
  DCP_TRY(format_flag("--p-cast", o.p_cast, true, m.p_cast));
  m.tf32 = o.tf32;
  DCP_TRY(format_flag("--partial-dtype", o.partial_dtype, false, m.partial));
  DCP_TRY(format_flag("--merge-dtype", o.merge_dtype, false, m.merge));
  if (m.merge != gpu::StorageFormat::f32 && cfg.strategy != gpu::CommStrategy::ag_rs)
    return DCP_ERROR("--merge-dtype ", *o.merge_dtype,
                     ": only ag_rs sums partials in a collective (a2a merges in fp32); pass "
                     "--comm-backend ag_rs");
  return {};
}

// The production path's configuration of the flags: layout, TP size, combine and kernel knobs.
oracle::Expected<gpu::DcpConfig> configured_path(const CaseOptions& o,
                                                 const harness::ModelPreset* p, uint64_t seed,
                                                 int64_t world) {
  gpu::DcpConfig cfg;
  const int64_t n = pick(o.dcp_size, p ? p->shape.dcp : (world > 0 ? world : int64_t{2}));
  cfg.layout = {n, pick(o.interleave, int64_t{1})};
  cfg.tp_size = pick(o.tp_size, world > 0 ? world : (p ? p->shape.tp : n));
  const std::string cb = pick(o.comm_backend, std::string(p ? p->comm_backend : "ag_rs"));
  const auto st = gpu::parse_strategy(cb);
  if (!st)
    return DCP_ERROR("--comm-backend: got '", cb, "'; expected ",
                     gpu::names_in(gpu::kStrategyNames));
  cfg.strategy = *st;
  cfg.replicate_q = o.replicate_q || (p && p->replicate_q);
  const std::string ord = pick(o.order, std::string("seq"));
  const auto od = gpu::parse_reduce_order(ord);
  if (!od)
    return DCP_ERROR("--order: got '", ord, "'; expected ", gpu::names_in(gpu::kReduceOrderNames));
  cfg.order = *od;
  cfg.order_seed = seed;
  cfg.splits = pick(o.splits, int64_t{1});
  cfg.tile = pick(o.tile, int64_t{64});
  cfg.page_size = pick(o.page_size, int64_t{0});
  cfg.page_seed = seed;  // the pool's order, drawn with the case's values
  const std::string od_s = pick(o.out_dtype, std::string("f32"));
  const auto out = gpu::parse_format(od_s);
  if (!out) return DCP_ERROR("--out-dtype: got '", od_s, "'; expected f32, f16 or bf16");
  cfg.out_dtype = *out;
  DCP_TRY(configured_math(o, cfg));
  return cfg;
}

// What a valid setup may still ask that makes no sense from the command line: more top-k
// positions, splits or rows a page than there are keys.
oracle::Status check_requests(const DcpSetup& setup, const props::SetupNames& names) {
  const CaseSpec& s = setup.spec;
  // A query sees at most S keys, and at most W of them under a window.
  const int64_t visible = s.window > 0 ? std::min(s.seq, s.window) : s.seq;
  if (s.topk > visible)
    return DCP_ERROR("--topk ", s.topk, ": more than the ", visible, " keys a query can see (",
                     names.seq, " ", s.seq,
                     s.window > 0 ? " with --window " + std::to_string(s.window) : "", ")");
  // The busiest rank holds rows_for(0, S) keys (layout.hpp); each split needs at least one.
  const gpu::DcpConfig& cfg = setup.cfg;
  const int64_t most = std::max<int64_t>(1, cfg.layout.rows_for(0, s.seq));
  if (cfg.splits > most)
    return DCP_ERROR("--splits ", cfg.splits, ": more than the ", most,
                     " keys the busiest rank holds (", names.seq, " ", s.seq, " over --dcp-size ",
                     cfg.layout.ranks, ")");
  if (cfg.page_size > most)
    return DCP_ERROR(names.page_size, " ", cfg.page_size, ": more than the ", most,
                     " rows the busiest rank holds (", names.seq, " ", s.seq, " over --dcp-size ",
                     cfg.layout.ranks, ")");
  return {};
}

}  // namespace

oracle::Expected<RunCase> configured_case(const CaseOptions& o, uint64_t seed, int64_t world,
                                          const props::SetupNames& names) {
  const harness::ModelPreset* p = o.preset ? harness::find_preset(*o.preset) : nullptr;
  if (o.preset && !p)
    return DCP_ERROR("--preset: unknown '", *o.preset, "'; expected ", harness::kPresetNames);
  oracle::Expected<CaseSpec> spec = configured_spec(o, p, seed);
  if (!spec) return spec.status();
  oracle::Expected<gpu::DcpConfig> cfg = configured_path(o, p, seed, world);
  if (!cfg) return cfg.status();
  // The chunk writes are drawn when a request is made (batch_request), after the plan has
  // checked the memory: a context of 10^12 tokens would need gigabytes for its chunk list alone.
  // Any drawn list is valid; one whole write stands for it here.
  DcpSetup setup{.spec = *spec,
                 .cfg = *cfg,
                 .chunks = harness::whole_context_write(spec->seq),
                 .batch = {},
                 .shared_prefix = 0};
  setup.cfg.base = props::to_gpu_base(spec->lse_base);
  props::follow_pages(setup);
  // Every range and combination, named by its flag, before anything runs; over MPI the TP size
  // not given is the job's size.
  props::SetupNames named = names;
  if (world > 0 && !o.tp_size) named.tp_size = "--tp-size (the job's process count)";
  DCP_TRY(props::validate_setup(setup, named));
  DCP_TRY(check_requests(setup, named));
  RunCase rc{setup,
             (p ? std::string(p->name) + " " : "") + harness::variant_of(*spec) +
                 harness::math_tag(cfg->math) +
                 (cfg->page_size > 0 ? "+page" + std::to_string(cfg->page_size) : ""),
             pick(o.batch, int64_t{1})};
  rc.one_step = rc.batch > 1 && cfg->page_size > 0;
  rc.shared_prefix = pick(o.shared_prefix, int64_t{0});
  if (rc.shared_prefix > 0 && !rc.one_step)
    return DCP_ERROR(names.shared_prefix, " ", rc.shared_prefix,
                     ": a shared prefix is a batch's "
                     "in one step; give ",
                     names.batch, " of at least 2 and ", names.page_size);
  rc.retired = pick(o.retired, int64_t{0});
  if (rc.retired > 0 && !rc.one_step)
    return DCP_ERROR(names.retired, " ", rc.retired,
                     ": retired requests are a batch's in one step; give ", names.batch,
                     " of at least 2 and ", names.page_size);
  if (rc.one_step) {
    DCP_TRY(props::validate_setup(batch_step(rc), names));
    if (rc.shared_prefix > 0) rc.variant += "+prefix" + std::to_string(rc.shared_prefix);
    if (rc.retired > 0) rc.variant += "+retired" + std::to_string(rc.retired);
  }
  return rc;
}

std::string case_flags(const CaseOptions& o) {
  std::ostringstream os;
  for (const CaseFlag& f : case_flag_table())
    std::visit(Overload{[&](IntField m) {
                          if (o.*m) os << " " << f.name << " " << *(o.*m);
                        },
                        [&](RealField m) {
                          if (o.*m) os << " " << f.name << " " << exact_text(*(o.*m));
                        },
                        [&](TextField m) {
                          if (o.*m) os << " " << f.name << " " << *(o.*m);
                        },
                        [&](SwitchField m) {
                          if (o.*m) os << " " << f.name;
                        },
                        [&](OnOffField m) {
                          if (o.*m) os << " " << f.name << (*(o.*m) ? "" : "=false");
                        }},
               f.field);
  for (size_t i = 0; i < o.switches.size(); ++i)
    if (o.switches[i]) os << " --" << props::kFeatures[i].name;
  return os.str();
}

bool one_rank_per_process(const RunOptions& o) { return one_rank_per_process(o.backend, o.comm); }

namespace {

std::string shape_of(const CaseSpec& s, int64_t batch) {
  std::ostringstream os;
  if (batch > 1) os << batch << "x";
  os << s.tokens << "x" << s.q_heads << "/" << s.kv_heads << "x" << s.head_dim << "/" << s.v_dim
     << (s.shared_latent ? "L" : "");
  return os.str();
}

std::string reproduce_line(const RunOptions& o) {
  std::ostringstream os;
  os << (one_rank_per_process(o) ? "mpirun -np <tp> " : "") << "dcp-verify run --seed " << o.seed;
  if (o.backend != "host") os << " --backend " << o.backend;
  if (o.comm != default_comm(o.backend)) os << " --comm " << o.comm;
  os << case_flags(o);
  if (o.cases != 1) os << " --cases " << o.cases;
  if (harness::parse_bound(o.bound) != props::BoundTier::sound) os << " --bound " << o.bound;
  if (o.impl) os << " --impl " << oracle::printable(*o.impl);
  return os.str();
}

nlohmann::json row_json(size_t index, const RowResult& r) {
  const DcpSetup& s = r.rc->setup;
  const oracle::Worst& w = r.worst.full.o_worst.ratio >= r.worst.full.lse_worst.ratio
                               ? r.worst.full.o_worst
                               : r.worst.full.lse_worst;
  // A row the backend failed has nothing compared: null, not a number.
  auto judged = [&](double x) { return r.judged ? json_number(x) : nlohmann::json(nullptr); };
  return {{"row", index},
          {"shape",
           {{"batch", r.rc->batch},
            {"tokens", s.spec.tokens},
            {"heads", s.spec.q_heads},
            {"kv_heads", s.spec.kv_heads},
            {"head_dim", s.spec.head_dim},
            {"v_dim", s.spec.v_dim},
            {"latent", s.spec.shared_latent},
            {"seq", s.spec.seq}}},
          {"tp", s.cfg.tp_size},
          {"dcp", s.cfg.layout.ranks},
          {"interleave", s.cfg.layout.interleave},
          {"comm_backend", gpu::strategy_name(s.cfg.strategy)},
          {"q", s.cfg.replicate_q ? "replicate" : "gather"},
          {"variant", r.rc->variant},
          {"math",
           {{"exp", gpu::exp_impl_name(s.cfg.math.exp)},
            {"p_cast", s.cfg.math.p_cast == gpu::StorageFormat::f32
                           ? std::string_view("none")
                           : gpu::format_name(s.cfg.math.p_cast)},
            {"tf32", s.cfg.math.tf32},
            {"partial_dtype", gpu::format_name(s.cfg.math.partial)},
            {"merge_dtype", gpu::format_name(s.cfg.math.merge)},
            {"out_dtype", gpu::format_name(s.cfg.out_dtype)}}},
          {"max_err", judged(w.error)},
          {"bound", judged(w.bound)},
          {"ratio", judged(r.worst.max_ratio)},
          {"stat_ratio", judged(r.stat_ratio)},
          {"comparisons", r.comparisons},
          {"verdict", r.verdict()},
          {"pass", r.pass},
          {"report", r.report},
          {"case", props::describe(s)}};
}

// Column widths wide enough for every row's values (and at least the header's). Configured
// cases differ only in their seeds, so the first stands for all.
// The run table's columns, each wide enough for every row's cell.
Table run_table(const std::vector<RunCase>& rows) {
  enum : size_t { kShape = 1, kSeq, kTp, kN, kI, kVariant = 8 };
  Table t(3, {{"row", 3, Align::left, 0},
              {"shape", 18, Align::left},
              {"S", 5},
              {"tp", 3},
              {"N", 3},
              {"I", 3},
              {"comm", 5, Align::left, 2},
              {"q", 6, Align::left},
              {"variant", 27, Align::left},
              {"max_err", 10},
              {"bound", 10},
              {"err/bound", 10},
              {"err/stat", 9},
              {"verdict", 0, Align::left, 2}});
  for (const RunCase& r : rows) {
    const DcpSetup& s = r.setup;
    t.fit(kShape, shape_of(s.spec, r.batch));
    t.fit(kSeq, std::to_string(s.spec.seq));
    t.fit(kTp, std::to_string(s.cfg.tp_size));
    t.fit(kN, std::to_string(s.cfg.layout.ranks));
    t.fit(kI, std::to_string(s.cfg.layout.interleave));
    t.fit(kVariant, r.variant);
  }
  return t;
}

void print_header(std::ostream& out, const RunOptions& o, size_t rows, const Table& t,
                  const std::string& impl) {
  out << "# dcp-verify run  backend=" << o.backend << "  comm=" << o.comm << "  seed=" << o.seed
      << "  rows=" << rows << (impl.empty() ? "" : "  impl=" + impl) << "\n"
      << "#  shape: [B x] T x Hq/Hkv x Dk/Dv (L: shared latent); err, bound: the worst element "
         "of the output (O or LSE); err/bound: worst over output and every rank's partial; "
         "err/stat: "
         "the same over the statistical bound (SUSPECT above 1)\n";
  t.print_header(out);
}

void print_row(std::ostream& out, size_t i, const RowResult& row, const Table& t) {
  const DcpSetup& s = row.rc->setup;
  const props::DcpCheck& chk = row.worst;
  const oracle::Worst& worst =
      chk.full.o_worst.ratio >= chk.full.lse_worst.ratio ? chk.full.o_worst : chk.full.lse_worst;
  // A request the backend failed has no comparison to show.
  const auto shown = [&](const char* format, double x) {
    return row.judged ? cell(format, x) : std::string("-");
  };
  t.print_row(
      out, {std::to_string(i), shape_of(s.spec, row.rc->batch), std::to_string(s.spec.seq),
            std::to_string(s.cfg.tp_size), std::to_string(s.cfg.layout.ranks),
            std::to_string(s.cfg.layout.interleave),
            std::string(gpu::strategy_name(s.cfg.strategy)), s.cfg.replicate_q ? "repl" : "gather",
            row.rc->variant, shown("%.3e", worst.error), shown("%.3e", worst.bound),
            shown("%.4f", chk.max_ratio), shown("%.4f", row.stat_ratio), row.verdict()});
  if (!row.pass || row.suspect) {
    std::istringstream rep(in_flag_terms(row.report));
    for (std::string line; std::getline(rep, line);) out << "#    " << line << "\n";
  }
}

// What a JSON report keeps of one passing row until it is written: its object (about 25 keys and
// values as nlohmann::json nodes of some 80 bytes each with their strings, about 2 KiB) and its
// share of the text written at the end (about 1 KiB), doubled for the text's own growth. A
// failing row adds its report (a few lines); failing rows are few.
constexpr double kJsonRowBytes = 6144;

// The rows to run: the default sweep, or the first of --cases configured cases (case k is
// configured_case with seed + k: the same shape, so the first one's checks stand for all),
// checked against the limits. Everything here is the same on every process, so under MPI every
// rank refuses alike.
struct Plan {
  std::vector<RunCase> rows;  // the default sweep, or the first configured case
  int64_t count = 0;          // rows to run
};

// The first feature of `lacks` (as properties --without names them) the row uses, if any.
std::optional<std::string> lacked_in(const RunCase& r, const std::vector<std::string>& lacks) {
  for (const props::FeatureInfo& f : props::kFeatures)
    if (f.used(r.setup.spec, r.one_step && r.batch > 1) &&
        std::find(lacks.begin(), lacks.end(), f.name) != lacks.end())
      return f.name;
  return std::nullopt;
}

// lacks: the features the --impl plug-in lacks (uncarried: those of them its ABI version does
// not carry): the default sweep leaves their rows out, a configured case using one is refused.
oracle::Expected<Plan> plan_rows(const RunOptions& o, int64_t world, const harness::Limits& lim,
                                 const std::vector<std::string>& lacks,
                                 const std::vector<std::string>& uncarried) {
  std::vector<RunCase> rows;
  if (o.configured()) {
    oracle::Expected<RunCase> r = configured_case(o, o.seed, world);
    if (!r) return r.status();
    if (const auto f = lacked_in(*r, lacks)) {
      if (std::find(uncarried.begin(), uncarried.end(), *f) != uncarried.end())
        return DCP_ERROR(
            "--impl: the plug-in's ABI version does not carry ", *f,
            ", which this case uses (include/dcp_verify/impl.h says which version does)");
      return DCP_ERROR("--impl: the implementation lacks ", *f, ", which this case uses");
    }
    rows.push_back(*r);
  } else {
    for (RunCase r : harness::default_rows(o.seed)) {
      if (o.impl) {  // the plug-in's arithmetic is its claim's: the rows keep their variants only
        r.setup.cfg.math = {};
        r.variant = harness::variant_of(r.setup.spec);
      }
      if ((world == 0 || r.setup.cfg.tp_size == world) && !lacked_in(r, lacks)) rows.push_back(r);
    }
    if (rows.empty())
      return DCP_ERROR("--comm ", o.comm, ": the default sweep has no rows for ", world,
                       " processes (it has rows for 1, 2, 4 and 8); pass --dcp-size and --tp-size");
  }
  for (const RunCase& r : rows) {
    if (world > 0 && r.setup.cfg.tp_size != world)
      return DCP_ERROR("--comm ", o.comm, ": ", world, " processes but --tp-size is ",
                       r.setup.cfg.tp_size, " (run with mpirun -np ", r.setup.cfg.tp_size, ")");
  }
  const int64_t count = o.configured() ? o.cases : static_cast<int64_t>(rows.size());
  harness::Limits left = lim;  // what the rows may take once the report's rows are kept
  if (o.json_path || o.junit_path) left.memory_bytes -= static_cast<double>(count) * kJsonRowBytes;
  left.work /= static_cast<double>(count);
  for (const RunCase& r : rows)
    if (const auto why = harness::over_budget(r, left, case_flags(o))) return DCP_ERROR(*why);
  return Plan{rows, count};
}

#ifdef DCP_HAVE_MPI
// One rank per process (--comm mpi, or nccl under mpirun). A request ends with the code every
// rank ends the run with (0: go on), the same on every rank, and on rank 0 the check; rank 0
// prints the one line that says why the run ends; a peer that never arrives ends the job here
// (kExitTimeout).
class MpiRunner final : public RequestRunner {
 public:
  explicit MpiRunner(MpiStep step) : step_(step) {
    world = gpu::mpi_world_size();
    root = gpu::mpi_world_rank() == 0;
  }
  harness::Limits share(const harness::Limits& lim) const override {
    harness::Limits mine =
        lim;  // the processes of one node share its memory; each holds a whole case
    mine.memory_bytes /= static_cast<double>(gpu::mpi_node().size);
    return mine;
  }
  // Every rank planned alike, but each read its node's free memory at its own moment: rank 0's
  // verdict (the first refusal of any rank) decides for all, before anything is printed.
  std::optional<std::string> agree(const oracle::Status& planned, std::chrono::seconds timeout,
                                   std::ostream& err) override {
    // First, that every process was given the same flags and files (the same on every rank).
    if (const auto differ = inputs_differ("run", timeout)) return *differ;
    const auto v = gpu::mpi_agree(planned ? kExitOk : kExitBadInput, planned.message(), timeout);
    if (!v) {
      refuse("run", "rank " + std::to_string(gpu::mpi_world_rank()) + ": " + v.status().message(),
             err);
      gpu::mpi_abort(kExitTimeout);
    }
    if (v->code != kExitOk) return v->message;
    return std::nullopt;
  }
  RequestResult run(const DcpSetup& s, size_t row, const oracle::Watch& watch,
                    std::ostream& err) override;

 private:
  MpiStep step_;
};

RequestResult MpiRunner::run(const DcpSetup& s, size_t row, const oracle::Watch& watch,
                             std::ostream& err) {
  RequestResult out;
  const int64_t me = gpu::mpi_world_rank();
  // One request, or a batch in one step (its requests' cases, concatenated for the path).
  const std::vector<oracle::Case> cases =
      s.batch.empty() ? std::vector<oracle::Case>{} : props::batch_cases(s);
  const oracle::Case c =
      s.batch.empty() ? props::make_case(s.spec, props::KvHolding::stored) : oracle::Case{};
  oracle::Expected<gpu::DcpInputs> batched = gpu::DcpInputs{};
  if (!cases.empty()) batched = props::to_dcp_batch_inputs(cases, {s.shared_prefix, s.retired});
  if (!batched) {
    out.code = kExitBadInput;
    out.refusal = "row " + std::to_string(row) + ": " + batched.status().message();
    return out;
  }
  const gpu::DcpInputs in = cases.empty() ? props::to_dcp_inputs(c, s.chunks) : *batched;
  gpu::Result<gpu::MpiRun> run = step_(in, s.cfg);
  const std::string where = "row " + std::to_string(row) + ": rank " + std::to_string(me) + ": ";
  if (!run && gpu::mpi_deadline_passed()) {
    // A peer that never arrived cannot agree on anything: end the job from here.
    refuse("run", where + run.status().message(), err);
    gpu::mpi_abort(kExitTimeout);
  }
  // Two agreements: first on the step, so that a rank whose step failed ends the row on every
  // rank before anyone judges (rank 0 would otherwise wait for a healthy peer still judging and
  // name it as missing); then on the judgements (an oracle refusal on any rank). A failed
  // agreement names this rank's own error too.
  const auto agree = [&](int code, const std::string& why, std::chrono::milliseconds root_work) {
    const gpu::Result<gpu::MpiVerdict> v = gpu::mpi_agree(code, why, s.cfg.deadline, root_work);
    if (!v) {
      refuse("run", where + v.status().message() + (why.empty() ? "" : "; this rank: " + why), err);
      gpu::mpi_abort(kExitTimeout);
    }
    if (v->code != kExitOk && me == 0) refuse("run", v->message, err);
    return v->code;
  };
  if (const int code = agree(run ? kExitOk : kExitFail,
                             run ? std::string() : where + run.status().message(), {});
      code != kExitOk) {
    out.code = code;
    return out;
  }
  // Every process judges its share: its own TP rank's partial against the oracle on its shard,
  // and rank 0 the assembled output too. The shards' oracles, half of the judging, run side by
  // side; rank 0's progress line counts its own share.
  const props::JudgedParts parts{.output = run->root, .partials = true, .tp_rank = me};
  const oracle::Watch own =
      run->root ? watch : oracle::Watch{.progress = nullptr, .stop = watch.stop};
  const props::DcpCheck mine =
      cases.empty()
          ? props::judge_dcp(c, s.cfg, run->group, parts, nullptr, own)
          : props::judge_dcp_batch(cases, s.retired, s.cfg, run->group, parts, nullptr, own);
  std::string why;
  if (mine.oracle_error)  // not the implementation's fault: the oracle cannot bound it
    why = "row " + std::to_string(row) + ": the oracle cannot judge this case (rank " +
          std::to_string(me) + "): " + mine.report.substr(0, mine.report.find('\n'));
  // Rank 0 judges the most (the output, about as much as every shard together, and its own
  // shard; a peer's share is about 1/N of that, done before rank 0's): the peers wait that much
  // longer for its verdict.
  const auto judging = judging_time(props::dcp_check_footprint(s).work);
  if (const int code = agree(mine.oracle_error ? kExitBadInput : kExitOk, why, judging);
      code != kExitOk) {
    out.code = code;
    return out;
  }
  // Every share judged: each process's judgement to rank 0, folded into the output's there.
  const auto all = gpu::mpi_gather_bytes(harness::encode_check(mine), "gathering the judgements",
                                         s.cfg.deadline);
  if (!all) {
    refuse("run", where + all.status().message(), err);
    gpu::mpi_abort(kExitTimeout);
  }
  if (me != 0) return out;
  out.chk = mine;
  for (size_t p = 1; p < all->size(); ++p) {
    auto peer = harness::decode_check((*all)[p]);
    if (!peer) {  // not what encode_check sent: a failure, said so
      props::DcpCheck garbled;
      garbled.backend_error = true;
      garbled.report = "rank " + std::to_string(p) + ": " + peer.status().message() + "\n";
      peer = garbled;
    }
    props::merge_judgements(out.chk, *peer);
  }
  return out;
}
#endif

// The runner for the options: one rank per process when the pair asks for it (and this binary
// has MPI: open_backend refused it otherwise), else every rank here.
std::unique_ptr<RequestRunner> make_runner([[maybe_unused]] const RunOptions& o,
                                           const props::DcpBackend& backend) {
#ifdef DCP_HAVE_MPI
  if (const auto step = mpi_step(o.backend, o.comm)) return std::make_unique<MpiRunner>(*step);
#endif
  return harness::local_runner(backend);
}

// What the rows came to, for the summary and the report.
struct RunTotals {
  int64_t done = 0, failed = 0, suspect = 0;  // suspect: rows SUSPECT, not FAILED
  int64_t errors = 0;  // the row in flight when a plug-in level crashed or hung (ERROR)
  int64_t judged = 0;  // rows with comparisons: the worst ratios are theirs (none: "-", null)
  double worst = 0.0, worst_stat = 0.0, seconds = 0.0;
  nlohmann::json rows = nlohmann::json::array();
};

// The summary lines and the JSON report; the exit code.
int finish_run(const RunOptions& o, const Plan& plan, const RunTotals& t, std::ostream& out) {
  // Rows not run: Ctrl-C stopped the run, or a plug-in's level ended it (an ERROR row).
  const bool stopped = t.errors == 0 && t.done < plan.count;
  // The rows that fail the tier gating the exit code.
  const int64_t gated =
      t.failed + (harness::parse_bound(o.bound) == props::BoundTier::statistical ? t.suspect : 0);
  const auto worst_cell = [&](double x) { return t.judged > 0 ? cell("%.4f", x) : "-"; };
  const auto worst_json = [&](double x) {
    return t.judged > 0 ? json_number(x) : nlohmann::json(nullptr);
  };
  out << "# rows: " << t.done << "  passed: " << t.done - t.failed - t.suspect - t.errors
      << "  suspect: " << t.suspect << "  failed: " << t.failed
      << "  max err/bound: " << worst_cell(t.worst)
      << "  max err/stat: " << worst_cell(t.worst_stat) << "  time: " << cell("%.1f", t.seconds)
      << " s";
  if (stopped) out << "  (interrupted: " << plan.count - t.done << " rows not run)";
  if (t.errors > 0)
    out << "  errors: " << t.errors << "  (ended by the implementation: " << plan.count - t.done
        << " rows not run)";
  out << "\n# bound: " << o.bound << " gates the exit; a row is SUSPECT over its statistical bound"
      << " (docs/tolerances.md section 10)\n";
  out << "# reproduce: " << reproduce_line(o) << "\n";
  out << "# run: "
      << (stopped         ? "INTERRUPTED"
          : t.failed > 0  ? "FAILED"
          : t.errors > 0  ? "ERROR"
          : t.suspect > 0 ? "SUSPECT"
                          : "OK")
      << "\n";
  if (o.json_path || o.junit_path) {
    const nlohmann::json report = {{"schema", "dcp-verify/run/2"},
                                   {"backend", o.backend},
                                   {"comm", o.comm},
                                   {"impl", o.impl ? nlohmann::json(*o.impl) : nullptr},
                                   {"seed", o.seed},
                                   {"rows", t.rows},
                                   {"rows_planned", plan.count},
                                   {"failed", t.failed},
                                   {"suspect", t.suspect},
                                   {"errors", t.errors},
                                   {"bound", o.bound},
                                   {"max_ratio", worst_json(t.worst)},
                                   {"max_stat_ratio", worst_json(t.worst_stat)},
                                   {"seconds", t.seconds},
                                   {"reproduce", reproduce_line(o)},
                                   {"interrupted", stopped},
                                   {"pass", gated == 0 && t.errors == 0 && !stopped}};
    if (!write_reports("run", o.json_path, o.junit_path, report)) return kExitBadInput;
  }
  if (stopped) return kExitInterrupted;
  return gated == 0 ? kExitOk : kExitFail;
}

}  // namespace

int run_dcp(const RunOptions& o, const harness::Limits& lim, std::ostream& out, std::ostream& err) {
  // Everything that can be refused is refused here, before the header, the same on every rank
  // (and said by rank 0 alone).
  std::string impl_label;
  bool impl_batches = false;
  std::vector<std::string> impl_lacks, impl_uncarried;
  const auto backend = [&]() -> oracle::Expected<props::DcpBackend> {
    if (!o.impl) return open_backend(o.backend, o.comm, std::chrono::seconds(o.timeout_s));
    const auto impl = open_impl(*o.impl, o.backend, o.comm, std::chrono::seconds(o.timeout_s));
    if (!impl) return impl.status();
    impl_label = impl->label;
    impl_batches = impl->batches;
    impl_lacks = impl->lacks;
    impl_uncarried = impl->uncarried;
    return impl->preferred();
  }();
  if (!backend) return refuse("run", backend.status().message(), err);
  if (o.impl && !impl_batches && o.batch.value_or(1) > 1 && o.page_size.value_or(0) > 0)
    return refuse("run",
                  "--impl: this plug-in's levels take one request per step (a batch needs ABI "
                  "2's paged level, not lacking batch); --batch with --page-size runs the batch "
                  "in one step (without --page-size its requests run one by one)",
                  err);
  if (o.impl && o.math_given())
    return refuse("run",
                  "--impl: the plug-in states its own arithmetic (its claim); --exp, --p-cast, "
                  "--tf32, --partial-dtype and --merge-dtype set the production path's",
                  err);
  const std::unique_ptr<RequestRunner> runner = make_runner(o, *backend);
  auto bad = [&](const std::string& why) {
    if (runner->root) refuse("run", why, err);
    return kExitBadInput;
  };
  const oracle::Expected<Plan> planned = [&]() -> oracle::Expected<Plan> {
    if (const auto why =
            reports_error(o.json_path, o.junit_path, {{"--impl", o.impl.value_or("")}}))
      return DCP_ERROR(*why);
    return plan_rows(o, runner->world, runner->share(lim), impl_lacks, impl_uncarried);
  }();
  if (const auto why = runner->agree(planned.status(), std::chrono::seconds(o.timeout_s), err))
    return bad(*why);
  const Plan& plan = *planned;
  const Table table = run_table(plan.rows);
  if (runner->root) print_header(out, o, static_cast<size_t>(plan.count), table, impl_label);

  // Under MPI every rank must take part in every row, so Ctrl-C is left to mpirun.
  const bool local = runner->world == 0;
  std::optional<InterruptGuard> guard;
  if (local) guard.emplace();
  Progress progress("run", plan.count);
  RunTotals t;
  const auto t0 = std::chrono::steady_clock::now();
  // A plug-in level that crashes or never returns ends the process (plugin/plugin.hpp); first
  // these last words print and write the report: the rows that finished, and the one in flight
  // as ERROR naming the level, the cause and the case.
  const RunCase* in_flight = nullptr;
  int64_t in_flight_index = 0;
  const plugin::LastWordsScope scope;  // the last words refer to this frame
  if (o.impl && local)
    plugin::set_last_words([&](const std::string& cause) {
      progress.clear();
      if (in_flight == nullptr) return;
      RowResult r;
      r.rc = in_flight;
      r.pass = r.judged = false;
      r.error = true;
      r.report = cause + "\ncase: " + props::describe(in_flight->setup) + "\n";
      RunTotals last = t;
      ++last.done;
      ++last.errors;
      if (o.json_path || o.junit_path)
        last.rows.push_back(row_json(static_cast<size_t>(in_flight_index), r));
      print_row(out, static_cast<size_t>(in_flight_index), r, table);
      last.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      finish_run(o, plan, last, out);
      out.flush();
    });
  for (int64_t i = 0; i < plan.count; ++i) {
    if (local && interrupted()) break;
    progress.update(i);
    // Inside a row: its oracle's work as a fraction of the row, and Ctrl-C between key blocks.
    oracle::Watch watch;
    watch.progress = [&](int64_t done, int64_t total) {
      progress.update(static_cast<double>(i) +
                      static_cast<double>(done) / static_cast<double>(std::max<int64_t>(total, 1)));
    };
    if (local) watch.stop = [] { return interrupted(); };
    const bool first = i < static_cast<int64_t>(plan.rows.size());
    const oracle::Expected<RunCase> rc =
        first ? plan.rows[static_cast<size_t>(i)]
              : configured_case(o, o.seed + static_cast<uint64_t>(i), runner->world);
    if (!rc) return bad(rc.status().message());  // not reached: case 0 had the same shape
    in_flight = &*rc;
    in_flight_index = i;
    const RowOutcome r = harness::run_row(*rc, static_cast<size_t>(i), *runner, watch,
                                          std::chrono::seconds(o.timeout_s), err);
    in_flight = nullptr;
    if (r.interrupted) break;  // the rows so far are the summary
    if (r.code != kExitOk) {
      progress.clear();
      if (r.refusal) bad(*r.refusal);
      return r.code;
    }
    if (!runner->root) continue;
    ++t.done;
    t.failed += r.row.pass ? 0 : 1;
    t.suspect += r.row.pass && r.row.suspect ? 1 : 0;
    if (r.row.comparisons > 0) {  // a batch row counts its requests that were compared
      ++t.judged;
      t.worst = std::max(t.worst, r.row.worst.max_ratio);
      t.worst_stat = std::max(t.worst_stat, r.row.stat_ratio);
    }
    if (o.json_path || o.junit_path) t.rows.push_back(row_json(static_cast<size_t>(i), r.row));
    if (o.quiet && r.row.pass && !r.row.suspect) continue;
    progress.clear();
    print_row(out, static_cast<size_t>(i), r.row, table);
  }
  plugin::set_last_words({});  // before the report: nothing is in flight any more
  progress.clear();
  if (!runner->root) return kExitOk;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return finish_run(o, plan, t, out);
}

void add_case_flags(CLI::App* cmd, CaseOptions& o) {
  for (const CaseFlag& f : case_flag_table())
    std::visit(
        Overload{
            [&](IntField m) {
              cmd->add_option(f.name, o.*m, f.help)
                  ->check(int_in(static_cast<int64_t>(f.lo), static_cast<int64_t>(f.hi)));
            },
            [&](RealField m) { cmd->add_option(f.name, o.*m, f.help)->check(real_in(f.lo, f.hi)); },
            [&](TextField m) { cmd->add_option(f.name, o.*m, f.help); },
            [&](SwitchField m) { add_switch(cmd, f.name, o.*m, f.help); },
            [&](OnOffField m) { add_latent_flag(cmd, o.*m); }},
        f.field);
  for (size_t i = 0; i < o.switches.size(); ++i)
    if (const props::FeatureInfo& f = props::kFeatures[i]; f.toggle != nullptr)
      add_switch(cmd, "--" + std::string(f.name), o.switches[i], f.help);
}

Command add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand(
      "run",
      "Run the production DCP path against the oracle: the default sweep, or configured cases "
      "(the default job)");
  run->add_option("--backend", o->backend, "Backend: " + backends_help())->capture_default_str();
  CLI::Option* comm = run->add_option("--comm", o->comm, "Communicator: " + comms_help());
  add_case_flags(run, *o);
  run->add_option("--cases", o->cases, "Configured cases to run (seeds seed, seed+1, ...)")
      ->check(int_in(1, kMaxCases));
  run->add_option("--seed", o->seed, "Seed of the case values and chunk writes")
      ->check(seed_value())
      ->capture_default_str();
  add_timeout_flag(run, o->timeout_s);
  run->add_option("--json", o->json_path, "Also write the report as JSON (docs/cli.md)");
  run->add_option("--junit", o->junit_path,
                  "Also write the report as JUnit XML, one test case per row (docs/cli.md)");
  add_switch(run, "--quiet", o->quiet, "Print failing and suspect rows and the summary only");
  add_bound_flag(run, o->bound);
  run->add_option("--impl", o->impl,
                  "A DCP implementation to judge instead: a C plug-in (include/dcp_verify/impl.h) "
                  "whose levels replace the production path's");
  return {run, [o, comm](const harness::Limits& lim) {
            if (comm->count() == 0) o->comm = default_comm(o->backend);
            // A pair this binary cannot run is refused before MPI starts (run_dcp checks again).
            if (o->impl || !one_rank_per_process(*o) || unavailable(o->backend, o->comm))
              return run_dcp(*o, lim, std::cout, std::cerr);
#ifdef DCP_HAVE_MPI
            if (const auto st = gpu::mpi_init(nullptr, nullptr); !st) {
              return refuse("run", st.message(), std::cerr);
            }
            int code = kExitBadInput;
            try {
              code = run_dcp(*o, lim, std::cout, std::cerr);
            } catch (const std::exception& e) {
              // The last resort, as in main, but the peers must hear of it: they would otherwise
              // wait out --timeout for this rank.
              const std::string why = std::string("internal error: ") + e.what();
              refuse("run", "rank " + std::to_string(gpu::mpi_world_rank()) + ": " + why,
                     std::cerr);
              gpu::mpi_notify_failure(why);
              gpu::mpi_abort(kExitBadInput);
            }
            gpu::mpi_finalize(code);
            return code;
#else
            return run_dcp(*o, lim, std::cout, std::cerr);
#endif
          }};
}

}  // namespace dcp::tools
