// run_mpi.hpp — the attention TP group as one process per TP rank under mpirun: each process runs
// its own rank's step over its DCP group's MPI communicator (comm_mpi.hpp), and every rank's
// result is gathered on world rank 0, assembled as run_threads.hpp assembles it.
//
//   DCP_GPU_TRY(mpi_init(&argc, &argv));
//   Result<MpiRun> run = run_dcp_mpi(inputs, cfg);    // every process, same inputs
//   judge(run->group);                // rank 0 holds the assembled result, the others their own
#pragma once

#include <functional>

#include "gpu/comm/comm_mpi.hpp"
#include "gpu/dcp_step.hpp"
#include "gpu/run_threads.hpp"

namespace dcp::gpu {

struct MpiRun {
  // World rank 0: `group` holds the assembled output and every rank's partial. Another rank:
  // its own heads of the output and its own partial, in their places; the rest zero.
  bool root = false;
  GroupRun group;
};

// This process's TP rank (its world rank) given its step: `step(geo, tp_rank)` runs it over
// whatever transport it builds. Checks that the world size is cfg.tp_size and the inputs (every
// process alike), tells every other rank of a failure of its own (mpi_notify_failure), and
// gathers every rank's output on world rank 0. `who` names the runner in its errors.
using MpiRankStep = std::function<Result<RankStepOutput>(const DcpGeometry&, int64_t tp_rank)>;
Result<MpiRun> run_mpi_tp_rank(const char* who, const DcpInputs& in, const DcpConfig& cfg,
                               const MpiRankStep& step);

// The host device's step (run_tp_rank) over MPI (mpi_group).
Result<MpiRun> run_dcp_mpi(const DcpInputs& in, const DcpConfig& cfg);

}  // namespace dcp::gpu
