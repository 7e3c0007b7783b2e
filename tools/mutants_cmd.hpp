// mutants_cmd.hpp — `dcp-verify mutants`: the mutation catalogue against the property suite.
//
// First the unmutated path runs every property (a failure there is a false alarm); then each
// mutant of mutants/catalogue.hpp planted in the step runs in turn (the host backend with that
// bug at its device seam, mutants/mutant_device.hpp) and the properties run until one fails. One
// row per mutant: killed or survived, the cases until the kill, the property that killed it, the
// shrink steps and the shrunk counterexample's shape. The last line reads
// "mutants: K/M killed, F false alarms"; exit 1 if a mutant survives or the unmutated path fails.
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify mutants` and its flags.
Command add_mutants_command(CLI::App& app);

}  // namespace dcp::tools
