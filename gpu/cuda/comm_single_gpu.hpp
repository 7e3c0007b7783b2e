// comm_single_gpu.hpp — N virtual ranks of a DCP group on one GPU.
//
// NCCL refuses two ranks on one device, so a one-GPU machine runs the whole DCP path through
// this communicator: each rank is a host thread with its own stream and its own device buffers,
// laid out exactly as for NCCL. A collective waits for the rank's stream (its send buffer is
// complete), meets the peers at the group's rendezvous (rendezvous.hpp), copies or sums from
// the peers' device buffers on its own stream, waits for that, and meets them again before any
// buffer is reused. Every wait has a deadline; a failed rank aborts the group.
//
//   Result<std::unique_ptr<SingleGpuGroup>> g = SingleGpuGroup::create(/*ranks=*/4, /*device=*/0);
//   // in the thread of rank r:
//   DeviceCommunicator& comm = (*g)->comm(r);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/comm/rendezvous.hpp"
#include "gpu/cuda/device_comm.hpp"

namespace dcp::gpu {

class SingleGpuGroup final : public RankGroup {
 public:
  static Result<std::unique_ptr<SingleGpuGroup>> create(
      int64_t ranks, int device, std::chrono::milliseconds deadline = kDefaultCollectiveDeadline);
  ~SingleGpuGroup() override;
  DeviceCommunicator& comm(int64_t rank);
  void abort(const std::string& why) override { rv_.abort(why); }
  bool released(int64_t rank) const override { return rv_.released(rank); }

 private:
  class RankComm;
  SingleGpuGroup(int64_t ranks, int device, std::chrono::milliseconds deadline);
  Rendezvous rv_;
  int device_;
  std::chrono::milliseconds deadline_;
  std::vector<std::unique_ptr<RankComm>> comms_;
};

}  // namespace dcp::gpu
