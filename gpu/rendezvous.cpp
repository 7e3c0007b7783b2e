#include "gpu/rendezvous.hpp"

#include <utility>

namespace dcp::gpu {

Rendezvous::Rendezvous(int64_t ranks, std::string transport, std::chrono::milliseconds deadline)
    : ranks_(ranks),
      transport_(std::move(transport)),
      deadline_(deadline),
      buffer_(static_cast<size_t>(ranks), nullptr),
      count_(static_cast<size_t>(ranks), 0),
      released_(static_cast<size_t>(ranks), 0) {}

void Rendezvous::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) abort_reason_ = why;
  aborted_ = true;
  cv_.notify_all();
}

bool Rendezvous::released(int64_t rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return released_[static_cast<size_t>(rank)] != 0;
}

GpuStatus Rendezvous::barrier(int64_t rank) {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) {
    released_[static_cast<size_t>(rank)] = 1;
    return DCP_GPU_ERROR(transport_, " communicator aborted: ", abort_reason_);
  }
  const uint64_t gen = generation_;
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return {};
  }
  const bool done = cv_.wait_for(lock, deadline_, [&] { return generation_ != gen || aborted_; });
  if (generation_ != gen) return {};
  if (aborted_) {
    released_[static_cast<size_t>(rank)] = 1;
    return DCP_GPU_ERROR(transport_, " communicator aborted: ", abort_reason_);
  }
  if (!done) {
    aborted_ = true;
    abort_reason_ = "a peer missed the barrier deadline";
  }
  return DCP_GPU_ERROR(transport_, " communicator: a peer did not arrive within ",
                       deadline_.count(), " ms");
}

GpuStatus Rendezvous::publish(int64_t rank, const void* buffer, size_t count) {
  buffer_[static_cast<size_t>(rank)] = buffer;
  count_[static_cast<size_t>(rank)] = count;
  DCP_GPU_TRY(barrier(rank));
  for (int64_t s = 0; s < ranks_; ++s) {
    if (count_[static_cast<size_t>(s)] != count)
      return DCP_GPU_ERROR("collective: rank ", s, " sends ", count_[static_cast<size_t>(s)],
                           " floats but rank ", rank, " sends ", count);
  }
  return {};
}

}  // namespace dcp::gpu
