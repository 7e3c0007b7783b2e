// sweep_cmd.hpp — `dcp-verify sweep`: the DCP step over a range of context lengths, as
// nccl-tests sweeps message sizes (-b min, -e max, -f factor, -n iterations, -w warmup, -c check).
//
// For each S one row: the median wall time of a whole DCP step on the backend, the KV bytes the
// step reads and the bandwidth that implies, the same step on one rank (N = 1) and the speedup
// over it (a ratio within the run, never an absolute target), and, with -c 1, the worst error /
// bound over the output and every rank's partial against the oracle.
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify sweep` and its flags.
Command add_sweep_command(CLI::App& app);

}  // namespace dcp::tools
