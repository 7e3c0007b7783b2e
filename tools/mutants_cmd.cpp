#include "tools/mutants_cmd.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "harness/report.hpp"
#include "harness/tiers.hpp"
#include "mutants/catalogue.hpp"
#include "mutants/mutant_device.hpp"
#include "properties/footprint.hpp"
#include "properties/suite.hpp"
#include "tools/backends.hpp"
#include "tools/flags.hpp"
#include "tools/junit.hpp"
#include "tools/property_runner.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

using nlohmann::json;

struct MutantsOptions {
  int64_t cases = 300;
  std::optional<uint64_t> seed;
  std::vector<std::string> only;
  int64_t timeout_s = kDefaultTimeoutSeconds;
  std::optional<std::string> json_path;
  std::optional<std::string> junit_path;  // --junit: the report as JUnit XML (tools/junit.hpp)
  bool quiet = false;
  std::string bound = "sound";   // the tier the properties assert: a SUSPECT kills with statistical
  bool fixed_tolerance = false;  // also run the engines' test (props::fixed_tolerance_flags)
};

struct MutantRow {
  std::string mutant, family;
  bool correct = false;  // the correct path's row (no mutant)
  bool killed = false, interrupted = false;
  PropertyRun kill;   // the property run that failed (killed), else the last one run
  int64_t cases = 0;  // cases run over all properties until the kill (or in all)
  double seconds = 0.0;
  // The engines' test (props::fixed_tolerance_flags) on the dcp-path cases of the same seed:
  // the first case it flags where it passes the correct path, or -1 (a miss). The correct
  // path's row: the first case it flags there (a false alarm of the fixed tolerance), or -1.
  int64_t fixed_flagged_at = -1;
};

// The DCP properties whose cases the engines' test draws, in the suite's order, by name.
constexpr std::pair<props::DcpDraw, std::string_view> kFixedDraws[] = {
    {props::DcpDraw::path, "dcp-path"},
    {props::DcpDraw::fp8, "dcp-fp8"},
    {props::DcpDraw::batch, "dcp-batch"}};

// Which of the cases of dcp-path, dcp-fp8 and dcp-batch (`cases` of each, drawn from the seed as
// the suite draws them) the engines' test flags on the backend (1: flagged), in order; `only`:
// the cases of that property alone (the others count as passed). With `correct` (the correct
// path's flags), it stops at the first case flagged here and not there.
std::vector<char> fixed_tolerance_run(const props::DcpBackend& backend, int64_t cases,
                                      uint64_t seed, const std::vector<char>* correct = nullptr,
                                      std::string_view only = {}) {
  auto flags = std::make_shared<std::vector<char>>();
  for (const auto& fixed : kFixedDraws) {
    const props::DcpDraw draw = fixed.first;  // a variable a lambda can capture (clang 14)
    if (!only.empty() && fixed.second != only) continue;
    // The cases the previous property did not run (it stopped) count as passed.
    flags->resize(static_cast<size_t>(static_cast<int64_t>(draw) * cases));
    const props::SuiteProperty p{
        "fixed-tolerance", "the engines' DCP = 1 comparison", [backend, flags, correct, draw] {
          const props::DcpSetup s = props::draw_dcp(draw);
          const size_t i = flags->size();
          flags->push_back(props::fixed_tolerance_flags(backend, s) ? 1 : 0);
          if (correct != nullptr && flags->back() && !(i < correct->size() && (*correct)[i]))
            RC_FAIL("flagged where the correct path is not");
        }};
    if (run_property(p, cases, seed, /*shrink=*/false).result != "OK") break;
  }
  return *flags;
}

// The DCP property that killed the row (its cases are those the engines' test draws for it), or
// empty: all three.
std::string_view killed_by_dcp(const MutantRow& r) {
  for (const auto& [draw, name] : kFixedDraws)
    if (r.killed && r.kill.name == name) return name;
  return {};
}

// The first case (1-based) flagged in `flags` and not in `correct` (nullptr: none), or -1.
int64_t first_flag(const std::vector<char>& flags, const std::vector<char>* correct) {
  for (size_t i = 0; i < flags.size(); ++i)
    if (flags[i] && !(correct != nullptr && i < correct->size() && (*correct)[i]))
      return static_cast<int64_t>(i) + 1;
  return -1;
}

// Runs the suite in order until a property fails; the clean path runs it all.
MutantRow run_suite(const std::vector<props::SuiteProperty>& suite, int64_t cases, uint64_t seed) {
  MutantRow row;
  const auto t0 = std::chrono::steady_clock::now();
  for (const props::SuiteProperty& p : suite) {
    PropertyRun r = run_property(p, cases, seed);
    row.cases += r.cases;
    row.kill = r;
    if (r.result == "INTERRUPTED") {
      row.interrupted = true;
      break;
    }
    if (r.result == "FAILED") {  // a property that gave up or erred has not killed anything
      row.killed = true;
      break;
    }
  }
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return row;
}

// The mutants table's columns (fixed: with the engines' test's column, after "killed by").
const Table& mutants_table(bool fixed) {
  static const auto make = [](bool with) {
    std::vector<Column> c{{"mutant", 25, Align::left, 0},
                          {"family", 11, Align::left},
                          {"verdict", 11, Align::left},
                          {"cases", 7},
                          {"killed by", 16, Align::left, 2},
                          {"shrinks", 7},
                          {"time(s)", 7},
                          {"counterexample", 0, Align::left, 2}};
    if (with) c.insert(c.begin() + 5, Column{"fixed tol", 9});
    return Table(3, std::move(c));
  };
  static const Table with = make(true), without = make(false);
  return fixed ? with : without;
}

// One table row; `killed_by` empty prints "-" for it and the shrinks.
void print_row(std::ostream& out, bool fixed, const MutantRow& r, const std::string& verdict,
               const std::string& killed_by, const std::string& last_column) {
  const std::string shrinks =
      !killed_by.empty() && r.kill.shrinks >= 0 ? std::to_string(r.kill.shrinks) : "-";
  std::vector<std::string> cells{r.mutant, r.family, verdict, std::to_string(r.cases),
                                 killed_by.empty() ? "-" : killed_by};
  if (fixed)
    cells.push_back(r.fixed_flagged_at >= 0 ? std::to_string(r.fixed_flagged_at)
                    : r.correct             ? "-"
                                            : "missed");
  cells.insert(cells.end(), {shrinks, cell("%.2f", r.seconds), last_column});
  mutants_table(fixed).print_row(out, cells);
}

void print_row(std::ostream& out, bool fixed, const MutantRow& r) {
  print_row(out, fixed, r,
            r.interrupted ? "INTERRUPTED"
            : r.killed    ? "KILLED"
                          : "SURVIVED",
            r.killed ? r.kill.name : "", r.killed ? r.kill.counterexample : "-");
}

// The step mutants to run: every one, or those --only names (each known and planted in the step).
oracle::Expected<std::vector<mutants::MutantInfo>> chosen_mutants(const MutantsOptions& o) {
  std::vector<mutants::MutantInfo> chosen;
  for (const mutants::MutantInfo& m : mutants::kMutantCatalogue)
    if (mutants::planted_in_step(m.id) &&
        (o.only.empty() || std::find(o.only.begin(), o.only.end(), m.name) != o.only.end()))
      chosen.push_back(m);
  for (const std::string& name : o.only) {
    const auto m = mutants::parse_mutant(name);
    if (!m)
      return DCP_ERROR("--only: unknown mutant '", name,
                       "'; `dcp-verify mutants --list` prints the catalogue");
    if (!mutants::planted_in_step(*m))
      return DCP_ERROR("--only: '", name,
                       "' is planted in the fp32 model only (the tolerance properties kill it), "
                       "not in the DCP step");
  }
  return chosen;
}

// The unmutated path: every property must pass (a failure is a false alarm). Its row and the
// number of false alarms.
std::pair<MutantRow, int64_t> run_clean(const std::vector<props::SuiteProperty>& suite,
                                        const props::DcpBackend& backend, const MutantsOptions& o,
                                        uint64_t seed, std::vector<char>& fixed_flags) {
  MutantRow clean;
  clean.correct = true;
  clean.mutant = "(none: the correct path)";
  clean.family = "-";
  int64_t false_alarms = 0;
  {
    const auto tc = std::chrono::steady_clock::now();
    for (const props::SuiteProperty& p : suite) {
      PropertyRun r = run_property(p, o.cases, seed);
      clean.cases += r.cases;
      if (r.result == "INTERRUPTED") {
        clean.interrupted = true;
        break;
      }
      if (r.result != "OK") {
        ++false_alarms;
        clean.kill = r;
      }
    }
    clean.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - tc).count();
  }
  if (o.fixed_tolerance && !clean.interrupted) {
    fixed_flags = fixed_tolerance_run(backend, o.cases, seed);
    clean.fixed_flagged_at = first_flag(fixed_flags, nullptr);
  }
  clean.kill.shrinks = -1;  // a false alarm is not a kill: no shrink count in its row
  return {clean, false_alarms};
}

// The unmutated path's row, and the failing property's message after a false alarm.
void print_clean_row(std::ostream& out, bool fixed, const MutantRow& clean, int64_t false_alarms) {
  print_row(out, fixed, clean,
            clean.interrupted ? "INTERRUPTED"
            : false_alarms    ? "FALSE ALARM"
                              : "clean",
            false_alarms ? clean.kill.name : "",
            false_alarms        ? clean.kill.counterexample
            : clean.interrupted ? "interrupted"
                                : "every property passed");
  if (false_alarms) {
    std::istringstream msg(clean.kill.message);
    for (std::string l; std::getline(msg, l);)
      if (!l.empty()) out << "#    " << l << "\n";
  }
}

// The summary lines and the JSON report; the exit code.
int finish_mutants(const MutantsOptions& o, uint64_t seed, const MutantRow& clean,
                   int64_t false_alarms, int64_t fixed_alarms,
                   const std::vector<mutants::MutantInfo>& chosen,
                   const std::vector<MutantRow>& rows, double secs, std::ostream& out) {
  int64_t killed = 0, flagged = 0;
  std::string missed;
  for (const MutantRow& r : rows) {
    killed += r.killed ? 1 : 0;
    flagged += r.fixed_flagged_at >= 0 ? 1 : 0;
    if (r.fixed_flagged_at < 0) missed += (missed.empty() ? "" : ", ") + r.mutant;
  }
  const bool stopped = clean.interrupted || rows.size() < chosen.size() ||
                       (!rows.empty() && rows.back().interrupted);
  char secs_s[32];
  std::snprintf(secs_s, sizeof secs_s, "%.1f", secs);
  std::string only_all;
  for (const std::string& n : o.only) only_all += (only_all.empty() ? "" : ",") + n;
  if (o.fixed_tolerance)
    out << "# fixed tolerance (the output at DCP = N against DCP = 1, vLLM's test tolerances), "
           "on the "
        << o.cases << " cases of the DCP property that killed each mutant: flagged " << flagged
        << " of " << rows.size() << " mutants; the correct path on " << fixed_alarms << " of the "
        << o.cases * static_cast<int64_t>(std::size(kFixedDraws))
        << " cases of dcp-path, dcp-fp8 and dcp-batch\n"
        << (missed.empty() ? "" : "#  missed by it: " + missed + "\n");
  out << "# time: " << secs_s << " s" << (stopped ? "  (interrupted: the rest did not run)" : "")
      << "\n# reproduce: dcp-verify mutants --seed " << seed << " --cases " << o.cases
      << (only_all.empty() ? "" : " --only " + only_all)
      << (o.fixed_tolerance ? " --fixed-tolerance" : "")
      << (harness::parse_bound(o.bound) == props::BoundTier::sound ? "" : " --bound " + o.bound)
      << "\n"
      << "mutants: " << killed << "/" << chosen.size() << " killed, " << false_alarms
      << " false alarms\n";
  if (o.json_path || o.junit_path) {
    json jrows = json::array();
    for (const MutantRow& r : rows)
      jrows.push_back({{"mutant", r.mutant},
                       {"family", r.family},
                       {"killed", r.killed},
                       {"interrupted", r.interrupted},
                       {"cases", r.cases},
                       {"killed_by", r.killed ? json(r.kill.name) : json(nullptr)},
                       {"shrinks", r.killed ? json(r.kill.shrinks) : json(nullptr)},
                       {"fixed_tolerance_flagged_at",
                        r.fixed_flagged_at >= 0 ? json(r.fixed_flagged_at) : json(nullptr)},
                       {"counterexample", r.killed ? json(r.kill.counterexample) : json(nullptr)},
                       {"message", r.killed ? json(r.kill.message) : json(nullptr)},
                       {"seconds", r.seconds}});
    const json report = {
        {"schema", "dcp-verify/mutants/1"},
        {"bound", o.bound},
        {"seed", seed},
        {"cases", o.cases},
        {"false_alarms", false_alarms},
        {"fixed_tolerance_false_alarms", o.fixed_tolerance ? json(fixed_alarms) : json(nullptr)},
        {"killed", killed},
        {"mutants", chosen.size()},
        {"rows", jrows},
        {"interrupted", stopped},
        {"pass", !stopped && false_alarms == 0 && killed == static_cast<int64_t>(chosen.size())},
        {"seconds", secs}};
    if (!write_reports("mutants", o.json_path, o.junit_path, report)) return kExitBadInput;
  }
  if (stopped) return kExitInterrupted;
  return false_alarms == 0 && killed == static_cast<int64_t>(chosen.size()) ? kExitOk : kExitFail;
}

int run_mutants(const MutantsOptions& o, const harness::Limits& lim) {
  auto bad = [](const std::string& why) { return refuse("mutants", why, std::cerr); };
  if (const auto why = reports_error(o.json_path, o.junit_path, {})) return bad(*why);
  const auto picked = chosen_mutants(o);
  if (!picked) return bad(picked.status().message());
  const std::vector<mutants::MutantInfo>& chosen = *picked;
  const std::chrono::milliseconds deadline = std::chrono::seconds(o.timeout_s);
  // The host backend with mutant m planted at its device seam (none: the production path).
  auto planted = [deadline](mutants::Mutant m) {
    return host_threads_backend(deadline,
                                m == mutants::Mutant::none ? nullptr : mutants::mutant_step(m));
  };
  const std::vector<props::SuiteProperty> suite =
      props::property_suite(planted(mutants::Mutant::none));
  // The clean path and every mutant run the whole suite, at most.
  props::Footprint planned = props::suite_case_footprint().most;
  planned.work *= static_cast<double>(o.cases) * static_cast<double>(suite.size()) *
                  static_cast<double>(chosen.size() + 1);
  if (const auto why = harness::over_limits(planned, lim))
    return bad("--cases " + std::to_string(o.cases) + ": " + *why);
  const uint64_t seed = o.seed ? *o.seed : std::random_device{}();
  silence_rapidcheck_banner();
  props::set_property_bound(harness::parse_bound(o.bound).value_or(props::BoundTier::sound));
  std::ostream& out = std::cout;
  out << "# dcp-verify mutants  backend=host  seed=" << seed << "  cases=" << o.cases
      << " per property  mutants=" << chosen.size() << "  bound=" << o.bound << "\n"
      << "#  each mutant runs the properties in order (";
  for (size_t i = 0; i < suite.size(); ++i) out << (i ? ", " : "") << suite[i].name;
  out << ") until one fails; cases: all cases run until the kill; shrinks and counterexample: "
         "the killing property's shrunk case\n";
  mutants_table(o.fixed_tolerance).print_header(out);

  InterruptGuard guard;
  Progress progress("mutants", static_cast<int64_t>(chosen.size()) + 1);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> correct_flags;  // the engines' test on the correct path, case by case
  const auto [clean, false_alarms] =
      run_clean(suite, planted(mutants::Mutant::none), o, seed, correct_flags);
  progress.clear();
  print_clean_row(out, o.fixed_tolerance, clean, false_alarms);
  std::vector<MutantRow> rows;
  for (const mutants::MutantInfo& m : chosen) {
    if (interrupted()) break;
    progress.update(static_cast<int64_t>(rows.size()) + 1);
    const props::DcpBackend backend = planted(m.id);
    MutantRow r = run_suite(props::property_suite(backend), o.cases, seed);
    if (o.fixed_tolerance && !r.interrupted && !interrupted())
      r.fixed_flagged_at =
          first_flag(fixed_tolerance_run(backend, o.cases, seed, &correct_flags, killed_by_dcp(r)),
                     &correct_flags);
    r.mutant = std::string(m.name);
    r.family = std::string(m.family);
    rows.push_back(r);
    progress.clear();
    if (!(o.quiet && r.killed)) print_row(out, o.fixed_tolerance, r);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto fixed_alarms = std::count(correct_flags.begin(), correct_flags.end(), 1);
  return finish_mutants(o, seed, clean, false_alarms, fixed_alarms, chosen, rows, secs, out);
}

const char* planted_in(const mutants::MutantInfo& m) {
  const bool step = m.where & mutants::kInStep, model = m.where & mutants::kInModel;
  return step && model ? "step, fp32 model" : step ? "step" : "fp32 model";
}

// The catalogue as a Markdown table: docs/mutants.md's section 4 is this output
// (tests/docs/generated_sections_test.py keeps it so).
void list_mutants_markdown(std::ostream& out) {
  out << "| mutant | family | planted in | the bug | a case shows it with | public reports |\n"
      << "|---|---|---|---|---|---|\n";
  for (const mutants::MutantInfo& m : mutants::kMutantCatalogue)
    out << "| `" << m.name << "` | " << m.family << " | " << planted_in(m) << " | " << m.bug
        << " | " << m.needs << " | " << m.reports << " |\n";
}

int list_mutants(bool markdown) {
  if (markdown) {
    list_mutants_markdown(std::cout);
    return kExitOk;
  }
  const Table t(3, {{"mutant", 25, Align::left, 0},
                    {"family", 11, Align::left},
                    {"planted in", 16, Align::left},
                    {"the bug", 0, Align::left, 2}});
  t.print_header(std::cout);
  int64_t in_step = 0;
  for (const mutants::MutantInfo& m : mutants::kMutantCatalogue) {
    in_step += (m.where & mutants::kInStep) ? 1 : 0;
    t.print_row(std::cout,
                {std::string(m.name), std::string(m.family), planted_in(m), std::string(m.bug)});
  }
  std::cout << "# " << std::size(mutants::kMutantCatalogue) << " mutants, " << in_step
            << " planted in the DCP step (the kill table runs those); --markdown adds what a case "
               "needs and the public reports\n";
  return kExitOk;
}

}  // namespace

Command add_mutants_command(CLI::App& app) {
  auto o = std::make_shared<MutantsOptions>();
  auto list = std::make_shared<bool>(false);
  auto markdown = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "mutants", "Run the property suite against every bug planted in the DCP step: kill table");
  cmd->add_option("--cases", o->cases, "Cases per property, at most")
      ->check(int_in(1, kMaxCases))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "RapidCheck seed (default: random, printed)")
      ->check(seed_value());
  cmd->add_option("--only", o->only, "Run only these mutants (comma separated)")->delimiter(',');
  add_switch(cmd, "--list", *list, "Print the catalogue and exit");
  add_switch(cmd, "--markdown", *markdown,
             "With --list: the catalogue as a Markdown table with each mutant's condition and "
             "public reports (docs/mutants.md)");
  add_timeout_flag(cmd, o->timeout_s);
  cmd->add_option("--json", o->json_path, "Also write the report as JSON (docs/cli.md)");
  cmd->add_option("--junit", o->junit_path,
                  "Also write the report as JUnit XML, one test case per mutant (docs/cli.md)");
  add_switch(cmd, "--quiet", o->quiet, "Print survivors, false alarms and the summary only");
  add_bound_flag(cmd, o->bound);
  add_switch(cmd, "--fixed-tolerance", o->fixed_tolerance,
             "Also run the engines' test on the same cases (the output at DCP = N against DCP = 1 "
             "within vLLM's fixed atol/rtol): a column of the case that test first flags");
  return {
      cmd, [o, list, markdown, cmd](const harness::Limits& lim) {
        if (!*list && *markdown)
          return refuse("mutants", "--markdown is --list's: add --list", std::cerr);
        if (!*list) return run_mutants(*o, lim);
        for (const CLI::Option* flag : cmd->get_options())
          if (flag->count() > 0 && flag->get_name() != "--list" && flag->get_name() != "--markdown")
            return refuse(
                "mutants",
                "--list prints the catalogue and exits; " + flag->get_name() + " is a run's",
                std::cerr);
        return list_mutants(*markdown);
      }};
}

}  // namespace dcp::tools
