#include "gpu/cuda/comm_nccl_mpi.hpp"

#include <cstring>
#include <memory>
#include <span>

#include "gpu/cuda/comm_nccl.hpp"
#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/dcp_step_cuda.hpp"

namespace dcp::gpu {
namespace {

// The longest reason for a failed id the group's rank 0 sends along.
constexpr size_t kMaxWhy = 512;

// Rank 0 of the group (world ranks first .. first + n - 1) creates the id and sends it to the
// others, with whether it succeeded, so a failure there is an error everywhere, not a hang.
Result<ncclUniqueId> shared_unique_id(int64_t first, int64_t n, int64_t dcp_rank,
                                      std::chrono::milliseconds deadline) {
  struct Message {
    uint8_t ok = 1;
    ncclUniqueId id;
    char why[kMaxWhy + 1] = {};
  } m;
  std::memset(&m.id, 0, sizeof m.id);
  if (dcp_rank == 0) {
    Result<ncclUniqueId> made = NcclGroup::unique_id();
    if (made) {
      m.id = *made;
    } else {
      m.ok = 0;
      std::strncpy(m.why, made.status().message().c_str(), kMaxWhy);
    }
  }
  DCP_GPU_TRY(mpi_broadcast_bytes(first, n, 0, std::span(reinterpret_cast<uint8_t*>(&m), sizeof m),
                                  deadline));
  m.why[kMaxWhy] = '\0';
  if (!m.ok) return DCP_GPU_ERROR("nccl: the group's rank 0 could not create an id: ", m.why);
  return m.id;
}

}  // namespace

Result<MpiRun> run_dcp_nccl_mpi(const DcpInputs& in, const DcpConfig& cfg) {
  // The NCCL group outlives the step: it is released after the results are gathered, as
  // before any MPI_Finalize.
  std::unique_ptr<NcclGroup> group;
  return run_mpi_tp_rank(
      "run_dcp_nccl_mpi", in, cfg,
      [&](const DcpGeometry& geo, int64_t me) -> Result<RankStepOutput> {
        // The process's GPU: its rank among the processes of its node, modulo the devices it
        // sees.
        const MpiNode node = mpi_node();
        const Result<int> device = node_local_device(node.rank, node.size);
        if (!device)
          return DCP_GPU_ERROR("run_dcp_nccl_mpi: process ", me, " (node-local rank ", node.rank,
                               ") has no GPU of its own: ", device.status().message());
        DCP_GPU_ASSIGN(
            id, shared_unique_id(geo.group(me) * geo.n, geo.n, geo.dcp_rank(me), cfg.deadline));
        DCP_GPU_ASSIGN(g,
                       NcclGroup::create_rank(id, geo.n, geo.dcp_rank(me), *device, cfg.deadline));
        group = std::move(g);
        return cuda_run_tp_rank(group->comm(geo.dcp_rank(me)), in, cfg, me);
      });
}

}  // namespace dcp::gpu
