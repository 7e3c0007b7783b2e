// run.hpp — a run of DCP steps against the oracle, for `dcp-verify run` and `sweep`: its cases
// (the default sweep, or a configured case whose batch is made request by request, within the
// cost model), and each row run and judged through a RequestRunner: every rank in this process
// (local_runner), or one rank per process (the command's MPI runner, tools/run_cmd.cpp, which
// agrees with its peers at every step).
//
//   const std::unique_ptr<RequestRunner> runner = local_runner(backend);
//   for (const RunCase& rc : default_rows(seed)) {
//     const RowOutcome r = run_row(rc, i, *runner, watch, std::chrono::seconds(120), err);
//     if (r.code != kExitOk) ...;  // else r.row.verdict(): "OK", "SUSPECT" or "FAILED"
//   }
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/kernels/kernel_math.hpp"
#include "harness/budget.hpp"
#include "harness/exit_status.hpp"
#include "oracle/attention.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"

namespace dcp::harness {

// One configured case: the first request's setup, what it exercises, and the batch size.
struct RunCase {
  props::DcpSetup setup;
  std::string variant;
  int64_t batch = 1;
  // The batch runs in one step over one paged pool (--page-size with --batch > 1), its requests
  // sharing their first shared_prefix tokens; the first `retired` finished before the step.
  bool one_step = false;
  int64_t shared_prefix = 0;
  int64_t retired = 0;
};

// The default sweep (several N, layouts, variants, both combine strategies, gather and
// replicate-q, GQA and MLA-latent shapes, two engines' bf16 and fp16 pipelines), values from seed.
std::vector<RunCase> default_rows(uint64_t seed);

// What a case exercises, for the variant column: "causal+win256+sink+b2+kv=e4m3/head", ...
std::string variant_of(const props::CaseSpec& s);
// The kernels' arithmetic where it is not the default, in the same style: +exp3, +Pbf16, +tf32,
// +Orbf16 (partials stored), +rsbf16 (the reduce-scatter's sums).
std::string math_tag(const gpu::KernelMath& m);

// One write of a whole context of S tokens, standing for the writes a request draws when it is
// made (batch_request); an empty context has none.
std::vector<int64_t> whole_context_write(int64_t seq);

// Request b of the batch (0 <= b < rc.batch): context S - floor(b S / (2 B)) (a ragged batch
// between S/2 and S) and its own values and chunk writes. Requests are made one at a time, as
// they run: a batch's chunk lists together can outgrow the memory one request needs.
props::DcpSetup batch_request(const RunCase& rc, int64_t b);
// The whole batch as one step's setup (rc.one_step): the requests' contexts as batch_request
// gives them, values from the row's seed, the shared prefix.
props::DcpSetup batch_step(const RunCase& rc);

// Why the batch's requests (run one after another) do not fit the limits, naming the flags, or
// nothing when they fit. `flags` is how the case was given (" --seq 4096 ..."), for the message.
std::optional<std::string> over_budget(const RunCase& rc, const Limits& lim,
                                       const std::string& flags);

// What one request ends with: kExitOk and its check (on the root), or the exit code the run
// stops with and, when this process must still say why, the one line to refuse with.
struct RequestResult {
  int code = kExitOk;
  props::DcpCheck chk;
  std::optional<std::string> refusal;
};

// Where a run's requests execute: every rank in this process, or one rank per MPI process.
class RequestRunner {
 public:
  virtual ~RequestRunner() = default;
  int64_t world = 0;  // processes of the job; 0: every rank in this process
  bool root = true;   // this process prints and reports
  // The memory one case may take: the limit, shared by the node's processes under MPI.
  virtual Limits share(const Limits& lim) const { return lim; }
  // The planning's verdict, the same on every process: the line to refuse with, or nothing.
  virtual std::optional<std::string> agree(const oracle::Status& planned,
                                           std::chrono::seconds /*timeout*/,
                                           std::ostream& /*err*/) {
    if (planned) return std::nullopt;
    return planned.message();
  }
  // `watch` sees the oracle's work on the root (oracle/attention.hpp; props::check_dcp).
  virtual RequestResult run(const props::DcpSetup& s, size_t row, const oracle::Watch& watch,
                            std::ostream& err) = 0;
};

// Every rank in this process, through `backend` (which must outlive it).
std::unique_ptr<RequestRunner> local_runner(const props::DcpBackend& backend);

// One finished row: its case, the worst check over its requests, and its verdict.
struct RowResult {
  const RunCase* rc = nullptr;  // alive while the row is printed and reported
  props::DcpCheck worst;        // the request with the largest error / bound
  bool pass = true;
  bool suspect = false;     // a request over its statistical bound (SUSPECT where it passes)
  double stat_ratio = 0.0;  // the largest error / statistical bound of the row's requests
  bool judged = true;       // every request produced output to compare (no backend error)
  int64_t comparisons = 0;  // the output's and the partials' comparisons of every request
  std::string report;       // failing and suspect requests' reports
  bool error = false;       // the implementation ended the run inside this row (report: why)
  const char* verdict() const {
    return error ? "ERROR" : !pass ? "FAILED" : suspect ? "SUSPECT" : "OK";
  }
};

// One row: every request of its batch, in order. code != kExitOk: the run stops with it;
// interrupted: the watch stopped the oracle inside the row, which has no verdict.
struct RowOutcome {
  int code = kExitOk;
  std::optional<std::string> refusal;
  RowResult row;
  bool interrupted = false;
};

// Every request of the row, in order, each step's collectives given `deadline`. `watch` sees the
// row's oracle work, its requests one after the other (request b's pairs counted as b of the
// batch's request totals plus its own).
RowOutcome run_row(const RunCase& rc, size_t index, RequestRunner& runner,
                   const oracle::Watch& watch, std::chrono::milliseconds deadline,
                   std::ostream& err);

}  // namespace dcp::harness
