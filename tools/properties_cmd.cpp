#include "tools/properties_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/draws.hpp"
#include "harness/report.hpp"
#include "harness/tiers.hpp"
#include "oracle/case_file.hpp"
#include "oracle/text.hpp"
#include "plugin/plugin.hpp"
#include "properties/footprint.hpp"
#include "properties/pinned.hpp"
#include "properties/suite.hpp"
#include "tools/backends.hpp"
#include "tools/flags.hpp"
#include "tools/junit.hpp"
#include "tools/property_runner.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

using nlohmann::json;

// What the DCP property draws (--max-dcp ... --lse-bases): an implementation's ranges as given
// (harness/draws.hpp), and once read_limits has read them, the limits and the flags that narrowed
// them (for reproduce lines).
struct DrawOptions {
  harness::DrawRanges given;
  props::DcpLimits limits;
  std::string limit_flags;
};

struct PropertiesOptions {
  std::string backend = "host";
  int64_t cases = 100;
  std::optional<uint64_t> seed;
  std::vector<std::string> only;
  std::optional<std::string> pinned;  // default: the file installed beside the binary
  int64_t timeout_s = kDefaultTimeoutSeconds;
  std::optional<std::string> json_path;
  std::optional<std::string> junit_path;  // --junit: the report as JUnit XML (tools/junit.hpp)
  bool quiet = false;
  std::string bound = "sound";      // the tier the properties assert: statistical fails a SUSPECT
  std::optional<std::string> impl;  // a C plug-in whose levels run instead (plugin/plugin.hpp)
  DrawOptions draws;
};

// Reads the ranges given into o.limits and o.limit_flags; the one-line error of one it refuses.
std::optional<std::string> read_limits(DrawOptions& o) {
  const auto d = harness::read_draws(o.given);
  if (!d) return d.status().message();
  o.limits = d->limits;
  o.limit_flags = d->flags;
  return std::nullopt;
}

// The properties that drive a plug-in: the DCP path's, through its partial and combine levels,
// and the same body through its step level (the others exercise this project's own MLA slice,
// layout and KV writes, which a plug-in does not replace).
constexpr const char* kImplProperties[] = {"dcp-path", "dcp-fp8"};
constexpr const char* kBatchProperty = "dcp-batch";  // run for a plug-in with a paged level
constexpr const char* kImplStepProperty = "dcp-step";
constexpr const char* kImplStepFp8Property = "dcp-step-fp8";

// The flags of DrawOptions, for properties and cases: each range's flag, its default DcpLimits'.
void add_draw_flags(CLI::App* cmd, DrawOptions& d) {
  const props::DcpLimits all;
  harness::DrawRanges& r = d.given;
  for (const auto& [flag, into, def, most, help] :
       {std::tuple{"--max-dcp", &r.max_dcp, all.max_dcp, props::kMaxDrawnDcp,
                   "Largest N the DCP property draws"},
        std::tuple{"--max-groups", &r.max_groups, all.max_groups, props::kMaxDrawnGroups,
                   "Largest number of TP groups (TP / N)"},
        std::tuple{"--max-seq", &r.max_seq, all.max_seq, props::kMaxDrawnSeq,
                   "Largest context length S drawn"},
        std::tuple{"--max-head-dim", &r.max_head_dim, all.max_head_dim, props::kMaxDrawnHeadDim,
                   "Largest Dk drawn"},
        std::tuple{"--max-v-dim", &r.max_v_dim, all.max_v_dim, props::kMaxDrawnHeadDim,
                   "Largest Dv drawn"}})
    cmd->add_option(flag, *into, help)->check(int_in(1, most))->default_str(std::to_string(def));
  for (const auto& [flag, into, most, help] :
       {std::tuple{"--dcp-sizes", &r.dcp_sizes, props::kMaxDrawnDcp,
                   "The only N drawn, a list (e.g. 1,2,4,8; default any up to --max-dcp)"},
        std::tuple{"--head-dims", &r.head_dims, props::kMaxDrawnHeadDim,
                   "The only Dk drawn, a list (e.g. 64,128; default any up to --max-head-dim)"},
        std::tuple{"--v-dims", &r.v_dims, props::kMaxDrawnHeadDim,
                   "The only Dv drawn, a list (default any up to --max-v-dim; a shared latent "
                   "only where one fits in Dk)"}})
    cmd->add_option(flag, *into, help)->check(int_in(1, most))->delimiter(',');
  cmd->add_option("--without", r.without,
                  "Features the implementation lacks, never drawn (" + props::feature_names() +
                      "; batch: no dcp-batch property); pinned entries using them are not "
                      "replayed")
      ->delimiter(',');
  cmd->add_option("--q-dtypes", r.q_dtypes, "Query formats drawn (f32, bf16, f16; default all)")
      ->delimiter(',');
  cmd->add_option(
         "--kv-dtypes", r.kv_dtypes,
         "K/V storage formats drawn: " + gpu::format_names(true) +
             " (default all; the quantized ones with no scales or scales per tensor, KV head, "
             "token or token and KV head)")
      ->delimiter(',');
  cmd->add_option("--lse-bases", r.lse_bases, "LSE bases drawn (e, 2; default both)")
      ->delimiter(',');
}

using Row = PropertyRun;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string reproduce_line(const PropertiesOptions& o, uint64_t seed, const std::string& only) {
  std::ostringstream os;
  os << "dcp-verify properties --backend " << o.backend << " --seed " << seed << " --cases "
     << o.cases;
  if (!only.empty()) os << " --only " << only;
  if (harness::parse_bound(o.bound) != props::BoundTier::sound) os << " --bound " << o.bound;
  if (o.impl) os << " --impl " << oracle::printable(*o.impl);
  if (o.pinned) os << " --pinned " << oracle::printable(*o.pinned);
  os << o.draws.limit_flags;
  return os.str();
}

// The properties table's columns.
const Table& properties_table() {
  static const Table t(3, {{"property", 17, Align::left, 0},
                           {"cases", 7},
                           {"result", 11, Align::left, 2},
                           {"shrinks", 7},
                           {"time(s)", 8},
                           {"what", 0, Align::left, 2}});
  return t;
}

void print_row(std::ostream& out, const Row& r) {
  properties_table().print_row(
      out, {r.name, std::to_string(r.cases), r.result,
            r.shrinks >= 0 ? std::to_string(r.shrinks) : "-", cell("%.2f", r.seconds), r.what});
}

// What the pinned row replays: the file.
std::string pinned_what(const std::string& pinned) {
  return "pinned counterexamples (" + oracle::printable(pinned) + ")";
}

// The pinned counterexamples replayed on the backend: one row.
Row replay_row(const std::vector<props::PinnedEntry>& pins, const std::string& pinned,
               const props::DcpBackend& backend, const props::DcpLimits& lim) {
  const auto t = std::chrono::steady_clock::now();
  std::vector<props::PinnedEntry> inside;
  for (const props::PinnedEntry& e : pins)
    if (!props::outside(e.setup, lim)) inside.push_back(e);
  const props::PinnedReplay replay = props::replay_pinned(inside, backend);
  Row r;
  r.name = "pinned";
  r.what = pinned_what(pinned);
  if (inside.size() < pins.size())
    r.what += "; " + std::to_string(pins.size() - inside.size()) + " of " +
              std::to_string(pins.size()) + " outside the drawn limits, not replayed";
  r.cases = replay.count;
  r.seconds = since(t);
  r.result = replay.failures.empty() ? "OK" : "FAILED";
  for (const std::string& f : replay.failures) r.message += f;
  return r;
}

// The rows (all, or the failing ones with --quiet), the summary and the JSON report; the exit
// code.
int finish_properties(const PropertiesOptions& o, uint64_t seed, const std::vector<Row>& rows,
                      double secs, std::ostream& out) {
  int64_t failed = 0, passed = 0;
  for (const Row& r : rows) {
    const bool ok = r.result == "OK";
    passed += ok ? 1 : 0;
    failed += ok || r.result == "INTERRUPTED" ? 0 : 1;
    if (o.quiet && ok) continue;
    print_row(out, r);
    if (!ok) {
      std::istringstream msg(r.message);
      for (std::string line; std::getline(msg, line);)
        if (!line.empty()) out << "#    " << line << "\n";
      if (r.name != "pinned") out << "#    reproduce: " << reproduce_line(o, seed, r.name) << "\n";
    }
  }
  const bool stopped = interrupted();
  char time_s[32];
  std::snprintf(time_s, sizeof time_s, "%.1f", secs);
  std::string only_all;
  for (const std::string& name : o.only) only_all += (only_all.empty() ? "" : ",") + name;
  out << "# properties: " << rows.size() << "  passed: " << passed << "  failed: " << failed
      << "  time: " << time_s << " s" << (stopped ? "  (interrupted: the rest did not run)" : "")
      << "\n"
      << "# reproduce: " << reproduce_line(o, seed, only_all) << "\n"
      << "# properties: "
      << (stopped       ? "INTERRUPTED"
          : failed == 0 ? "OK"
          : std::all_of(rows.begin(), rows.end(),
                        [](const Row& r) { return r.result == "OK" || r.result == "ERROR"; })
              ? "ERROR"
              : "FAILED")
      << "\n";

  if (o.json_path || o.junit_path) {
    json props = json::array();
    for (const Row& r : rows) {
      props.push_back({{"name", r.name},
                       {"what", r.what},
                       {"result", r.result},
                       {"cases", r.cases},
                       {"discarded", r.discarded},
                       {"shrinks", r.shrinks >= 0 ? json(r.shrinks) : json(nullptr)},
                       {"seconds", r.seconds},
                       {"message", r.message},
                       {"reproduce", r.name == "pinned" ? json(nullptr)
                                                        : json(reproduce_line(o, seed, r.name))}});
    }
    const json report = {{"schema", "dcp-verify/properties/1"},
                         {"backend", o.backend},
                         {"impl", o.impl ? json(*o.impl) : json(nullptr)},
                         {"bound", o.bound},
                         {"seed", seed},
                         {"cases", o.cases},
                         {"properties", props},
                         {"interrupted", stopped},
                         {"pass", failed == 0 && !stopped},
                         {"seconds", secs}};
    if (!write_reports("properties", o.json_path, o.junit_path, report)) return kExitBadInput;
  }
  if (stopped) return kExitInterrupted;
  return failed == 0 ? kExitOk : kExitFail;
}

int run_properties(PropertiesOptions& o, const harness::Limits& lim) {
  auto bad = [](const std::string& why) { return refuse("properties", why, std::cerr); };
  if (const auto why = read_limits(o.draws)) return bad(*why);
  const std::string pinned = o.pinned.value_or(installed_data_file("pinned.json"));
  if (const auto why = reports_error(o.json_path, o.junit_path,
                                     {{"--pinned", pinned}, {"--impl", o.impl.value_or("")}}))
    return bad(*why);
  std::string impl_label;
  std::optional<ImplBackends> impl;
  const auto opened = [&]() -> oracle::Expected<props::DcpBackend> {
    if (!o.impl) return open_in_process_backend(o.backend, std::chrono::seconds(o.timeout_s));
    auto b = open_impl(*o.impl, o.backend, "threads", std::chrono::seconds(o.timeout_s));
    if (!b) return b.status();
    impl = std::move(*b);
    impl_label = impl->label;
    return impl->preferred();
  }();
  if (!opened) return bad(opened.status().message());
  const props::DcpBackend& backend = *opened;
  // What the implementation says it lacks is never drawn, as with --without.
  for (const std::string& lacked : impl ? impl->lacks : std::vector<std::string>{})
    if (const props::FeatureInfo* f = props::find_feature(lacked)) o.draws.limits.lack(f->feature);
  // A plug-in is handed the K/V formats of ABI version 2 as it was released; a format added since
  // reaches its paged level as raw codes that a plug-in written before it cannot read (int8 and
  // later): drawn for one only where --kv-dtypes names it. This list never grows.
  constexpr oracle::DType kAbi2KvDtypes[] = {oracle::DType::f32, oracle::DType::bf16,
                                             oracle::DType::f16, oracle::DType::f8e4m3,
                                             oracle::DType::f8e5m2};
  if (impl && o.draws.given.kv_dtypes.empty())
    std::erase_if(o.draws.limits.kv_dtypes, [&](oracle::DType d) {
      return std::find(std::begin(kAbi2KvDtypes), std::end(kAbi2KvDtypes), d) ==
             std::end(kAbi2KvDtypes);
    });
  props::set_property_bound(harness::parse_bound(o.bound).value_or(props::BoundTier::sound));
  std::vector<props::SuiteProperty> suite = props::property_suite(backend, o.draws.limits);
  if (impl) {
    std::erase_if(suite, [&](const props::SuiteProperty& p) {
      const bool batch = p.name == kBatchProperty && impl->batches;
      return (std::find(std::begin(kImplProperties), std::end(kImplProperties), p.name) ==
                  std::end(kImplProperties) &&
              !batch) ||
             !impl->levels;
    });
    const props::DcpLimits& draws = o.draws.limits;
    if (impl->step && !props::cache_formats(draws, props::CacheKind::values).empty())
      suite.push_back({kImplStepProperty,
                       "the plug-in's whole step: output and every rank's partial it returns "
                       "within the derived bound",
                       [step = *impl->step, draws] {
                         props::dcp_path_property(step, draws, props::CacheKind::values);
                       }});
    if (impl->step && !props::cache_formats(draws, props::CacheKind::fp8).empty())
      suite.push_back({kImplStepFp8Property,
                       "the same with fp8 and int8 KV caches (dequantized in F32 for it)",
                       [step = *impl->step, draws] {
                         props::dcp_path_property(step, draws, props::CacheKind::fp8);
                       }});
  }
  for (const std::string& name : o.only) {
    bool known = false;
    for (const auto& p : suite) known = known || p.name == name || name == "pinned";
    // A DCP property the limits leave out: no K/V format of its kind to draw.
    const bool step = impl && impl->step;
    const bool fp8 = name == "dcp-fp8" || (step && name == kImplStepFp8Property);
    const bool levels = !impl || impl->levels;
    if (!known && ((levels && (name == "dcp-fp8" || name == "dcp-path")) ||
                   (step && (name == kImplStepFp8Property || name == kImplStepProperty)))) {
      return bad("--only " + name + ": --kv-dtypes draws no " +
                 (fp8 ? "quantized format (" + gpu::cache_format_names() + ")"
                      : "16- or 32-bit format (" + gpu::format_names(false) + ")"));
    }
    // dcp-batch exists, but not for this run: said so, not "unknown".
    if (!known && name == "dcp-batch") {
      return bad(impl && !impl->batches
                     ? "--only dcp-batch: this plug-in's levels take one request per step (a batch "
                       "needs ABI 2's paged level); the batch property runs the production path "
                       "only"
                     : "--only dcp-batch: " +
                           std::string(impl ? "the implementation lacks batches (or --without "
                                              "batch leaves the batch property out)"
                                            : "--without batch leaves the batch property out"));
    }
    if (!known) {
      std::string names = "pinned";
      for (const auto& p : suite) names += ", " + p.name;
      return bad("--only: unknown property '" + name + "'; expected " + names);
    }
  }
  auto wanted = [&](const std::string& name) {
    return o.only.empty() || std::find(o.only.begin(), o.only.end(), name) != o.only.end();
  };
  const uint64_t seed = o.seed ? *o.seed : std::random_device{}();
  // The pinned file is input like any other: read and checked whole before anything runs.
  std::vector<props::PinnedEntry> pins;
  if (wanted("pinned")) {
    auto loaded = props::load_pinned(pinned);
    if (!loaded)
      return bad((o.pinned ? "--pinned: " : "--pinned (default): ") + loaded.status().message());
    pins = std::move(*loaded);
    for (size_t i = 0; i < pins.size(); ++i)
      if (const auto why = harness::over_limits(props::dcp_check_footprint(pins[i].setup), lim))
        return bad("--pinned '" + pinned + "': entry " + std::to_string(i) + ": " + *why);
  }
  if (const auto why = harness::draws_over_limits(
          {o.draws.limits, o.draws.limit_flags},
          static_cast<double>(o.cases) * static_cast<double>(suite.size()),
          "--cases " + std::to_string(o.cases), lim))
    return bad(*why);
  silence_rapidcheck_banner();
  std::ostream& out = std::cout;
  out << "# dcp-verify properties  backend=" << o.backend << "  seed=" << seed
      << "  cases=" << o.cases << "  bound=" << o.bound
      << (impl_label.empty() ? "" : "  impl=" + impl_label) << "\n"
      << "#  shrinks: steps RapidCheck took to shrink a failure to the counterexample shown\n";
  properties_table().print_header(out);

  InterruptGuard guard;
  std::vector<Row> rows;
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress("properties", static_cast<int64_t>(suite.size()) + 1);
  // A level that crashes or never returns ends the process (plugin/plugin.hpp);
  // first these last words print and write the report: the properties that finished, and the
  // one in flight as ERROR naming the level, the cause and the case.
  Row in_flight;
  in_flight.result = "ERROR";
  const plugin::LastWordsScope scope;  // the last words refer to this frame
  if (o.impl) {
    plugin::set_last_words([&](const std::string& cause) {
      progress.clear();
      std::vector<Row> all = rows;
      all.push_back(in_flight);
      all.back().cases = in_flight.name == "pinned" ? 0 : cases_entered();
      const std::string& in_case = in_flight.name == "pinned" ? "" : props::current_case();
      all.back().message = cause + (in_case.empty() ? "" : "\nthe case in flight: " + in_case);
      finish_properties(o, seed, all, since(t0), out);
      out.flush();
    });
  }
  if (wanted("pinned")) {
    in_flight.name = "pinned";
    in_flight.what = pinned_what(pinned);
    rows.push_back(replay_row(pins, pinned, backend, o.draws.limits));
  }
  for (const props::SuiteProperty& p : suite) {
    if (!wanted(p.name)) continue;
    if (interrupted()) break;
    progress.update(static_cast<int64_t>(rows.size()));
    in_flight.name = p.name;
    in_flight.what = p.what;
    Row r = run_property(p, o.cases, seed);
    // A case the backend did not finish (a level of the implementation, or the production
    // path's own guard, reported an error) compared nothing: ERROR, not FAILED.
    if (r.result == "FAILED" && r.counterexample.ends_with(props::kBackendErrorTag))
      r.result = "ERROR";
    rows.push_back(std::move(r));
  }
  plugin::set_last_words({});  // before the report: nothing is in flight any more
  progress.clear();

  return finish_properties(o, seed, rows, since(t0), out);
}

struct CasesOptions {
  uint64_t seed = 0;
  int64_t count = 10;
  std::string out;
  DrawOptions draws;
};

// Draws `count` DCP setups as the dcp-path property does and writes each case, with its setup as
// JSON in the metadata (x_setup), to OUT/case-NNNN.safetensors (harness/draws.hpp).
int run_cases(CasesOptions& o, const harness::Limits& lim) {
  auto bad = [](const std::string& why) { return refuse("cases", why, std::cerr); };
  if (const auto why = read_limits(o.draws)) return bad(*why);
  if (const auto st =
          harness::write_cases({o.draws.limits, o.draws.limit_flags},
                               {.seed = o.seed, .count = o.count, .folder = o.out}, lim);
      !st)
    return bad(st.message());
  std::cout << "# dcp-verify cases  seed=" << o.seed << "  count=" << o.count << "  out=" << o.out
            << o.draws.limit_flags << "\n";
  return kExitOk;
}

}  // namespace

Command add_cases_command(CLI::App& app) {
  auto o = std::make_shared<CasesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "cases",
      "Write the DCP property's random cases to files (case-NNNN.safetensors, the setup in "
      "x_setup), for implementations driven outside dcp-verify");
  cmd->add_option("--seed", o->seed, "RapidCheck seed")->check(seed_value())->capture_default_str();
  cmd->add_option("--count", o->count, "Cases to write")
      ->check(int_in(1, harness::kMaxWrittenCases))
      ->capture_default_str();
  cmd->add_option("--out", o->out, "An existing folder")->required();
  add_draw_flags(cmd, o->draws);
  return {cmd, [o](const harness::Limits& lim) { return run_cases(*o, lim); }};
}

Command add_properties_command(CLI::App& app) {
  auto o = std::make_shared<PropertiesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "properties", "Run the property suite on a backend against the oracle, with reproduce lines");
  cmd->add_option("--backend", o->backend,
                  "Backend: " + backends_help() + " (cuda: N virtual ranks on GPU 0)")
      ->capture_default_str();
  cmd->add_option("--cases", o->cases, "Cases per property")
      ->check(int_in(1, kMaxCases))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "RapidCheck seed (default: random, printed)")
      ->check(seed_value());
  cmd->add_option("--only", o->only, "Run only these properties (pinned, dcp-path, ...)")
      ->delimiter(',');
  cmd->add_option("--pinned", o->pinned,
                  "Pinned counterexamples (JSON; default: share/dcp-verify/pinned.json beside "
                  "the binary's folder)");
  add_timeout_flag(cmd, o->timeout_s);
  cmd->add_option("--json", o->json_path, "Also write the report as JSON (docs/cli.md)");
  cmd->add_option("--junit", o->junit_path,
                  "Also write the report as JUnit XML, one test case per property (docs/cli.md)");
  add_switch(cmd, "--quiet", o->quiet, "Print failing rows and the summary only");
  add_bound_flag(cmd, o->bound);
  cmd->add_option("--impl", o->impl,
                  "A DCP implementation to drive instead: a C plug-in (include/dcp_verify/impl.h); "
                  "runs the pinned, dcp-path and dcp-fp8 properties (and dcp-batch with ABI 2's "
                  "paged level)");
  add_draw_flags(cmd, o->draws);
  return {cmd, [o](const harness::Limits& lim) { return run_properties(*o, lim); }};
}

}  // namespace dcp::tools
