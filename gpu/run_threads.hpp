// run_threads.hpp — the whole attention TP group in one process: every TP rank a thread, every
// DCP group an in-process communicator (comm_threads.hpp).
//
// The result is assembled as the model sees it: O [T, Hq, Dv] and LSE [T, Hq] by global head,
// each head written by the TP rank that owns it; every rank's partial is kept for inspection.
//
//   Result<GroupRun> run = run_dcp_threads(inputs, cfg);
//   run->o, run->lse, run->partial_o[tp_rank] ([T, Hg, Dv])
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "gpu/comm/rendezvous.hpp"
#include "gpu/dcp_step.hpp"

namespace dcp::gpu {

struct GroupRun {
  std::vector<float> o;                         // [T, Hq, Dv]
  std::vector<float> lse;                       // [T, Hq], base cfg.base
  std::vector<std::vector<float>> partial_o;    // [tp][T, Hg, Dv]
  std::vector<std::vector<float>> partial_lse;  // [tp][T, Hg]
};

// Runs body(tp_rank) for every TP rank of the geometry on its own thread; groups[g] is DCP group
// g's. A rank whose body fails aborts its group (peers waiting in a collective are released);
// the failure of the lowest TP rank that failed on its own is returned, so the error does not
// depend on which thread happened to fail first. Any transport whose ranks are threads of this
// process uses it (the threads communicator here, the single-GPU and NCCL ones in gpu/cuda/).
GpuStatus run_rank_threads(const DcpGeometry& geo, const std::vector<RankGroup*>& groups,
                           const std::function<GpuStatus(int64_t)>& body);

// run_rank_threads with each rank given its DCP group's in-process communicator, whose waits end
// at `deadline`.
GpuStatus for_each_tp_rank_threads(const DcpGeometry& geo, std::chrono::milliseconds deadline,
                                   const std::function<GpuStatus(int64_t, Communicator&)>& body);

// The model-wide output and per-rank partial slots for a run of the geometry, zero-filled.
GroupRun empty_group_run(const DcpGeometry& geo, const AttentionDims& d);

// Places one rank's output heads into the model-wide O and LSE.
void place_rank_output(const DcpGeometry& geo, const AttentionDims& d, int64_t tp_rank,
                       const RankStepOutput& r, GroupRun& run);

// One TP rank's step given its DCP-group communicator: the host device's (run_tp_rank) unless a
// caller supplies another (a test seam: a device with a planted bug, say).
using RankStep = std::function<Result<RankStepOutput>(Communicator&, const DcpInputs&,
                                                      const DcpConfig&, int64_t tp_rank)>;

// The whole TP group on threads, each rank running `step` (nullptr: run_tp_rank).
Result<GroupRun> run_dcp_threads(const DcpInputs& in, const DcpConfig& cfg,
                                 const RankStep& step = nullptr);

}  // namespace dcp::gpu
