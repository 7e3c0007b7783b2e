#include "gpu/run_threads.hpp"

#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <thread>

#include "gpu/comm/comm_threads.hpp"
#include "gpu/host/host_device.hpp"

namespace dcp::gpu {

void place_rank_output(const DcpGeometry& geo, const AttentionDims& d, int64_t tp_rank,
                       const RankStepOutput& r, GroupRun& run) {
  const int64_t Hl = geo.h_loc, dv = d.v_dim, h0 = geo.local_head0(tp_rank);
  for (int64_t t = 0; t < d.tokens; ++t)
    for (int64_t hl = 0; hl < Hl; ++hl) {
      const int64_t src = t * Hl + hl, dst = t * d.q_heads + h0 + hl;
      std::copy_n(&r.o[static_cast<size_t>(src * dv)], dv, &run.o[static_cast<size_t>(dst * dv)]);
      run.lse[static_cast<size_t>(dst)] = r.lse[static_cast<size_t>(src)];
    }
  run.partial_o[static_cast<size_t>(tp_rank)] = r.partial_o;
  run.partial_lse[static_cast<size_t>(tp_rank)] = r.partial_lse;
}

GpuStatus run_rank_threads(const DcpGeometry& geo, const std::vector<RankGroup*>& groups,
                           const std::function<GpuStatus(int64_t)>& body) {
  std::vector<GpuStatus> status(static_cast<size_t>(geo.tp));
  auto fail = [&](int64_t tp_rank, GpuStatus st) {
    groups[static_cast<size_t>(geo.group(tp_rank))]->abort("tp rank " + std::to_string(tp_rank) +
                                                           ": " + st.message());
    status[static_cast<size_t>(tp_rank)] = std::move(st);
  };
  std::vector<std::thread> threads;
  for (int64_t tp_rank = 0; tp_rank < geo.tp; ++tp_rank) {
    try {
      threads.emplace_back([&, tp_rank] {
        // An exception (std::bad_alloc in a rank's buffers) must not end the process from a
        // thread: it fails the rank like any error.
        GpuStatus st;
        try {
          st = body(tp_rank);
        } catch (const std::bad_alloc&) {
          st = DCP_GPU_ERROR("out of memory in the rank's step");
        } catch (const std::exception& e) {
          st = DCP_GPU_ERROR("the rank's step threw: ", e.what());
        }
        if (!st) fail(tp_rank, std::move(st));
      });
    } catch (const std::system_error& e) {
      // No thread for this rank: the ranks already started must not wait for it, nor for the
      // ranks after it, so every group is stopped.
      const GpuStatus st =
          DCP_GPU_ERROR("cannot start a thread for tp rank ", tp_rank, ": ", e.what());
      for (RankGroup* g : groups) g->abort(st.message());
      for (std::thread& t : threads) t.join();
      return st;
    }
  }
  for (std::thread& t : threads) t.join();
  int64_t origin = -1;
  for (int64_t r = 0; r < geo.tp; ++r) {
    const bool own = !groups[static_cast<size_t>(geo.group(r))]->released(geo.dcp_rank(r));
    if (!status[static_cast<size_t>(r)] && (own || origin < 0)) {
      if (own) return status[static_cast<size_t>(r)];
      origin = r;
    }
  }
  return origin >= 0 ? status[static_cast<size_t>(origin)] : GpuStatus();
}

GpuStatus for_each_tp_rank_threads(const DcpGeometry& geo, std::chrono::milliseconds deadline,
                                   const std::function<GpuStatus(int64_t, Communicator&)>& body) {
  std::vector<std::unique_ptr<ThreadGroup>> groups;
  std::vector<RankGroup*> control;
  for (int64_t g = 0; g < geo.tp / geo.n; ++g) {
    groups.push_back(std::make_unique<ThreadGroup>(geo.n, deadline));
    control.push_back(groups.back().get());
  }
  return run_rank_threads(geo, control, [&](int64_t tp_rank) {
    return body(tp_rank,
                groups[static_cast<size_t>(geo.group(tp_rank))]->comm(geo.dcp_rank(tp_rank)));
  });
}

GroupRun empty_group_run(const DcpGeometry& geo, const AttentionDims& d) {
  GroupRun run;
  run.o.assign(static_cast<size_t>(d.tokens * d.q_heads * d.v_dim), 0.0f);
  run.lse.assign(static_cast<size_t>(d.tokens * d.q_heads), 0.0f);
  run.partial_o.resize(static_cast<size_t>(geo.tp));
  run.partial_lse.resize(static_cast<size_t>(geo.tp));
  return run;
}

Result<GroupRun> run_dcp_threads(const DcpInputs& in, const DcpConfig& cfg, const RankStep& step) {
  DCP_GPU_TRY(validate_inputs(in, cfg));
  const DcpGeometry geo = *DcpGeometry::create(cfg, in.dims);
  const AttentionDims& d = in.dims;
  GroupRun run = empty_group_run(geo, d);
  DCP_GPU_TRY(for_each_tp_rank_threads(geo, cfg.deadline, [&](int64_t tp_rank, Communicator& comm) {
    Result<RankStepOutput> r =
        step ? step(comm, in, cfg, tp_rank) : run_tp_rank(comm, in, cfg, tp_rank);
    if (!r) return r.status();
    place_rank_output(geo, d, tp_rank, *r, run);  // disjoint heads and partial slots
    return GpuStatus();
  }));
  return run;
}

}  // namespace dcp::gpu
