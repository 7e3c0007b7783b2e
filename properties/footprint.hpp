// footprint.hpp — what a check costs before it runs: its peak heap bytes and its work, from the
// shapes alone.
//
// Commands refuse, before allocating anything, a configuration whose footprint does not fit the
// machine (harness/budget.hpp). Each figure is an upper bound of what the code allocates, term by
// term (the terms are listed in footprint.cpp with the allocation each stands for), computed in
// doubles so that no product of flags can wrap: an absurd configuration gives a huge or infinite
// figure, never a small one. tests/footprint/test_footprint.cpp measures peak RSS against the
// bound. Work is counted in multiply-adds of the attention passes (q.k and p v, one per element)
// plus one per position step of the mask and layout loops.
//
//   Footprint f = dcp_check_footprint(setup);   // the case, every rank's step, the judgement
//   if (f.bytes > available) refuse(f.largest);  // "the oracle's copy of K and V", ...
#pragma once

#include <cstdint>
#include <string>

#include "oracle/attention.hpp"
#include "oracle/case.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_setup.hpp"

namespace dcp::props {

struct Footprint {
  double bytes = 0.0;   // peak heap bytes (an upper bound)
  double work = 0.0;    // multiply-adds and position steps
  std::string largest;  // what the largest memory term holds, for messages
};

// check_dcp on a setup (props::make_case of its spec with K and V held as `holding`, the
// backend's step on every TP rank, the oracle's judgement of the output and of every rank's
// partial).
Footprint dcp_check_footprint(const DcpSetup& s, KvHolding holding = KvHolding::doubles);

// The oracle judging `parts` results of a case already in memory at a tier (reference: parts =
// 1; a result file with partials: 1 + N).
Footprint judge_footprint(const oracle::Case& c, int64_t parts, oracle::Tier tier);

// Reading a safetensors file of `file_bytes`: mapped, and its tensors decoded to doubles (a
// result), or a case file whose K and V are read in place (oracle::kCaseReadOptions).
enum class FileRead { decoded, case_in_place };
Footprint file_footprint(double file_bytes, FileRead read = FileRead::decoded);

}  // namespace dcp::props
