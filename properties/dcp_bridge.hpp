// dcp_bridge.hpp — drives the production DCP path (gpu/) with oracle cases and judges it.
//
// This is the only place that knows both sides: it turns an oracle::Case into the plain inputs
// of gpu::DcpInputs, runs a backend, and compares (a) the assembled output O [T, Hq, Dv], LSE
// [T, Hq] with the oracle's full attention and (b) every rank's partial (O_r, L_r) with the
// oracle on that rank's shard (its owned visible keys; the sink on kSinkRank only), each within
// the bound derived for the arithmetic the configuration claims.
//
//   DcpCheck chk = check_dcp(c, cfg, chunks);      // runs run_dcp_threads and the oracle
//   if (!chk.pass) std::cout << chk.report;        // names the worst element and the rank
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/dcp_step.hpp"
#include "gpu/run_threads.hpp"
#include "oracle/attention.hpp"
#include "oracle/case.hpp"
#include "oracle/compare.hpp"
#include "oracle/status.hpp"
#include "oracle/tolerance.hpp"

namespace dcp::props {

// Storage formats on the two sides (oracle::DType::f64 has no production counterpart).
// The oracle's dtypes the production path stores (its formats, gpu/kernels/storage_format.hpp):
// the value formats (F32, BF16, F16) and, with kv, the caches' (fp8, int8), in the order
// properties draw them; whether d is one; their names, "F32, BF16 or F16" (for refusals).
std::vector<oracle::DType> production_dtypes(bool kv);
bool is_production_dtype(oracle::DType d, bool kv);
std::string production_dtype_names(bool kv);
gpu::StorageFormat to_storage_format(oracle::DType d);
oracle::DType to_oracle_dtype(gpu::StorageFormat d);
inline gpu::LseBase to_gpu_base(oracle::LseBase b) {
  return b == oracle::LseBase::e ? gpu::LseBase::e : gpu::LseBase::two;
}

// The production path's inputs for a case, exactly: q in fp32, K and V as the caches' stored
// elements (kv_dtype's) with the case's k_scale and v_scale. chunks: KV write lengths.
gpu::DcpInputs to_dcp_inputs(const oracle::Case& c, std::vector<int64_t> chunks);

// The arithmetic the production path claims (its kernels' KernelMath, formats and tiling) for the
// final output (N * splits partials merged) or for one rank's partial (splits partials merged
// locally, stored in math.partial).
oracle::Arithmetic host_claim(const gpu::DcpConfig& cfg, bool partial);

struct DcpCheck {
  bool pass = false;
  double max_ratio = 0.0;  // worst error / bound over the output and every partial
  // The statistical tier (docs/tolerances.md §10): no comparison over its statistical bound, and
  // the worst error / statistical bound. pass && !pass_statistical is SUSPECT.
  bool pass_statistical = false;
  double max_stat_ratio = 0.0;
  std::string report;       // one line per failing or suspect comparison (empty when all pass)
  oracle::Comparison full;  // the assembled output against the full oracle
  // Why a failure is not a bound violation: the backend returned an error (the implementation
  // refused or failed), or the oracle could not judge (no bound is derivable for this case).
  bool backend_error = false, oracle_error = false;
  // Some comparison had no bound because the claim is too coarse for the case
  // (oracle::Status::unjudgeable), and how the comparisons that were made, and the oracle's other
  // steps, came out: with unjudgeable and both of these, the case says nothing of the
  // implementation either way (fail_unless_gated draws another).
  bool unjudgeable = false;
  bool judged_pass = true, judged_pass_statistical = true;
  // The caller's watch stopped the oracle before its verdict: no verdict (pass is false).
  bool interrupted = false;
  // Comparisons made: the output's and each judged partial's, of every request (a process of an
  // MPI job counts its share; the job's sum is one process's count).
  int64_t comparisons = 0;
};

// The arithmetic a backend claims for a configuration: for the final output, or for one rank's
// partial (partial = true).
using ClaimFn = std::function<oracle::Arithmetic(const gpu::DcpConfig&, bool partial)>;

// A backend runs the whole TP group on the inputs (run_dcp_threads by default) and states the
// arithmetic it is judged by (host_claim by default: the production path's own). Any callable
// taking (inputs, configuration) converts to one with the production path's claim.
struct DcpBackend {
  using Run =
      std::function<gpu::Result<gpu::GroupRun>(const gpu::DcpInputs&, const gpu::DcpConfig&)>;
  Run run;
  ClaimFn claim;

  DcpBackend() = default;
  DcpBackend(std::nullptr_t) {}  // NOLINT: the production path, as for std::function
  template <class F,
            class = std::enable_if_t<std::is_invocable_r_v<
                gpu::Result<gpu::GroupRun>, F&, const gpu::DcpInputs&, const gpu::DcpConfig&>>>
  DcpBackend(F f) : run(std::move(f)) {}  // NOLINT: implicit, as std::function's
  DcpBackend(Run r, ClaimFn c) : run(std::move(r)), claim(std::move(c)) {}

  explicit operator bool() const { return static_cast<bool>(run); }
  gpu::Result<gpu::GroupRun> operator()(const gpu::DcpInputs& in, const gpu::DcpConfig& cfg) const {
    return run(in, cfg);
  }
  oracle::Arithmetic claim_for(const gpu::DcpConfig& cfg, bool partial) const {
    return claim ? claim(cfg, partial) : host_claim(cfg, partial);
  }
};

// Runs the backend and compares output and partials with the oracle. A backend error or an
// oracle error is a failure with its message in the report. `watch` (oracle/attention.hpp) sees
// the oracle's work: (row, key) pairs of the references and bounds of the output and of every
// shard, counted as one total; its stop ends the judgement between blocks of keys (interrupted).
DcpCheck check_dcp(const oracle::Case& c, const gpu::DcpConfig& cfg,
                   const std::vector<int64_t>& chunks, const DcpBackend& backend = nullptr,
                   bool check_partials = true, const oracle::Watch& watch = {});

// The parts of a finished run a judgement compares: the assembled output, and the partials of
// every TP rank or of one. A process of an MPI job judges its own share (its rank's partial; rank
// 0 the output too), so the oracle's work is split among the job's processes.
struct JudgedParts {
  bool output = true;
  bool partials = true;
  std::optional<int64_t> tp_rank;  // only this TP rank's partial; nullopt: every rank's
};

// Judges a finished run (for backends run elsewhere, such as MPI ranks gathered on one process)
// within the bounds of `claim` (nullptr: host_claim): the parts `parts` names. A run without
// partials (an implementation that returns only the output) is judged on its output. `watch` as
// for check_dcp. DcpCheck::full is the output's comparison when `parts` includes the output.
DcpCheck judge_dcp(const oracle::Case& c, const gpu::DcpConfig& cfg, const gpu::GroupRun& run,
                   const JudgedParts& parts, const ClaimFn& claim = nullptr,
                   const oracle::Watch& watch = {});

// What a batch's requests share and which of them finished (DcpInputs): every request's first
// shared_prefix keys and values are request 0's; requests [0, retired) finished before the step
// (their queries dropped, their pages freed and reused by the live ones).
struct BatchSharing {
  int64_t shared_prefix = 0;
  int64_t retired = 0;
};

// A decode batch: one request per case (the same heads, dimensions, formats, scales, sink and
// variant; each its own context, queries and top-k), every request's first shared_prefix keys
// and values equal to request 0's. The production path's inputs for it (DcpInputs' batch: the
// live requests' queries and every request's context concatenated, cu_seqlens_q and
// cu_seqlens_k); the first difference from request 0 is an error naming the request and the
// field.
oracle::Expected<gpu::DcpInputs> to_dcp_batch_inputs(const std::vector<oracle::Case>& requests,
                                                     const BatchSharing& sharing);

// Runs the batch in one step (cfg paged) and judges each live request's rows of the output and of
// every rank's partial against the oracle of that request alone: its own logical sequence,
// whatever pages the cache shares or reuses. The report's lines name the request.
DcpCheck check_dcp_batch(const std::vector<oracle::Case>& requests, const BatchSharing& sharing,
                         const gpu::DcpConfig& cfg, const DcpBackend& backend = nullptr,
                         bool check_partials = true, const oracle::Watch& watch = {});

// Judges the parts `parts` names of a finished batch run (its rows those of requests
// [retired, B) in order), as check_dcp_batch does.
DcpCheck judge_dcp_batch(const std::vector<oracle::Case>& requests, int64_t retired,
                         const gpu::DcpConfig& cfg, const gpu::GroupRun& run,
                         const JudgedParts& parts, const ClaimFn& claim = nullptr,
                         const oracle::Watch& watch = {});

// Folds `part`, the judgement of other parts of the same run (another process's share), into
// `into`: both must pass, the worst ratios and the flags of either, the reports one after the
// other. `into.full` stays (the output is judged once).
void merge_judgements(DcpCheck& into, const DcpCheck& part);

std::string describe(const gpu::DcpConfig& cfg);
// The kernel arithmetic that differs from the defaults ("exp=poly3 p_cast=bf16 tf32"); empty
// for the defaults.
std::string describe(const gpu::KernelMath& m);

}  // namespace dcp::props
