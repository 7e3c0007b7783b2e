// property_runner.hpp — runs one suite property with RapidCheck from a given seed and case
// count, quietly, and reports what happened: the engine of `dcp-verify properties` and
// `dcp-verify mutants`.
//
//   silence_rapidcheck_banner();                        // once, before the first run
//   PropertyRun r = run_property(suite[0], 100, seed);  // r.result: OK, FAILED, ...
#pragma once

#include <cstdint>
#include <string>

#include "properties/suite.hpp"

namespace dcp::tools {

struct PropertyRun {
  std::string name, what;
  std::string result;    // OK, FAILED, INTERRUPTED (Ctrl-C), GAVE UP, ERROR
  int64_t cases = 0;     // cases run; for FAILED, up to and including the first failure
  int64_t shrinks = -1;  // FAILED: shrink steps to the counterexample
  // Cases drawn and set aside (discarded: the claim too coarse to judge them), not in `cases`.
  int64_t discarded = 0;
  double seconds = 0.0;
  std::string message;         // FAILED: the shrunk counterexample's report; else why it stopped
  std::string counterexample;  // FAILED: its shape in one line (props::current_case)
};

// RapidCheck announces its global configuration (RC_PARAMS) on stderr when first used; runs here
// pass their own seed and case count, so that line would only mislead.
void silence_rapidcheck_banner();

// Runs the property for `cases` cases from `seed`; Ctrl-C stops it between cases (INTERRUPTED).
// shrink false: a failure is reported as drawn (shrinks 0).
PropertyRun run_property(const props::SuiteProperty& p, int64_t cases, uint64_t seed,
                         bool shrink = true);

// The cases the running property has entered so far, the one in flight included (any thread
// may ask: a command's last words count them, plugin/plugin.hpp).
int64_t cases_entered();

}  // namespace dcp::tools
