// comm_threads.hpp — an in-process communicator: the N ranks of a DCP group as N threads.
//
// Each collective publishes the caller's send buffer, meets the other ranks at a barrier, reads
// what it needs from its peers' buffers, and meets them again before anyone may reuse a buffer.
// The barrier waits with a deadline; abort() (called when any rank fails) releases every waiter
// with an error, so a failed rank never leaves the others hanging.
//
//   ThreadGroup group(4);
//   // in the thread of rank r:
//   Communicator& comm = group.comm(r);
//   DCP_GPU_TRY(comm.all_gather(mine, all));
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/communicator.hpp"

namespace dcp::gpu {

class ThreadGroup {
 public:
  // A peer that does not arrive within `deadline` fails the collective.
  explicit ThreadGroup(int64_t ranks,
                       std::chrono::milliseconds deadline = std::chrono::milliseconds(120000));
  ~ThreadGroup();
  Communicator& comm(int64_t rank);
  int64_t size() const { return ranks_; }
  // Fails every current and future collective of the group (a rank hit an error).
  void abort(const std::string& why);
  // Whether a collective of `rank` failed because the group was aborted (it was released, it did
  // not fail on its own).
  bool released(int64_t rank) const;

 private:
  class RankComm;
  friend class RankComm;
  GpuStatus barrier(int64_t rank);

  int64_t ranks_;
  std::chrono::milliseconds deadline_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string abort_reason_;
  std::vector<const float*> send_;  // [N] published send buffers
  std::vector<size_t> send_size_;   // [N]
  std::vector<char> released_;      // [N] 1: a collective returned because of an abort
  std::vector<std::unique_ptr<RankComm>> comms_;
};

}  // namespace dcp::gpu
