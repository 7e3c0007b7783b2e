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
// Exit status: 0 success, 1 a check failed, 2 bad input or usage (one line on stderr), 124 a
// collective timed out, 130 interrupted (the summary so far is printed).
#include <exception>
#include <iostream>
#include <new>

#include "oracle/text.hpp"
#include "tools/cli.hpp"
#include "tools/command.hpp"
#include "tools/session.hpp"

int main(int argc, char** argv) {
  namespace t = dcp::tools;
  // Commands refuse up front what does not fit (harness/budget.hpp); these are the last resort, so
  // that nothing ends in terminate(), an abort or a core dump.
  t::install_file_fault_line();
  try {
    return t::stdout_written(t::run_cli(argc, argv, dcp::harness::machine_limits()));
  } catch (const std::bad_alloc&) {
    std::cerr << "dcp-verify: out of memory (the machine ran short of what the command's "
                 "estimate allowed for; close other work or make the case smaller)\n";
  } catch (const std::exception& e) {
    std::cerr << "dcp-verify: internal error: " << dcp::oracle::one_line(e.what()) << "\n";
  }
  return t::kExitBadInput;
}
