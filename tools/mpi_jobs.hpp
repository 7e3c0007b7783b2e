// mpi_jobs.hpp — what the commands share when mpirun starts them as one job (`run --comm mpi`,
// `reference` and `check` under mpirun -np P): that every process was given the same flags and
// files, agreements that end every process together (one refusing its input ends them all, naming
// it), and waits that honour Ctrl-C and a deadline, so that no process waits forever.
//
//   if (const auto why = inputs_differ("check", deadline)) return refuse("check", *why, err);
//   const gpu::MpiVerdict v = job_agree("check", code, why, deadline);  // the same on every
//   process wait_polling(&req, {"check", "# check: INTERRUPTED (process 1); nothing judged\n",
//   deadline});
#pragma once

#include <chrono>
#include <optional>
#include <string>

#ifdef DCP_HAVE_MPI
#include <mpi.h>

#include "gpu/comm/comm_mpi.hpp"
#endif

namespace dcp::tools {

// The slowest rate at which a process judges (multiply-adds of the footprint per second): the
// fast tier and the host path together run at about 7e7 per second on one core of this project's
// 2-core machine (a 100000-key case of 5e8 in 7 s); a tenth of that leaves room for a slower or
// busier machine. A process waiting for peers that still judge allows for that long.
inline constexpr double kSlowestJudgeRate = 7e6;

// The time a peer may take for `work` multiply-adds at kSlowestJudgeRate.
std::chrono::milliseconds judging_time(double work);

#ifdef DCP_HAVE_MPI
// How a job's wait ends when it does not complete: Ctrl-C on this process prints
// `interrupted_line` on stdout and ends the whole job (kExitInterrupted); past `deadline` (zero:
// none) one line on stderr names the command, this process and what it waited for, and the whole
// job ends (kExitTimeout): a peer stopped, died or hangs.
struct JobWait {
  std::string command;           // "check", for the lines
  std::string interrupted_line;  // "# check: INTERRUPTED (process 1); nothing judged\n"
  std::chrono::milliseconds deadline{0};
  std::string what = "its peers";  // what the wait was for, in the timeout's line
};

// Waits for a non-blocking MPI operation, polling every millisecond, ending as JobWait says.
void wait_polling(MPI_Request* req, const JobWait& w);

// Every process's `code` (kExitOk when its share went through), reduced to the worst (largest)
// of the job's, so that all go on or all stop together; the wait ends as `w` says.
int job_code(int code, const JobWait& w);

// Every process's code (kExitOk when its share went through) and one-line message: every process
// returns the same verdict, the first non-zero code's with its process and message (code 0: all
// went through). A peer that does not take part within `deadline` ends the job here
// (kExitTimeout, one line naming the command and the processes that did not arrive).
gpu::MpiVerdict job_agree(const std::string& command, int code, const std::string& message,
                          std::chrono::milliseconds deadline);

// Under mpirun, before anything else the processes do together: whether every process was given
// the same flags (the command line's canonical form, set_job_inputs) and the same input files
// (their size and content; files over 64 MiB by their size and three sampled MiB). The first
// difference, named, the same on every process ("--seed: process 1 was given 2, process 0 was
// given 1"); nullopt when they agree. Collective, within `deadline` (else the job ends, as
// job_agree).
std::optional<std::string> inputs_differ(const std::string& command,
                                         std::chrono::milliseconds deadline);
#endif

}  // namespace dcp::tools
