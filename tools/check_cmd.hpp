// check_cmd.hpp — `dcp-verify check --case C --result R`: judges an external implementation.
//
// Loads a case and a result file dumped by any kernel (docs/format.md, "Result file"), derives
// the bound for the arithmetic the result claims, and compares the output with the oracle's full
// attention and, when partials are given, each rank's partial with the oracle on that rank's
// shard. Prints one row per part and tensor, the worst element (t, h, d) with its error and
// bound, and names the ranks whose partials are wrong. Exit 0 within bound, 1 a violation,
// 2 bad input.
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify check` and its flags.
Command add_check_command(CLI::App& app);

}  // namespace dcp::tools
