// reference_cmd.hpp — `dcp-verify reference --case C --out R`: a case's exact attention.
//
// Writes o F64 [T, Hq, Dv] and lse F64 [T, Hq] (in the case's LSE base) computed by the oracle
// in the fast (double-double) or certify (MPFR, 266 bits) tier; docs/format.md.
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify reference` and its flags.
Command add_reference_command(CLI::App& app);

}  // namespace dcp::tools
