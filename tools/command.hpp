// command.hpp — how a dcp-verify subcommand plugs into the command line.
//
// Each subcommand file registers its flags on the CLI11 app and returns the function that runs
// it once the arguments are parsed; main() runs the chosen one. Exit status is the same for
// every subcommand: 0 success, 1 a check failed, 2 bad input or usage (one line on stderr),
// 130 interrupted (the summary so far is printed).
//
//   Command c = add_layout_command(app);   // registers `dcp-verify layout` and its flags
//   ... app.parse(argc, argv) ...
//   if (*c.app) return c.run();
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace dcp::tools {

constexpr int kExitOk = 0;
constexpr int kExitFail = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

// For --seed: CLI11 would read "-1" into an unsigned seed as 2^64 - 1.
inline const CLI::Validator kSeedValidator(
    [](const std::string& s) {
      return s.find_first_not_of("0123456789") == std::string::npos && !s.empty()
                 ? std::string()
                 : "expected a non-negative integer, got '" + s + "'";
    },
    "SEED");

struct Command {
  CLI::App* app = nullptr;   // the subcommand, owned by the parent app
  std::function<int()> run;  // runs it with the parsed flags; returns the exit status
};

}  // namespace dcp::tools
