// probe_cmd.hpp — `dcp-verify probe [--impl FILE]`: measures an implementation's arithmetic with
// crafted cases and prints the claim to state for it (properties/probe.hpp).
//
//   dcp-verify probe --impl ./libmine.so            # a C plug-in (include/dcp_verify/impl.h)
//   dcp-verify probe --exp poly3 --p-cast bf16      # the production path in that arithmetic
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify probe` and its flags.
Command add_probe_command(CLI::App& app);

}  // namespace dcp::tools
