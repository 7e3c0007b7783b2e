// comm_mpi.hpp — the DCP path over MPI: one TP rank per process (OpenMPI), built when MPI is
// found (CMake option DCP_MPI).
//
// MPI_COMM_WORLD is the attention TP group (world size = tp_size); it is split into tp / N DCP
// groups of N consecutive ranks, matching dcp_rank = tp_rank mod N. ReduceScatter is an
// All-to-All followed by a local sum in the configured order, so every transport reduces in the
// same order (communicator.hpp).
//
//   DCP_GPU_TRY(mpi_init(&argc, &argv));
//   Result<MpiRun> run = run_dcp_mpi(inputs, cfg);   // every process, same inputs
//   if (run->root) judge(run->group);                // world rank 0 holds the assembled result
//   mpi_finalize();
#pragma once

#include <cstdint>
#include <string>

#include "gpu/dcp_step.hpp"
#include "gpu/run_threads.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

GpuStatus mpi_init(int* argc, char*** argv);
void mpi_finalize();
// The MPI library's own version line (callable before mpi_init).
std::string mpi_library_version();
int64_t mpi_world_rank();
int64_t mpi_world_size();
// Ends every process of the job (a rank hit an error that its peers cannot see).
[[noreturn]] void mpi_abort(int code);

struct MpiRun {
  bool root = false;  // world rank 0: `group` holds the assembled output and all partials
  GroupRun group;
};

// Runs this process's TP rank (world rank) and gathers every rank's result on world rank 0.
Result<MpiRun> run_dcp_mpi(const DcpInputs& in, const DcpConfig& cfg);

// Gathers every process's step output (this one's: mine) on world rank 0, assembled by head;
// every process of the world calls it (any backend's ranks: the host path's and the CUDA
// backend's over NCCL).
Result<MpiRun> gather_on_root(const DcpInputs& in, const DcpConfig& cfg,
                              const RankStepOutput& mine);

}  // namespace dcp::gpu
