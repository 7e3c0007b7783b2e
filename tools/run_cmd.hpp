// run_cmd.hpp — `dcp-verify run`: the production DCP path against the oracle, one row per case.
//
// With no case flags it runs the representative sweep (several N, layouts, variants, both
// combine strategies, gather and replicate-q, GQA and MLA-latent shapes); with flags it runs one
// configured case (or --cases K of them, seeds seed .. seed + K - 1), each of --batch B requests
// with ragged context lengths: one step after another, or with --page-size one step of the whole
// batch over one paged pool (--shared-prefix L: the requests share their first L tokens' whole
// pages). Every request is judged on the assembled output and on every rank's partial, each
// within its derived bound.
//
//   RunOptions opt;  opt.dcp_size = 4;  opt.comm_backend = "a2a";
//   int code = run_dcp(opt, harness::machine_limits(), std::cout, std::cerr);  // command.hpp
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "harness/budget.hpp"
#include "harness/run.hpp"
#include "oracle/status.hpp"
#include "properties/dcp_setup.hpp"
#include "tools/command.hpp"
#include "tools/flags.hpp"

namespace dcp::tools {

// The flags that shape one configured case; shared by `run` and `sweep`.
struct CaseOptions {
  std::optional<std::string> preset;
  std::optional<int64_t> dcp_size, tp_size, interleave, seq, batch, tokens, heads, kv_heads,
      head_dim, v_dim, window, topk, splits, tile, page_size, shared_prefix, retired;
  std::optional<double> softcap;
  std::optional<std::string> comm_backend, lse_base, dtype, kv_dtype, kv_scale, out_dtype, order;
  // The kernels' arithmetic (gpu/kernels/kernel_math.hpp).
  std::optional<std::string> exp, p_cast, partial_dtype, merge_dtype;
  bool replicate_q = false, tf32 = false;
  // The case's switches (props::kFeatures' rows with one: run --sink, ...), by row.
  std::array<bool, std::size(props::kFeatures)> switches{};
  std::optional<bool> latent;  // --latent / --latent=false; unset: the preset's (or false)
  // True when any of these flags was given.
  bool any() const;
  // True when a flag of the kernels' arithmetic was given.
  bool math_given() const { return exp || p_cast || partial_dtype || merge_dtype || tf32; }
};

struct RunOptions : CaseOptions {
  std::string backend = "host";
  std::string comm = "threads";
  int64_t cases = 1;
  uint64_t seed = 1;
  int64_t timeout_s = kDefaultTimeoutSeconds;
  bool quiet = false;
  std::string bound = "sound";  // the tier that gates the exit code: sound or statistical
  std::optional<std::string> json_path;
  std::optional<std::string> junit_path;  // --junit: the report as JUnit XML (tools/junit.hpp)
  std::optional<std::string> impl;  // a C plug-in whose levels run instead (plugin/plugin.hpp)
  // True when the case was configured by flags (otherwise: the default sweep).
  bool configured() const { return any() || cases != 1; }
};

using harness::RunCase;

// Registers the case-shaping flags on a subcommand.
void add_case_flags(CLI::App* cmd, CaseOptions& o);

// The case the flags describe, with case values from `seed` (its chunk writes are drawn by
// batch_request; setup.chunks holds one whole write until then); world > 0 is the
// number of MPI processes (the TP size when not given). Every bad flag, and every combination the
// path cannot run (top-k beyond the keys a query sees, more splits than a rank has keys), is a
// one-line error naming the flags.
// `names` says how the fields were given (the sweep sets S with -b and -e, not --seq).
oracle::Expected<RunCase> configured_case(const CaseOptions& o, uint64_t seed, int64_t world,
                                          const props::SetupNames& names = kFlagNames);

// The flags that were given, as they would be typed (" --preset k3-mla --seq 4096 ...").
std::string case_flags(const CaseOptions& o);

// Whether the ranks run one per process under mpirun (--comm mpi, or --comm nccl launched by
// mpirun) rather than as threads of this process.
bool one_rank_per_process(const RunOptions& o);

int run_dcp(const RunOptions& opt, const harness::Limits& lim, std::ostream& out,
            std::ostream& err);

// Registers `dcp-verify run` and its flags.
Command add_run_command(CLI::App& app);

}  // namespace dcp::tools
