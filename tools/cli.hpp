// cli.hpp — the dcp-verify command line as a function: parse the arguments, run the chosen
// subcommand (run when none is named) within the limits, return the exit status.
//
// main() calls it with the machine's limits and catches, as a last resort, any exception that
// escapes (one line, exit 2); the command-line fuzzer calls it directly with tighter limits, so
// that an escaping exception is a finding there.
//
//   const char* argv[] = {"dcp-verify", "layout", "--dcp-size", "4"};
//   int code = run_cli(4, argv, harness::machine_limits());   // 0, 1, 2, 124 or 130 (command.hpp)
#pragma once

#include <vector>

#include "harness/budget.hpp"
#include "tools/command.hpp"

namespace dcp::tools {

int run_cli(int argc, const char* const* argv, const harness::Limits& limits);

// Registers every subcommand on `app` (run first: it is the default job).
std::vector<Command> add_commands(CLI::App& app);

}  // namespace dcp::tools
