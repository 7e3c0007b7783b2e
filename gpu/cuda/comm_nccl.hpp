// comm_nccl.hpp — the DCP group over NCCL, one rank per GPU.
//
// Two ways to form a group: one process driving several GPUs (create_all: ncclCommInitAll, one
// host thread per rank), or one rank per process (create_rank: ncclCommInitRank with an id the
// caller exchanged, over MPI in comm_nccl_mpi.hpp, so mpirun across nodes works). AllGather is
// ncclAllGather; All-to-All is grouped ncclSend/ncclRecv; ReduceScatter is that All-to-All
// followed by a local sum in the configured order, so every transport reduces in the same tree
// (communicator.hpp). Each wait polls the rank's stream and NCCL's asynchronous error with a
// deadline, and aborts the communicator (ncclCommAbort) instead of hanging; abort() from a
// failed peer thread does the same.
//
//   Result<std::unique_ptr<NcclGroup>> g = NcclGroup::create_all({0, 1, 2, 3});
//   // in the thread of rank r:  DeviceCommunicator& comm = (*g)->comm(r);
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/comm/rendezvous.hpp"
#include "gpu/cuda/device_comm.hpp"

namespace dcp::gpu {

class NcclGroup final : public RankGroup {
 public:
  // Rank r of the group runs on devices[r]; this process drives them all.
  static Result<std::unique_ptr<NcclGroup>> create_all(
      const std::vector<int>& devices,
      std::chrono::milliseconds deadline = kDefaultCollectiveDeadline);
  // This process is rank `rank` of `ranks` on `device`; `id` came from rank 0 (ncclGetUniqueId).
  static Result<std::unique_ptr<NcclGroup>> create_rank(
      const ncclUniqueId& id, int64_t ranks, int64_t rank, int device,
      std::chrono::milliseconds deadline = kDefaultCollectiveDeadline);
  // A fresh id for create_rank (on rank 0, before it is shared).
  static Result<ncclUniqueId> unique_id();
  ~NcclGroup() override;

  // The communicator of a rank this process drives.
  DeviceCommunicator& comm(int64_t rank);
  void abort(const std::string& why) override;
  bool released(int64_t rank) const override;

 private:
  class RankComm;
  NcclGroup(int64_t ranks, std::chrono::milliseconds deadline);
  // A rank of this process enters a collective (its own work done): the group's deadline
  // counts from the last such arrival, so a rank that waits for slower but moving peers on the
  // same device is not timed out.
  void arrive(int64_t rank);
  // When a wait that began at `start` gives up: deadline_ after the later of its start and the
  // last arrival.
  std::chrono::steady_clock::time_point gives_up(std::chrono::steady_clock::time_point start);
  // The ranks of this process that have not reached rank's collective ("rank 2", "ranks 1, 3"),
  // or, where its peers run in other processes, that they are there to ask.
  std::string missing(int64_t rank);
  int64_t ranks_;
  std::chrono::milliseconds deadline_;
  std::vector<int64_t> entered_;  // [ranks] collectives entered by each rank of this process
  std::chrono::steady_clock::time_point last_arrival_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;
  std::string abort_reason_;
  std::vector<std::unique_ptr<RankComm>> comms_;  // [ranks]; null for ranks of other processes
};

}  // namespace dcp::gpu
