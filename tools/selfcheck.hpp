// selfcheck.hpp — dcp-verify's default job: the oracle checked against itself and its bounds.
//
// For a fixed, seeded set of cases covering every variant of the case model, one row each:
//   tiers   bits of agreement between the fast (double-double) and certify (MPFR) tiers
//   merge   bits of agreement between full attention and N random shards merged over a tree
//   fp32    max error / derived bound of an fp32 DCP model (ag_rs or a2a) against the oracle
// and a verdict. Exit status 0 when every row passes, 1 otherwise.
#pragma once

#include <cstdint>
#include <iosfwd>

#include "tools/command.hpp"

namespace dcp::tools {

struct SelfcheckOptions {
  uint64_t seed = 1;
  bool quiet = false;
};

int run_selfcheck(const SelfcheckOptions& opt, std::ostream& out);

// Registers `dcp-verify selfcheck` and its flags.
Command add_selfcheck_command(CLI::App& app);

}  // namespace dcp::tools
