// command.hpp — how a dcp-verify subcommand plugs into the command line.
//
// Each subcommand file registers its flags on the CLI11 app and returns the function that runs
// it once the arguments are parsed, within the process's limits (harness/budget.hpp); run_cli
// (cli.hpp) runs the chosen one. Exit status is the same for every subcommand: 0 success, 1 a
// check failed, 2 bad input or usage (one line on stderr), 124 a collective timed out, 130
// interrupted (the summary so far is printed).
//
//   Command c = add_layout_command(app);   // registers `dcp-verify layout` and its flags
//   ... app.parse(argc, argv) ...
//   if (*c.app) return c.run(limits);
#pragma once

#include <functional>

#include "harness/budget.hpp"
#include "harness/exit_status.hpp"

// CLI11 is declared, not included: it is header-only and costs seconds in every file that
// includes it (tools/CMakeLists.txt), so only the files that register flags include it.
namespace CLI {
class App;
}  // namespace CLI

namespace dcp::tools {

using harness::kExitBadInput;
using harness::kExitFail;
using harness::kExitInterrupted;
using harness::kExitOk;
using harness::kExitTimeout;

struct Command {
  CLI::App* app = nullptr;                         // the subcommand, owned by the parent app
  std::function<int(const harness::Limits&)> run;  // runs it with the parsed flags; the exit status
};

}  // namespace dcp::tools
