// info_cmd.hpp — `dcp-verify info`: what this binary was built with and the devices it sees.
//
// Build: version, compiler, build type; backends (host always; CUDA only when built); the CUDA
// toolkit and architectures compiled for; MPI and its library; the oracle's MPFR. Runtime: the
// CUDA runtime's and driver's versions and every device, or why there is none. Exit 0.
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify info`.
Command add_info_command(CLI::App& app);

}  // namespace dcp::tools
