#include "tools/cli.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "oracle/text.hpp"
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

namespace dcp::tools {

std::vector<Command> add_commands(CLI::App& app) {
  // clang-format off
  return {
      add_run_command(app),
      add_check_command(app),
      add_sweep_command(app),
      add_properties_command(app),
      add_cases_command(app),
      add_mutants_command(app),
      add_layout_command(app),
      add_model_command(app),
      add_info_command(app),
      add_selfcheck_command(app),
      add_reference_command(app),
  };
  // clang-format on
}

int run_cli(int argc, const char* const* argv, const Limits& limits) {
  CLI::App app{"dcp-verify: reference and verification suite for Decode Context Parallelism"};
  app.set_version_flag("--version", std::string("dcp-verify ") + DCP_VERSION);
  app.require_subcommand(0, 1);
  const std::vector<Command> commands = add_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes the arguments it did not expect as given: made one line here.
    std::cerr << "dcp-verify: " << oracle::printable(e.what()) << " (see --help)\n";
    return kExitBadInput;
  }
  for (const Command& c : commands)
    if (*c.app) return c.run(limits);
  return commands.front().run(limits);  // no subcommand: the default job
}

}  // namespace dcp::tools
