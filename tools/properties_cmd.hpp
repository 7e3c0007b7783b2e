// properties_cmd.hpp — `dcp-verify properties`: the property suite on a chosen backend.
//
// Replays the pinned counterexamples, then runs every property of properties/suite.hpp with
// RapidCheck for --cases cases from --seed (random when not given, and always printed), one row
// each: cases run, result, shrink steps of a failure, time. A failure prints its shrunk
// counterexample and the line that replays exactly that property from the same seed.
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify properties` and its flags.
Command add_properties_command(CLI::App& app);

// Registers `dcp-verify cases`: the DCP property's random cases written to files.
Command add_cases_command(CLI::App& app);

}  // namespace dcp::tools
