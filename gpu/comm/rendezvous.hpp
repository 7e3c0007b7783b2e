// rendezvous.hpp — the meeting point of the N ranks of a DCP group run as threads of one process.
//
// Ranks publish a buffer (any address space: host memory for the threads communicator, device
// memory for the single-GPU one), meet at a barrier, read what they need from their peers'
// buffers, and meet again before anyone may reuse a buffer. The barrier's deadline counts from
// the last arrival, not from each waiter's own: ranks that share one device reach a collective
// far apart when their shards differ, and in a group of three or more a fast rank does not give
// up while its peers keep arriving; it gives up once nobody has arrived for the whole deadline
// (with two ranks the last arrival is the waiter's own, as with a per-waiter deadline).
// abort() (called when any rank fails) releases every waiter with an error, so a failed rank
// never leaves the others hanging.
//
//   Rendezvous rv(4, "threads");
//   DCP_GPU_TRY(rv.publish(rank, send.data(), send.size(), "all_gather"));  // sizes agree
//   const float* peer = static_cast<const float*>(rv.peer(s));
//   DCP_GPU_TRY(rv.barrier(rank, "all_gather"));                            // peers done reading
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/comm/communicator.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

// What a runner needs of a group whose ranks run as threads: stop it, and tell a rank that
// failed on its own from one its peers' failure released.
class RankGroup {
 public:
  virtual ~RankGroup() = default;
  // Fails every current and future collective of the group (a rank hit an error).
  virtual void abort(const std::string& why) = 0;
  // Whether a collective of `rank` failed because the group was aborted.
  virtual bool released(int64_t rank) const = 0;
};

class Rendezvous final : public RankGroup {
 public:
  // `transport` names the communicator in errors; a collective fails when no rank has arrived
  // for `deadline` while some have not.
  Rendezvous(int64_t ranks, std::string transport,
             std::chrono::milliseconds deadline = kDefaultCollectiveDeadline);
  int64_t size() const { return ranks_; }
  void abort(const std::string& why) override;
  bool released(int64_t rank) const override;
  // Waits for every rank; `what` (the collective) names it in a timeout, with the ranks that
  // did not arrive.
  GpuStatus barrier(int64_t rank, const char* what);
  // Publishes rank's buffer of `count` elements, waits for all peers, and checks that they
  // publish the same count.
  GpuStatus publish(int64_t rank, const void* buffer, size_t count, const char* what);
  // A peer's published buffer (valid between publish and the next barrier).
  const void* peer(int64_t rank) const { return buffer_[static_cast<size_t>(rank)]; }

 private:
  int64_t ranks_;
  std::string transport_;
  std::chrono::milliseconds deadline_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t arrived_ = 0;
  std::chrono::steady_clock::time_point last_arrival_;  // of the current barrier's ranks
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string abort_reason_;
  std::vector<char> here_;           // [N] 1: arrived at the current barrier
  std::vector<const void*> buffer_;  // [N] published buffers
  std::vector<size_t> count_;        // [N]
  std::vector<char> released_;       // [N] 1: a collective returned because of an abort
};

}  // namespace dcp::gpu
