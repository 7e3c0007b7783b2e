// draws.hpp — what the property suite draws for an implementation (its ranges: largest N, S, Dk,
// ..., the only N, Dk, Dv drawn, features it lacks, formats and LSE bases), read and checked in
// one place for `dcp-verify properties` and `cases`, and the suite's cases written to files.
// (dcp_verify.cases reaches write_cases through `dcp-verify cases`: the generators bring
// RapidCheck, whose Debian build cannot be linked into the extension module.)
//
//   DrawRanges r;  r.head_dims = {64, 128};  r.without = {"sink"};
//   Expected<Draws> d = read_draws(r);       // d->limits for the generators, d->flags to reproduce
//   DCP_TRY(write_cases(*d, {.seed = 1, .count = 10, .folder = "cases"}, machine_limits()));
//
// Refusals name the command line's flags (--max-dcp, --head-dims, ...); Python says them in its
// keywords.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/budget.hpp"
#include "oracle/status.hpp"
#include "properties/dcp_setup.hpp"

namespace dcp::harness {

// The ranges as given. A maximum not given keeps DcpLimits' default; a list of N, Dk or Dv (the
// only values drawn) sets the maximum to its largest, which a maximum given beside it must not be
// below.
struct DrawRanges {
  std::optional<int64_t> max_dcp, max_groups, max_seq, max_head_dim, max_v_dim;
  std::vector<int64_t> dcp_sizes, head_dims, v_dims;
  std::vector<std::string> without;    // features never drawn (props::kFeatures' names)
  std::vector<std::string> q_dtypes;   // f32, bf16, f16 (default all)
  std::vector<std::string> kv_dtypes;  // the production K/V formats (default all)
  std::vector<std::string> lse_bases;  // e, 2 (default both)
};

struct Draws {
  props::DcpLimits limits;
  std::string flags;  // the ranges that narrowed the draws, as flags (" --max-seq 500 ..."), or ""
};

oracle::Expected<Draws> read_draws(const DrawRanges& r);

// Why the draws cannot run here: the largest case they draw must fit in memory (said of the
// ranges given, or of the default ranges), and `cases` of them within the work limit (said of
// `count_flag`).
std::optional<std::string> draws_over_limits(const Draws& d, double cases,
                                             const std::string& count_flag, const Limits& lim);

// The suite's cases, count of them from seed, as the DCP-path property draws them (dcp-fp8's when
// the K/V formats are only quantized ones), growing from RapidCheck's size 0 to its largest as in
// a property run: FOLDER/case-NNNN.safetensors, each with its setup as JSON in the metadata
// (x_setup). Refused, before anything is written: a folder that is missing, a file already there,
// cases that do not fit `lim`.
struct CasesParams {
  uint64_t seed = 0;
  int64_t count = 10;  // 1 .. kMaxWrittenCases
  std::string folder;
};
inline constexpr int64_t kMaxWrittenCases = 10000;  // a folder of cases, each a few KB to MB
oracle::Status write_cases(const Draws& d, const CasesParams& p, const Limits& lim);

}  // namespace dcp::harness
