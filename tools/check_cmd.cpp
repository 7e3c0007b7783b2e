#include "tools/check_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "harness/check.hpp"
#include "tools/flags.hpp"
#include "tools/junit.hpp"
#include "tools/session.hpp"

#ifdef DCP_HAVE_MPI
#include "gpu/comm/comm_mpi.hpp"
#include "harness/wire.hpp"
#include "tools/backends.hpp"
#include "tools/mpi_jobs.hpp"
#endif

namespace dcp::tools {
namespace {

struct CheckOptions {
  std::string case_path, result_path, tier = "fast";
  std::string bound = "sound";  // the tier that gates the exit code: sound or statistical
  std::optional<std::string> json_path;
  std::optional<std::string> junit_path;  // --junit: the report as JUnit XML (tools/junit.hpp)
  bool quiet = false;
  int64_t timeout_s = kDefaultTimeoutSeconds;  // under mpirun: how long a process waits for peers
};

// The processes of the job judging the parts: one (every part here), or mpirun's P.
struct Job {
  int64_t rank = 0, size = 1;
  std::chrono::milliseconds deadline{0};  // how long a process waits for its peers (--timeout)
};

int run_check(const CheckOptions& o, const harness::Limits& lim, const Job& job = {}) {
  auto bad = [](const std::string& why) { return refuse("check", why, std::cerr); };
  const auto t0 = std::chrono::steady_clock::now();
  // The files read and checked, each request's case and result, before anything is judged; a
  // refusal here is this process's, and under mpirun every process hears of it (below).
  // --tier and --bound are checked against the same lists when parsed (IsMember).
  const harness::CheckParams params{
      o.case_path, o.result_path, harness::parse_tier(o.tier).value_or(oracle::Tier::fast),
      harness::parse_bound(o.bound).value_or(props::BoundTier::sound)};
  oracle::Expected<harness::CheckPlan> plan = oracle::Status();
  const std::string refused = [&]() -> std::string {
    if (const auto why = reports_error(o.json_path, o.junit_path,
                                       {{"--case", o.case_path}, {"--result", o.result_path}}))
      return *why;
    plan = harness::plan_check(params, lim);
    return plan ? "" : plan.status().message();
  }();
#ifdef DCP_HAVE_MPI
  if (job.size > 1) {
    // Every process arrives here, with its refusal or none: one refusing ends them all, named.
    const gpu::MpiVerdict v =
        job_agree("check", refused.empty() ? kExitOk : kExitBadInput, refused, job.deadline);
    if (v.code != kExitOk)
      return bad(v.rank == job.rank ? "process " + std::to_string(job.rank) + ": " + refused
                                    : "process " + std::to_string(v.rank) +
                                          " refused its input, and the job ends: " + v.message);
  }
#endif
  if (!refused.empty()) return bad(refused);
  InterruptGuard guard;
  const std::vector<int64_t> owner = harness::assign_parts(*plan, job.size);
  Progress progress("check",
                    static_cast<int64_t>(std::count(owner.begin(), owner.end(), job.rank)));
  oracle::Watch watch;
  watch.stop = [] { return interrupted(); };
  std::vector<std::optional<oracle::PartCheck>> judged(owner.size());
  const oracle::Status judging = harness::judge_parts(*plan, owner, job.rank, watch, judged,
                                                      [&](int64_t done) { progress.update(done); });
  progress.clear();
#ifdef DCP_HAVE_MPI
  if (job.size > 1) {
    // Every process's parts to process 0 (harness/wire.hpp); any error or Ctrl-C ends the job.
    const std::string me = "process " + std::to_string(job.rank);
    const std::string stopped_line = "# check: INTERRUPTED (" + me + "); nothing reported\n";
    // The peers may still be judging: a process waits --timeout beyond the time the whole job's
    // parts may take.
    const JobWait wait{"check", stopped_line, job.deadline + judging_time(plan->work),
                       "the other processes' judgements"};
    const int code = !judging ? kExitBadInput : interrupted() ? kExitInterrupted : kExitOk;
    if (const int jc = job_code(code, wait); jc != kExitOk) {
      if (code == kExitInterrupted) std::cout << stopped_line;
      if (code == kExitBadInput) bad(me + ": " + judging.message());
      return jc;
    }
    std::vector<harness::IndexedPart> mine;
    for (size_t g = 0; g < judged.size(); ++g)
      if (judged[g]) mine.push_back({static_cast<int64_t>(g), *judged[g]});
    const auto every = gpu::mpi_gather_bytes(harness::encode_parts(mine),
                                             "gathering the judgements", job.deadline);
    if (!every) {
      bad(me + ": " + every.status().message());
      gpu::mpi_abort(kExitTimeout);
    }
    if (job.rank != 0) return kExitOk;  // process 0 reports for the job
    // Every part exactly once, from the process assign_parts gave it to: anything else is a
    // message this binary did not send, refused (not a judgement short of parts).
    for (size_t k = 1; k < every->size(); ++k) {
      const std::string from = "process " + std::to_string(k) + ": ";
      auto parts = harness::decode_parts((*every)[k]);
      if (!parts) return bad(from + parts.status().message());
      for (harness::IndexedPart& p : *parts) {
        const auto g = static_cast<size_t>(p.index);
        if (p.index < 0 || g >= judged.size() || owner[g] != static_cast<int64_t>(k) || judged[g])
          return bad(from + "sent part " + std::to_string(p.index) + ", not one of its own");
        judged[g] = std::move(p.part);
      }
    }
    for (size_t g = 0; g < judged.size(); ++g)
      if (!judged[g])
        return bad("process " + std::to_string(owner[g]) + " did not send part " +
                   std::to_string(g));
  }
#endif
  if (!judging) return bad(judging.message());
  const oracle::ResultCheck all = harness::collect_parts(*plan, judged);
  const bool stopped = static_cast<int64_t>(all.parts.size()) < plan->planned;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << harness::check_text(
      *plan, all, {.seconds = secs, .processes = job.size, .failing_only = o.quiet});
  if ((o.json_path || o.junit_path) &&
      !write_reports("check", o.json_path, o.junit_path, harness::check_report(*plan, all, secs)))
    return kExitBadInput;
  if (stopped) return kExitInterrupted;
  return harness::passes(params.gate, all) ? kExitOk : kExitFail;
}

}  // namespace

Command add_check_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Judge an external implementation's result file against the oracle within the bound "
      "derived for its dtypes (docs/format.md)");
  cmd->add_option("--case", o->case_path, "Case file (safetensors): the inputs")->required();
  cmd->add_option("--result", o->result_path,
                  "Result file (safetensors): o [T,Hq,Dv], lse [T,Hq], optional o_partial "
                  "[N,T,Hq,Dv], lse_partial [N,T,Hq]")
      ->required();
  cmd->add_option("--tier", o->tier, "Oracle tier: fast (double-double) or certify (MPFR)")
      ->check(CLI::IsMember(harness::tier_names()))
      ->capture_default_str();
  add_bound_flag(cmd, o->bound);
  cmd->add_option("--json", o->json_path, "Also write the report as JSON (docs/cli.md)");
  cmd->add_option("--junit", o->junit_path,
                  "Also write the report as JUnit XML, one test case per part (docs/cli.md)");
  add_switch(cmd, "--quiet", o->quiet, "Print failing rows and the summary only");
  add_timeout_flag(cmd, o->timeout_s);
  return {cmd, [o](const harness::Limits& lim) {
#ifdef DCP_HAVE_MPI
            // Under mpirun -np P the parts are shared among the processes (assign_parts) and
            // process 0 reports them all; the node's processes share its memory.
            if (launched_by_mpirun()) {
              if (const auto st = gpu::mpi_init(nullptr, nullptr); !st)
                return refuse("check", st.message(), std::cerr);
              const Job job{gpu::mpi_world_rank(), gpu::mpi_world_size(),
                            std::chrono::seconds(o->timeout_s)};
              harness::Limits mine = lim;
              mine.memory_bytes /= static_cast<double>(gpu::mpi_node().size);
              int code = kExitOk;
              if (job.size > 1) {
                const auto differ = inputs_differ("check", job.deadline);
                code = differ ? refuse("check", *differ, std::cerr) : run_check(*o, mine, job);
              } else {
                code = run_check(*o, lim);
              }
              gpu::mpi_finalize(code);
              return code;
            }
#endif
            return run_check(*o, lim);
          }};
}

}  // namespace dcp::tools
