// mpi_jobs.hpp — what the oracle's commands share when mpirun starts them as one job
// (`reference` and `check` under mpirun -np P): waits that honour Ctrl-C, and the job's verdict
// on whether every process got through its share.
//
//   MPI_Request req;
//   MPI_Igather(..., &req);
//   wait_polling(&req, "# check: INTERRUPTED (process 1); nothing judged\n");
//   const int job = job_code(my_code, "# check: ...");   // the worst code of any process
#pragma once

#ifdef DCP_HAVE_MPI
#include <mpi.h>

#include <string>

namespace dcp::tools {

// Waits for a non-blocking MPI operation, polling every millisecond. Ctrl-C on this process
// prints `interrupted_line` on stdout and ends the whole job with kExitInterrupted (its peers
// would otherwise wait for this process forever).
void wait_polling(MPI_Request* req, const std::string& interrupted_line);

// Every process's `code` (kExitOk when its share went through), reduced to the worst (largest)
// of the job's, so that all go on or all stop together.
int job_code(int code, const std::string& interrupted_line);

}  // namespace dcp::tools
#endif
