// comm_threads.hpp — an in-process communicator: the N ranks of a DCP group as N threads.
//
// Each collective publishes the caller's send buffer at the group's rendezvous
// (rendezvous.hpp), reads what it needs from its peers' buffers, and meets them again before
// anyone may reuse a buffer. A failed rank aborts the group and releases every waiter.
//
//   ThreadGroup group(4);
//   // in the thread of rank r:
//   Communicator& comm = group.comm(r);
//   DCP_GPU_TRY(comm.all_gather(mine, all));
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/comm/communicator.hpp"
#include "gpu/comm/rendezvous.hpp"

namespace dcp::gpu {

class ThreadGroup final : public RankGroup {
 public:
  // A peer that does not arrive within `deadline` fails the collective.
  explicit ThreadGroup(int64_t ranks,
                       std::chrono::milliseconds deadline = kDefaultCollectiveDeadline);
  ~ThreadGroup() override;
  Communicator& comm(int64_t rank);
  int64_t size() const { return rv_.size(); }
  void abort(const std::string& why) override { rv_.abort(why); }
  bool released(int64_t rank) const override { return rv_.released(rank); }

 private:
  class RankComm;
  Rendezvous rv_;
  std::vector<std::unique_ptr<RankComm>> comms_;
};

}  // namespace dcp::gpu
