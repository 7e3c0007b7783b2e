// backends.hpp — which production-path backend and communicator a command runs, from its
// --backend and --comm flags, and whether this binary has them: one table of pairs
// (backends.cpp, kTransports) answers every question about a pair.
//
//   host  + threads      every rank a thread of this process (run_threads.hpp)
//   host  + mpi          one rank per process under mpirun (run_mpi.hpp)
//   cuda  + single-gpu   N virtual ranks per DCP group on GPU 0 (gpu/cuda/comm_single_gpu.hpp)
//   cuda  + nccl         one GPU per TP rank: one process driving them all, or one process per
//                        GPU under mpirun (gpu/cuda/comm_nccl.hpp, comm_nccl_mpi.hpp)
//
//   oracle::Expected<props::DcpBackend> b = open_backend(o.backend, o.comm, deadline);
//   if (!b) { err << "dcp-verify run: " << b.status().message(); return kExitBadInput; }
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gpu/run_mpi.hpp"
#include "gpu/run_threads.hpp"
#include "properties/dcp_bridge.hpp"

namespace dcp::tools {

// An error line when the pair is unknown, inconsistent, or not built into this binary.
std::optional<std::string> unavailable(const std::string& backend, const std::string& comm);

// The pair's --comm when none is given: threads for host, single-gpu for cuda ("" if unknown).
std::string default_comm(const std::string& backend);

// Whether the pair runs one rank per process (host + mpi; cuda + nccl when mpirun started this
// process), which run_cmd drives, and what each process then runs (nothing when it is not built).
bool one_rank_per_process(const std::string& backend, const std::string& comm);
using MpiStep = gpu::Result<gpu::MpiRun> (*)(const gpu::DcpInputs&, const gpu::DcpConfig&);
std::optional<MpiStep> mpi_step(const std::string& backend, const std::string& comm);

// For --backend cuda: why no GPU can be used here ("no CUDA device: cudaErrorNoDevice: ..."),
// or nothing when one can (and always nothing for the host backend).
std::optional<std::string> no_device(const std::string& backend);

// The in-process backend for the pair, its collectives waiting at most `deadline` for a peer
// (whatever the configuration it is given says), or the one-line reason it cannot run here:
// unknown, not built, or no device. Not for the one-rank-per-process pairs (host + mpi, cuda +
// nccl under mpirun), which run_cmd drives; for those it checks only that they are built.
oracle::Expected<props::DcpBackend> open_backend(const std::string& backend,
                                                 const std::string& comm,
                                                 std::chrono::milliseconds deadline);

// open_backend for the backend's default communicator (inside one process: threads for the host,
// every DCP group's ranks virtual on GPU 0, single-gpu, for cuda). properties and sweep run it.
oracle::Expected<props::DcpBackend> open_in_process_backend(const std::string& backend,
                                                            std::chrono::milliseconds deadline);

// The host backend on threads, each rank running `step` (nullptr: the production step; the
// mutation catalogue passes a step with a planted bug).
props::DcpBackend host_threads_backend(std::chrono::milliseconds deadline,
                                       gpu::RankStep step = nullptr);

// Whether this process was started by mpirun (OpenMPI, MPICH or PMIx variables are set), so
// that --comm nccl runs one rank per process.
bool launched_by_mpirun();

// The backends of --impl FILE: the C plug-in (include/dcp_verify/impl.h) loaded, its partial and
// combine levels run on the host device's threads, its step level called whole, each judged by its
// claim (plugin/plugin.hpp); the only pair it runs with is host + threads.
struct ImplBackends {
  std::optional<props::DcpBackend> levels;  // partial and/or combine, where it provides them
  std::optional<props::DcpBackend> step;    // the step level, where it provides it
  std::string label;                        // "NAME (FILE, LEVELS)" for a report's header
  bool merges = false;                      // it merges partials itself: a combine or step level
  bool attends = false;            // it computes partials itself: a partial, paged or step level
  bool batches = false;            // its levels take a batch of requests (ABI 2's paged level)
  std::vector<std::string> lacks;  // the features it lacks, as --without names them
  std::vector<std::string> uncarried;  // of them, those its ABI version does not carry
  // run's choice: the partial and combine levels where there are any, else the step.
  const props::DcpBackend& preferred() const { return levels ? *levels : *step; }
};
oracle::Expected<ImplBackends> open_impl(const std::string& path, const std::string& backend,
                                         const std::string& comm,
                                         std::chrono::milliseconds deadline);

// --comm's help: every pair of the table, where its ranks live, each backend's default.
std::string comms_help();

// What this binary can run, for help texts: "host (cuda: not built)" or "host or cuda".
std::string backends_help();

}  // namespace dcp::tools
