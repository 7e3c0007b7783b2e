// check.hpp — judging an implementation's result file against the oracle, for `dcp-verify check`
// and `dcp_verify.check` alike: both files read and refused as a whole before anything is judged,
// a batch split into its requests, the parts (the merged output, then each rank's partial) shared
// among the processes of a job, each part judged, and the report (docs/cli.md) built from them.
//
//   auto plan = plan_check({case_path, result_path, Tier::fast, BoundTier::sound}, limits);
//   if (!plan) refuse(plan.status().message());
//   std::vector<std::optional<PartCheck>> judged(plan->planned);
//   DCP_TRY(judge_parts(*plan, assign_parts(*plan, 1), 0, watch, judged, nullptr));
//   const oracle::ResultCheck all = collect_parts(*plan, judged);   // into plan->reqs[b].rc too
//   nlohmann::json report = check_report(*plan, all, seconds);
//   std::string text = check_text(*plan, all, {.seconds = seconds});
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/budget.hpp"
#include "harness/tiers.hpp"
#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"
#include "oracle/check.hpp"

namespace dcp::harness {

struct CheckParams {
  std::string case_path, result_path;
  oracle::Tier tier = oracle::Tier::fast;
  props::BoundTier gate = props::BoundTier::sound;  // the tier that decides pass
  // The case's K and V read in place from the mapped file (a long context judged within its
  // file's size of memory), or decoded into memory: a file truncated while mapped ends the
  // process with SIGBUS, which the command names (tools/session.hpp) and a host process such as
  // Python's may not.
  bool in_place = true;
};

// One request of the files (all of them when the case is not a batch) and its judgement.
struct CheckRequest {
  oracle::Case c;
  oracle::DcpResult r;
  oracle::ResultCheck rc;  // filled by collect_parts
  int64_t planned = 0;     // parts to judge: the output and every rank's partial
};

struct CheckPlan {
  CheckParams params;
  std::vector<CheckRequest> reqs;
  int64_t planned = 0;  // every request's parts
  double work = 0.0;    // multiply-adds of every part (what a job's processes wait for)
};

// Both files read, a batch split into requests, and each request's case and result checked; one
// line naming the file (and the request) when they cannot be judged or do not fit `lim`.
oracle::Expected<CheckPlan> plan_check(const CheckParams& p, const Limits& lim);

// Which of `processes` judges each part, every request's parts in order: the most costly first,
// each to the least loaded process so far. A part's cost is its (row, key) pairs, about T Hq S
// for the output and T Hq S / N for a rank's shard.
std::vector<int64_t> assign_parts(const CheckPlan& plan, int64_t processes);

// Judges the parts `owner` gives `process`, into judged[g] (g: the part's index among every
// request's). Stops early, without error, once watch.stop says so; `progress` (may be empty) hears
// how many parts this process finished. An error names the request of a batch.
oracle::Status judge_parts(const CheckPlan& plan, const std::vector<int64_t>& owner,
                           int64_t process, const oracle::Watch& watch,
                           std::vector<std::optional<oracle::PartCheck>>& judged,
                           const std::function<void(int64_t)>& progress);

// The judged parts, in order up to the first not judged (an interrupt), into each request's rc;
// returns every request's parts together, for the batch's verdict.
oracle::ResultCheck collect_parts(CheckPlan& plan,
                                  const std::vector<std::optional<oracle::PartCheck>>& judged);

// Whether the parts pass the gate's tier.
bool passes(props::BoundTier gate, const oracle::ResultCheck& rc);

// docs/tolerances.md §10: each part's derivation allows kStatFalseAlarm, so a correct result is
// SUSPECT with probability at most that times the parts judged.
double statistical_false_alarm(const oracle::ResultCheck& rc);

// "output", or "rank 3" for a rank's partial.
std::string part_name(std::optional<int64_t> rank);

// The JSON report (docs/cli.md, schema dcp-verify/check/2): one request's fields at the top
// level, or for a batch the whole batch's verdict there and each request's report in "requests".
// `all` is collect_parts'; fewer parts than planned is an interrupted check.
nlohmann::json check_report(const CheckPlan& plan, const oracle::ResultCheck& all, double seconds);

// The report as `dcp-verify check` prints it (docs/cli.md): the case and the claim, a row per
// part and tensor, the worst element and its bound's largest terms, each request's verdict in a
// batch, the summary and "# check: VERDICT".
struct CheckTextOptions {
  double seconds = 0.0;       // the check's time, for the summary
  int64_t processes = 1;      // the job's, named in the summary when more than one
  bool failing_only = false;  // rows of the parts that are not OK only (--quiet)
};
std::string check_text(const CheckPlan& plan, const oracle::ResultCheck& all,
                       const CheckTextOptions& how);

}  // namespace dcp::harness
