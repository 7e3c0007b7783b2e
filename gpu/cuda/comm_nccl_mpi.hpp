// comm_nccl_mpi.hpp — the CUDA backend with one TP rank per process over NCCL, launched by
// mpirun (built when both MPI and CUDA are found).
//
// MPI_COMM_WORLD is the attention TP group (world size = tp_size), split into DCP groups as in
// comm_mpi.hpp and run by run_mpi_tp_rank (run_mpi.hpp). Each process takes the GPU of its
// node-local rank; each group's rank 0 creates the ncclUniqueId and broadcasts it over the group's
// MPI communicator, so the group forms across nodes; results are gathered on world rank 0 for
// judging.
//
//   mpirun -np 8 dcp-verify run --backend cuda --comm nccl ...
//   Result<MpiRun> run = run_dcp_nccl_mpi(inputs, cfg);   // every process, same inputs
#pragma once

#include "gpu/dcp_step.hpp"
#include "gpu/run_mpi.hpp"

namespace dcp::gpu {

Result<MpiRun> run_dcp_nccl_mpi(const DcpInputs& in, const DcpConfig& cfg);

}  // namespace dcp::gpu
