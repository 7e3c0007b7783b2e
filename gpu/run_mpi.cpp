#include "gpu/run_mpi.hpp"

#include <cstring>
#include <memory>
#include <vector>

#include "gpu/host/host_device.hpp"

namespace dcp::gpu {
namespace {

// Every process's step output (this one's: mine) on world rank 0, assembled by head.
Result<MpiRun> gather_on_root(const DcpGeometry& geo, const AttentionDims& d,
                              const RankStepOutput& mine, std::chrono::milliseconds deadline) {
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  // Every rank's four tensors in one message: o, lse, partial_o, partial_lse (the same sizes on
  // every rank).
  const std::vector<const std::vector<float>*> parts = {&mine.o, &mine.lse, &mine.partial_o,
                                                        &mine.partial_lse};
  std::vector<float> packed;
  for (const std::vector<float>* x : parts) packed.insert(packed.end(), x->begin(), x->end());
  // Rank 0 waits twice as long here, and a sender (whose large message waits for rank 0 to take
  // it) three times: a rank held up by a stopped peer of its own group times out first, in its
  // group's collective, and names that peer rather than being named itself.
  DCP_GPU_ASSIGN(all,
                 mpi_gather_same_size(std::span(reinterpret_cast<const uint8_t*>(packed.data()),
                                                packed.size() * sizeof(float)),
                                      "gathering results on rank 0", 2 * deadline, 3 * deadline));
  MpiRun run;
  run.root = me == 0;
  run.group = empty_group_run(geo, d);
  if (!run.root) {  // this rank's own output and partial, in their places
    place_rank_output(geo, d, me, mine, run.group);
    return run;
  }
  for (int64_t tp_rank = 0; tp_rank < world; ++tp_rank) {
    const uint8_t* p = all[static_cast<size_t>(tp_rank)].data();
    RankStepOutput ro;
    std::vector<float>* const into[] = {&ro.o, &ro.lse, &ro.partial_o, &ro.partial_lse};
    for (size_t k = 0; k < parts.size(); ++k) {
      into[k]->resize(parts[k]->size());
      std::memcpy(into[k]->data(), p, parts[k]->size() * sizeof(float));
      p += parts[k]->size() * sizeof(float);
    }
    place_rank_output(geo, d, tp_rank, ro, run.group);
  }
  return run;
}

}  // namespace

Result<MpiRun> run_mpi_tp_rank(const char* who, const DcpInputs& in, const DcpConfig& cfg,
                               const MpiRankStep& step) {
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  // Every process checks the same inputs and configuration: these fail everywhere alike.
  if (world != cfg.tp_size)
    return DCP_GPU_ERROR(who, ": ", world, " processes but DcpConfig.tp_size is ", cfg.tp_size,
                         " (run with mpirun -np ", cfg.tp_size, ")");
  DCP_GPU_TRY(validate_inputs(in, cfg));
  const DcpGeometry geo = *DcpGeometry::create(cfg, in.dims);
  Result<RankStepOutput> r = step(geo, me);
  if (!r) {
    mpi_notify_failure(r.status().message());  // this rank's own failure is news to its peers
    return r.status();
  }
  Result<MpiRun> run = gather_on_root(geo, in.dims, *r, cfg.deadline);
  if (!run) mpi_notify_failure(run.status().message());
  return run;
}

Result<MpiRun> run_dcp_mpi(const DcpInputs& in, const DcpConfig& cfg) {
  return run_mpi_tp_rank("run_dcp_mpi", in, cfg,
                         [&](const DcpGeometry& geo, int64_t me) -> Result<RankStepOutput> {
                           const std::unique_ptr<Communicator> comm =
                               mpi_group(geo.group(me) * geo.n, geo.n, cfg.deadline);
                           return run_tp_rank(*comm, in, cfg, me);
                         });
}

}  // namespace dcp::gpu
