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
#include "tools/probe_cmd.hpp"
#include "tools/properties_cmd.hpp"
#include "tools/reference_cmd.hpp"
#include "tools/run_cmd.hpp"
#include "tools/selfcheck.hpp"
#include "tools/session.hpp"
#include "tools/sweep_cmd.hpp"

namespace dcp::tools {
namespace {

// The flags that name files a command reads: what the processes of an MPI job must agree on.
constexpr const char* kInputFileFlags[] = {"--case", "--result", "--impl", "--pinned"};

// The subcommand's flags as CLI11 writes them back (every flag given or with a default, one
// "name=value" line each) and the input files they name.
JobInputs job_inputs_of(const CLI::App& cmd) {
  JobInputs in;
  std::string line;
  for (const char c : cmd.config_to_str(true, false)) {
    if (c != '\n') {
      line += c;
    } else if (!line.empty()) {
      in.flags.push_back(line);
      line.clear();
    }
  }
  for (const char* flag : kInputFileFlags) {
    const CLI::Option* opt = cmd.get_option_no_throw(flag);
    if (opt != nullptr && opt->count() > 0) in.files.emplace_back(flag, opt->results().front());
  }
  return in;
}

}  // namespace

std::vector<Command> add_commands(CLI::App& app) {
  // clang-format off
  return {
      add_run_command(app),
      add_check_command(app),
      add_sweep_command(app),
      add_properties_command(app),
      add_probe_command(app),
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

int run_cli(int argc, const char* const* argv, const harness::Limits& limits) {
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
  const Command* chosen = &commands.front();  // no subcommand: the default job
  for (const Command& c : commands)
    if (*c.app) chosen = &c;
  set_job_inputs(job_inputs_of(*chosen->app));
  return chosen->run(limits);
}

}  // namespace dcp::tools
