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
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  if (world != cfg.tp_size)
    return DCP_GPU_ERROR("run_dcp_nccl_mpi: ", world, " processes but DcpConfig.tp_size is ",
                         cfg.tp_size, " (run with mpirun -np ", cfg.tp_size, ")");
  DCP_GPU_TRY(validate_inputs(in, cfg));
  const DcpGeometry geo = *DcpGeometry::create(cfg, in.dims);
  auto fail = [](const GpuStatus& st) {
    mpi_notify_failure(st.message());
    return st;
  };
  // The process's GPU: its rank among the processes of its node, modulo the devices it sees.
  const MpiNode node = mpi_node();
  const Result<int> device = node_local_device(node.rank, node.size);
  if (!device)
    return fail(DCP_GPU_ERROR("run_dcp_nccl_mpi: process ", me, " (node-local rank ", node.rank,
                              ") has no GPU of its own: ", device.status().message()));
  const int local = *device;
  Result<ncclUniqueId> id =
      shared_unique_id(geo.group(me) * geo.n, geo.n, geo.dcp_rank(me), cfg.deadline);
  if (!id) return fail(id.status());
  Result<std::unique_ptr<NcclGroup>> g =
      NcclGroup::create_rank(*id, geo.n, geo.dcp_rank(me), local, cfg.deadline);
  if (!g) return fail(g.status());
  Result<RankStepOutput> r = cuda_run_tp_rank((*g)->comm(geo.dcp_rank(me)), in, cfg, me);
  if (!r) return fail(r.status());
  Result<MpiRun> run = gather_on_root(in, cfg, *r);
  if (!run) return fail(run.status());
  return run;
}

}  // namespace dcp::gpu
