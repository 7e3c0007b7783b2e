#include "gpu/comm/rendezvous.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace dcp::gpu {

Rendezvous::Rendezvous(int64_t ranks, std::string transport, std::chrono::milliseconds deadline)
    : ranks_(ranks),
      transport_(std::move(transport)),
      deadline_(deadline),
      here_(static_cast<size_t>(ranks), 0),
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

GpuStatus Rendezvous::barrier(int64_t rank, const char* what) {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) {
    released_[static_cast<size_t>(rank)] = 1;
    return DCP_GPU_ERROR(transport_, " communicator aborted: ", abort_reason_);
  }
  const uint64_t gen = generation_;
  here_[static_cast<size_t>(rank)] = 1;
  last_arrival_ = std::chrono::steady_clock::now();
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    std::fill(here_.begin(), here_.end(), 0);
    ++generation_;
    cv_.notify_all();
    return {};
  }
  // Each arrival moves the deadline: the wait ends when nobody has arrived for deadline_.
  const auto met = [&] { return generation_ != gen || aborted_; };
  while (!cv_.wait_until(lock, last_arrival_ + deadline_, met))
    if (std::chrono::steady_clock::now() >= last_arrival_ + deadline_) break;
  if (generation_ != gen) return {};
  if (aborted_) {
    released_[static_cast<size_t>(rank)] = 1;
    return DCP_GPU_ERROR(transport_, " communicator aborted: ", abort_reason_);
  }
  std::vector<int64_t> missing;  // the ranks that have not arrived, named in the error
  for (int64_t r = 0; r < ranks_; ++r)
    if (!here_[static_cast<size_t>(r)]) missing.push_back(r);
  const std::string why =
      gpu_message(what, ": ", rank_list(missing), " did not arrive within ",
                  std::chrono::duration<double>(deadline_).count(),
                  " s of the last arrival (stopped or hung; DcpConfig.deadline sets the wait)");
  aborted_ = true;  // every other waiter is released with the same reason
  abort_reason_ = why;
  cv_.notify_all();
  return DCP_GPU_ERROR(transport_, " communicator: ", why);
}

GpuStatus Rendezvous::publish(int64_t rank, const void* buffer, size_t count, const char* what) {
  buffer_[static_cast<size_t>(rank)] = buffer;
  count_[static_cast<size_t>(rank)] = count;
  DCP_GPU_TRY(barrier(rank, what));
  for (int64_t s = 0; s < ranks_; ++s) {
    if (count_[static_cast<size_t>(s)] != count)
      return DCP_GPU_ERROR("collective: rank ", s, " sends ", count_[static_cast<size_t>(s)],
                           " floats but rank ", rank, " sends ", count);
  }
  return {};
}

}  // namespace dcp::gpu
