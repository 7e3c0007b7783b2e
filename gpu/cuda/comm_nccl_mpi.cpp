#include "gpu/cuda/comm_nccl_mpi.hpp"

#include <mpi.h>

#include <cstring>
#include <memory>

#include "gpu/cuda/comm_nccl.hpp"
#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/dcp_step_cuda.hpp"

namespace dcp::gpu {
namespace {

GpuStatus mpi_ok(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return {};
  return DCP_GPU_ERROR(call, " failed with MPI error ", rc);
}

// This process's rank among the processes of its node (its GPU index).
Result<int> node_local_rank() {
  MPI_Comm node;
  DCP_GPU_TRY(
      mpi_ok(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
             "MPI_Comm_split_type"));
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  return local;
}

// Rank 0 of the group creates the id and sends it to the others (with whether it succeeded, so
// a failure there is an error everywhere, not a hang).
Result<ncclUniqueId> shared_unique_id(MPI_Comm group, int64_t dcp_rank) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  int ok = 1;
  std::string why;
  if (dcp_rank == 0) {
    Result<ncclUniqueId> made = NcclGroup::unique_id();
    if (made)
      id = *made;
    else {
      ok = 0;
      why = made.status().message();
    }
  }
  DCP_GPU_TRY(mpi_ok(MPI_Bcast(&ok, 1, MPI_INT, 0, group), "MPI_Bcast"));
  if (!ok)
    return DCP_GPU_ERROR("nccl: the group's rank 0 could not create an id",
                         why.empty() ? "" : ": " + why);
  DCP_GPU_TRY(mpi_ok(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group), "MPI_Bcast"));
  return id;
}

}  // namespace

Result<MpiRun> run_dcp_nccl_mpi(const DcpInputs& in, const DcpConfig& cfg) {
  DCP_GPU_TRY(validate_inputs(in, cfg));
  const DcpGeometry geo = *DcpGeometry::create(cfg, in.dims);
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  if (world != cfg.tp_size)
    return DCP_GPU_ERROR("--comm nccl under mpirun: ", world, " processes but --tp-size is ",
                         cfg.tp_size, " (run with mpirun -np ", cfg.tp_size, ")");
  Result<int> local = node_local_rank();
  if (!local) return local.status();
  if (const auto why = no_device_reason(*local + 1))
    return DCP_GPU_ERROR("--comm nccl: process ", me, " (node-local rank ", *local,
                         ") has no GPU of its own: ", *why);
  MPI_Comm group;
  DCP_GPU_TRY(mpi_ok(MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(geo.group(me)),
                                    static_cast<int>(geo.dcp_rank(me)), &group),
                     "MPI_Comm_split"));
  Result<ncclUniqueId> id = shared_unique_id(group, geo.dcp_rank(me));
  MPI_Comm_free(&group);
  if (!id) return id.status();
  Result<std::unique_ptr<NcclGroup>> g =
      NcclGroup::create_rank(*id, geo.n, geo.dcp_rank(me), *local);
  if (!g) return g.status();
  Result<RankStepOutput> r = cuda_run_tp_rank((*g)->comm(geo.dcp_rank(me)), in, cfg, me);
  if (!r) return r.status();
  return gather_on_root(in, cfg, *r);
}

}  // namespace dcp::gpu
