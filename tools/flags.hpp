// flags.hpp — numbers on the command line, read strictly, and the documented range of each.
//
// CLI11 converts "99999999999999999999" into an int64_t flag as INT64_MAX and "1e999" into a
// double as inf; these validators run on the text first, so a number outside its type's range
// or its documented range is refused with the flag's name ("--dcp-size: expected an integer in
// 1 .. 1024, got '99999999999999999999'"), never clamped. Every numeric flag of every command
// carries one of them (checked by tests/unit/test_cli_flags.cpp through kStrictNumber).
//
//   cmd->add_option("--dcp-size", o.dcp_size, "N")->check(int_in(1, kMaxRanks));
//   cmd->add_option("--seed", o.seed, "seed")->check(seed_value());
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "gpu/comm/communicator.hpp"
#include "properties/dcp_setup.hpp"

namespace dcp::tools {

// The documented ranges (docs/cli.md, "Limits and caps"); memory is checked separately, from the
// whole configuration (harness/budget.hpp). The setup's own are properties/dcp_setup.hpp's:
// --dcp-size and --tp-size, --interleave, --seq and --window, and --tokens, --heads, --kv-heads,
// --head-dim, --v-dim.
using props::kMaxBatch;  // --batch: requests of one step
using props::kMaxExtent;
using props::kMaxInterleave;
using props::kMaxRanks;
using props::kMaxSeq;
inline constexpr int64_t kMaxCases = 1000000;         // --cases of run, properties, mutants
inline constexpr int64_t kMaxIters = 100000;          // sweep -n and -w
inline constexpr int64_t kMaxTimeoutSeconds = 86400;  // --timeout: a day

// The name every strict validator carries, so a test can find a numeric flag without one.
inline constexpr const char* kStrictNumber = "strict-number";

// An integer in [lo, hi], written in decimal (an optional '-', digits; nothing else).
CLI::Validator int_in(int64_t lo, int64_t hi);

// A finite number in [lo, hi] (lo_open: lo itself excluded).
CLI::Validator real_in(double lo, double hi, bool lo_open = false);

// A seed: an integer in [0, 2^64).
CLI::Validator seed_value();

// The name of the check every on/off flag carries (tests/unit/test_cli_flags.cpp looks for it).
inline constexpr const char* kStrictSwitch = "strict-switch";

// An on/off flag (--quiet, --sink, ...): given alone it is on; --flag=VALUE takes true/false,
// 1/0, on/off or yes/no (any case) and nothing else ("--quiet=2x" is refused, not read as on).
CLI::Option* add_switch(CLI::App* cmd, const std::string& name, bool& on,
                        const std::string& description);

// --timeout's default: the collective deadline of gpu/comm/communicator.hpp.
inline constexpr int64_t kDefaultTimeoutSeconds =
    std::chrono::duration_cast<std::chrono::seconds>(gpu::kDefaultCollectiveDeadline).count();

// Registers --timeout SECONDS: the longest a rank waits for its peers in a collective (run,
// sweep, properties, mutants).
void add_timeout_flag(CLI::App* cmd, int64_t& seconds);
// --bound sound|statistical: the tier of the derived bound that gates the exit code (reports show
// both; docs/tolerances.md section 10).
void add_bound_flag(CLI::App* cmd, std::string& bound);

// Registers --latent / --latent=false / --no-latent, set only when given (the preset decides
// otherwise): the same flag in run, sweep and model.
void add_latent_flag(CLI::App* cmd, std::optional<bool>& latent);

// The libraries name what they refuse by field ("DcpConfig.tp_size 6 is not a multiple of
// DcpLayout.ranks 4"); the command line speaks of the flags that set those fields. These are
// the pairs, in one place: props::validate_setup is handed kFlagNames, and in_flag_terms
// rewrites every library message before a command prints it (refuse, a row's report).
inline constexpr props::SetupNames kFlagNames{
    "--tokens",      "--heads",      "--kv-heads", "--head-dim", "--v-dim",
    "--seq",         "--window",     "--softcap",  "--topk",     "--tp-size",
    "--dcp-size",    "--interleave", "--tile",     "--splits",   "the chunk writes",
    "--merge-dtype", "--page-size",  "--kv-scale", "--batch",    "--shared-prefix",
    "--retired"};
std::string in_flag_terms(std::string message);

}  // namespace dcp::tools
