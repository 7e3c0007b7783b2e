// dcp-verify — the command line of the DCP verification suite (docs/cli.md).
//
//   dcp-verify                     the default job: run (the representative sweep)
//   dcp-verify run [flags]         the production DCP path against the oracle
//   dcp-verify check               an external implementation's result file against the oracle
//   dcp-verify sweep               the DCP step over context lengths: time, bandwidth, err/bound
//   dcp-verify properties          the property suite on a backend, with reproduce lines
//   dcp-verify mutants             the planted-bug catalogue against the properties (test builds)
//   dcp-verify layout              where a chunk's tokens live across a DCP group (checked)
//   dcp-verify model               the cost model: KV read vs communication, break-even S
//   dcp-verify info                what was compiled in, and the devices this machine has
//   dcp-verify selfcheck           oracle tiers, shard merge, derived bounds
//   dcp-verify reference           a case's exact attention
//
// Exit status: 0 success, 1 a check failed, 2 bad input or usage (one line on stderr),
// 130 interrupted (the summary so far is printed).
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "tools/check_cmd.hpp"
#include "tools/command.hpp"
#include "tools/info_cmd.hpp"
#include "tools/layout_cmd.hpp"
#include "tools/model_cmd.hpp"
#include "tools/mutants_cmd.hpp"
#include "tools/properties_cmd.hpp"
#include "tools/reference_cmd.hpp"
#include "tools/run_cmd.hpp"
#include "tools/selfcheck.hpp"
#include "tools/sweep_cmd.hpp"

int main(int argc, char** argv) {
  namespace t = dcp::tools;
  CLI::App app{"dcp-verify: reference and verification suite for Decode Context Parallelism"};
  app.set_version_flag("--version", std::string("dcp-verify ") + DCP_VERSION);
  app.require_subcommand(0, 1);
  // clang-format off
  const std::vector<t::Command> commands = {
      t::add_run_command(app),
      t::add_check_command(app),
      t::add_sweep_command(app),
      t::add_properties_command(app),
      t::add_mutants_command(app),
      t::add_layout_command(app),
      t::add_model_command(app),
      t::add_info_command(app),
      t::add_selfcheck_command(app),
      t::add_reference_command(app),
  };
  // clang-format on
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "dcp-verify: " << e.what() << " (see --help)\n";
    return t::kExitBadInput;
  }
  for (const t::Command& c : commands)
    if (*c.app) return c.run();
  return commands.front().run();  // no subcommand: the default job
}
