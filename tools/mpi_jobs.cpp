#include "tools/mpi_jobs.hpp"

#ifdef DCP_HAVE_MPI
#include <chrono>
#include <iostream>
#include <thread>

#include "gpu/comm/comm_mpi.hpp"
#include "tools/command.hpp"
#include "tools/session.hpp"

namespace dcp::tools {

void wait_polling(MPI_Request* req, const std::string& interrupted_line) {
  int done = 0;
  while (MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
    if (interrupted()) {
      std::cout << interrupted_line << std::flush;
      gpu::mpi_abort(kExitInterrupted);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int job_code(int code, const std::string& interrupted_line) {
  int job = 0;
  MPI_Request req;
  MPI_Iallreduce(&code, &job, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
  wait_polling(&req, interrupted_line);
  return job;
}

}  // namespace dcp::tools
#endif
