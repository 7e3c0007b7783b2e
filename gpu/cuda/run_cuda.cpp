#include "gpu/cuda/run_cuda.hpp"

#include <memory>
#include <vector>

#include "gpu/cuda/comm_nccl.hpp"
#include "gpu/cuda/comm_single_gpu.hpp"
#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/dcp_step_cuda.hpp"

namespace dcp::gpu {
namespace {

// Runs every TP rank on its thread with its group's device communicator.
template <class Group>
Result<GroupRun> run_groups(const DcpInputs& in, const DcpConfig& cfg, const DcpGeometry& geo,
                            std::vector<std::unique_ptr<Group>>& groups) {
  GroupRun run = empty_group_run(geo, in.dims);
  std::vector<RankGroup*> control;
  for (auto& g : groups) control.push_back(g.get());
  DCP_GPU_TRY(run_rank_threads(geo, control, [&](int64_t tp_rank) {
    DeviceCommunicator& comm =
        groups[static_cast<size_t>(geo.group(tp_rank))]->comm(geo.dcp_rank(tp_rank));
    Result<RankStepOutput> r = cuda_run_tp_rank(comm, in, cfg, tp_rank);
    if (!r) return r.status();
    place_rank_output(geo, in.dims, tp_rank, *r, run);  // disjoint heads and partial slots
    return GpuStatus();
  }));
  return run;
}

}  // namespace

Result<GroupRun> run_dcp_cuda(const DcpInputs& in, const DcpConfig& cfg, DeviceTransport transport,
                              int device) {
  DCP_GPU_TRY(validate_inputs(in, cfg));
  const DcpGeometry geo = *DcpGeometry::create(cfg, in.dims);
  const int64_t groups_n = geo.tp / geo.n;
  if (transport == DeviceTransport::single_gpu) {
    if (const auto why = no_device_reason(device + 1))
      return DCP_GPU_ERROR("DeviceTransport::single_gpu: ", *why);
    std::vector<std::unique_ptr<SingleGpuGroup>> groups;
    for (int64_t g = 0; g < groups_n; ++g) {
      Result<std::unique_ptr<SingleGpuGroup>> grp =
          SingleGpuGroup::create(geo.n, device, cfg.deadline);
      if (!grp) return grp.status();
      groups.push_back(std::move(*grp));
    }
    return run_groups(in, cfg, geo, groups);
  }
  if (const auto why = no_device_reason(geo.tp))
    return DCP_GPU_ERROR("DeviceTransport::nccl: one GPU per TP rank in one process: ", *why,
                         " (DeviceTransport::single_gpu runs N virtual ranks on one GPU)");
  std::vector<std::unique_ptr<NcclGroup>> groups;
  for (int64_t g = 0; g < groups_n; ++g) {
    std::vector<int> devices;
    for (int64_t r = 0; r < geo.n; ++r) devices.push_back(static_cast<int>(g * geo.n + r));
    Result<std::unique_ptr<NcclGroup>> grp = NcclGroup::create_all(devices, cfg.deadline);
    if (!grp) return grp.status();
    groups.push_back(std::move(*grp));
  }
  return run_groups(in, cfg, geo, groups);
}

}  // namespace dcp::gpu
