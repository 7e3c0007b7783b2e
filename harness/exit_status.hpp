// exit_status.hpp — how a judgement ends, as every surface reports it: the command line's exit
// status, the MPI job's agreed code, the Python package's mapping of them (dcp_verify raises
// ValueError on kExitBadInput, TimeoutError on kExitTimeout).
#pragma once

namespace dcp::harness {

constexpr int kExitOk = 0;
constexpr int kExitFail = 1;
constexpr int kExitBadInput = 2;
// A collective did not complete within --timeout: a rank stopped, died or hung (the message
// names it). 124, as timeout(1) reports a command that ran out of time.
constexpr int kExitTimeout = 124;
constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

}  // namespace dcp::harness
