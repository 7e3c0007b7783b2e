#include "tools/properties_cmd.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "properties/suite.hpp"
#include "tools/backends.hpp"
#include "tools/property_runner.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

using nlohmann::json;

struct PropertiesOptions {
  std::string backend = "host";
  int64_t cases = 100;
  std::optional<uint64_t> seed;
  std::vector<std::string> only;
  std::string pinned = DCP_PINNED_FILE;
  std::string json_path;
  bool quiet = false;
};

using Row = PropertyRun;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string reproduce_line(const PropertiesOptions& o, uint64_t seed, const std::string& only) {
  std::ostringstream os;
  os << "dcp-verify properties --backend " << o.backend << " --seed " << seed << " --cases "
     << o.cases;
  if (!only.empty()) os << " --only " << only;
  return os.str();
}

void print_row(std::ostream& out, const Row& r) {
  char line[256];
  std::snprintf(line, sizeof line, "   %-17s %7lld  %-11s %7s %8.2f  %s\n", r.name.c_str(),
                static_cast<long long>(r.cases), r.result.c_str(),
                r.shrinks >= 0 ? std::to_string(r.shrinks).c_str() : "-", r.seconds,
                r.what.c_str());
  out << line;
}

int run_properties(const PropertiesOptions& o) {
  if (const auto bad_json = json_path_error(o.json_path)) {
    std::cerr << "dcp-verify properties: " << *bad_json << "\n";
    return kExitBadInput;
  }
  // The CUDA backend runs here on one GPU: every DCP group's ranks virtual on device 0.
  const std::string comm = o.backend == "cuda" ? "single-gpu" : "threads";
  if (const auto why = unavailable(o.backend, comm)) {
    std::cerr << "dcp-verify properties: " << *why << "\n";
    return kExitBadInput;
  }
  if (const auto why = no_device(o.backend)) {
    std::cerr << "dcp-verify properties: --backend " << o.backend << ": " << *why << "\n";
    return kExitBadInput;
  }
  const props::DcpBackend backend = select_backend(o.backend, comm);
  if (o.cases < 1 || o.cases > 1000000) {
    std::cerr << "dcp-verify properties: --cases: got " << o.cases << "; expected 1 .. 1000000\n";
    return kExitBadInput;
  }
  std::vector<props::SuiteProperty> suite = props::property_suite(backend);
  for (const std::string& name : o.only) {
    bool known = false;
    for (const auto& p : suite) known = known || p.name == name || name == "pinned";
    if (!known) {
      std::string names = "pinned";
      for (const auto& p : suite) names += ", " + p.name;
      std::cerr << "dcp-verify properties: --only: unknown property '" << name << "'; expected "
                << names << "\n";
      return kExitBadInput;
    }
  }
  auto wanted = [&](const std::string& name) {
    return o.only.empty() || std::find(o.only.begin(), o.only.end(), name) != o.only.end();
  };
  const uint64_t seed = o.seed ? *o.seed : std::random_device{}();
  if (wanted("pinned") && !std::ifstream(o.pinned)) {
    std::cerr << "dcp-verify properties: --pinned: cannot read '" << o.pinned << "'\n";
    return kExitBadInput;
  }
  silence_rapidcheck_banner();
  std::ostream& out = std::cout;
  out << "# dcp-verify properties  backend=" << o.backend << "  seed=" << seed
      << "  cases=" << o.cases << "\n"
      << "#  shrinks: steps RapidCheck took to shrink a failure to the counterexample shown\n"
      << "#  property            cases  result      shrinks  time(s)  what\n";

  InterruptGuard guard;
  std::vector<Row> rows;
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress("properties", static_cast<int64_t>(suite.size()) + 1);
  if (wanted("pinned")) {
    const auto t = std::chrono::steady_clock::now();
    const auto replay = props::replay_pinned(o.pinned, backend);
    if (!replay) {
      std::cerr << "dcp-verify properties: " << replay.status().message() << "\n";
      return kExitBadInput;
    }
    Row r;
    r.name = "pinned";
    r.what = "pinned counterexamples (" + o.pinned + ")";
    r.cases = replay->count;
    r.seconds = since(t);
    r.result = replay->failures.empty() ? "OK" : "FAILED";
    for (const std::string& f : replay->failures) r.message += f;
    rows.push_back(r);
  }
  for (const props::SuiteProperty& p : suite) {
    if (!wanted(p.name)) continue;
    if (interrupted()) break;
    progress.update(static_cast<int64_t>(rows.size()));
    rows.push_back(run_property(p, o.cases, seed));
  }
  progress.clear();

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
  const double secs = since(t0);
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
                        : "FAILED")
      << "\n";

  if (!o.json_path.empty()) {
    json props = json::array();
    for (const Row& r : rows) {
      props.push_back({{"name", r.name},
                       {"what", r.what},
                       {"result", r.result},
                       {"cases", r.cases},
                       {"shrinks", r.shrinks >= 0 ? json(r.shrinks) : json(nullptr)},
                       {"seconds", r.seconds},
                       {"message", r.message},
                       {"reproduce", r.name == "pinned" ? json(nullptr)
                                                        : json(reproduce_line(o, seed, r.name))}});
    }
    const json report = {{"schema", "dcp-verify/properties/1"},
                         {"backend", o.backend},
                         {"seed", seed},
                         {"cases", o.cases},
                         {"properties", props},
                         {"interrupted", stopped},
                         {"pass", failed == 0 && !stopped},
                         {"seconds", secs}};
    if (!write_json("properties", o.json_path, report)) return kExitBadInput;
  }
  if (stopped) return kExitInterrupted;
  return failed == 0 ? kExitOk : kExitFail;
}

}  // namespace

Command add_properties_command(CLI::App& app) {
  auto o = std::make_shared<PropertiesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "properties", "Run the property suite on a backend against the oracle, with reproduce lines");
  cmd->add_option("--backend", o->backend,
                  "Backend: " + backends_help() + " (cuda: N virtual ranks on GPU 0)")
      ->capture_default_str();
  cmd->add_option("--cases", o->cases, "Cases per property")->capture_default_str();
  cmd->add_option("--seed", o->seed, "RapidCheck seed (default: random, printed)")
      ->check(kSeedValidator);
  cmd->add_option("--only", o->only, "Run only these properties (pinned, dcp-path, ...)")
      ->delimiter(',');
  cmd->add_option("--pinned", o->pinned, "Pinned counterexamples (JSON)")->capture_default_str();
  cmd->add_option("--json", o->json_path, "Also write the report as JSON (docs/cli.md)");
  cmd->add_flag("--quiet", o->quiet, "Print failing rows and the summary only");
  return {cmd, [o] { return run_properties(*o); }};
}

}  // namespace dcp::tools
