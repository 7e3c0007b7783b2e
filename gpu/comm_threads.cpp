#include "gpu/comm_threads.hpp"

#include <algorithm>

namespace dcp::gpu {

class ThreadGroup::RankComm final : public Communicator {
 public:
  RankComm(ThreadGroup* g, int64_t rank) : g_(g), rank_(rank) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return g_->ranks_; }
  std::string name() const override { return "threads"; }

  GpuStatus all_gather(std::span<const float> send, std::span<float> recv) override {
    const int64_t n = g_->ranks_;
    DCP_GPU_TRY(check_collective("all_gather", n, send.size(), recv.size(), 1, n));
    DCP_GPU_TRY(publish(send));
    for (int64_t s = 0; s < n; ++s)
      std::copy_n(g_->send_[s], send.size(), recv.data() + s * send.size());
    return g_->barrier(rank_);
  }

  GpuStatus all_to_all(std::span<const float> send, std::span<float> recv) override {
    const int64_t n = g_->ranks_;
    DCP_GPU_TRY(check_collective("all_to_all", n, send.size(), recv.size(), n, n));
    DCP_GPU_TRY(publish(send));
    const size_t count = send.size() / static_cast<size_t>(n);
    for (int64_t s = 0; s < n; ++s)
      std::copy_n(g_->send_[s] + rank_ * count, count, recv.data() + s * count);
    return g_->barrier(rank_);
  }

  GpuStatus reduce_scatter_sum(std::span<const float> send, std::span<float> recv,
                               ReduceOrder order, uint64_t seed) override {
    const int64_t n = g_->ranks_;
    DCP_GPU_TRY(check_collective("reduce_scatter", n, send.size(), recv.size(), n, 1));
    DCP_GPU_TRY(publish(send));
    const size_t count = recv.size();
    std::vector<const float*> blocks(static_cast<size_t>(n));
    for (int64_t s = 0; s < n; ++s) blocks[static_cast<size_t>(s)] = g_->send_[s] + rank_ * count;
    sum_blocks_ordered(blocks, static_cast<int64_t>(count), order, seed, recv);
    return g_->barrier(rank_);
  }

 private:
  // Publishes the send buffer, waits for all peers, and checks they agree on its size.
  GpuStatus publish(std::span<const float> send) {
    g_->send_[rank_] = send.data();
    g_->send_size_[rank_] = send.size();
    DCP_GPU_TRY(g_->barrier(rank_));
    for (int64_t s = 0; s < g_->ranks_; ++s) {
      if (g_->send_size_[s] != send.size())
        return DCP_GPU_ERROR("collective: rank ", s, " sends ", g_->send_size_[s],
                             " floats but rank ", rank_, " sends ", send.size());
    }
    return {};
  }
  ThreadGroup* g_;
  int64_t rank_;
};

ThreadGroup::ThreadGroup(int64_t ranks, std::chrono::milliseconds deadline)
    : ranks_(ranks),
      deadline_(deadline),
      send_(static_cast<size_t>(ranks), nullptr),
      send_size_(static_cast<size_t>(ranks), 0),
      released_(static_cast<size_t>(ranks), 0) {
  for (int64_t r = 0; r < ranks; ++r) comms_.push_back(std::make_unique<RankComm>(this, r));
}

ThreadGroup::~ThreadGroup() = default;

Communicator& ThreadGroup::comm(int64_t rank) { return *comms_[static_cast<size_t>(rank)]; }

void ThreadGroup::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) abort_reason_ = why;
  aborted_ = true;
  cv_.notify_all();
}

bool ThreadGroup::released(int64_t rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return released_[static_cast<size_t>(rank)] != 0;
}

GpuStatus ThreadGroup::barrier(int64_t rank) {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) {
    released_[static_cast<size_t>(rank)] = 1;
    return DCP_GPU_ERROR("threads communicator aborted: ", abort_reason_);
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
    return DCP_GPU_ERROR("threads communicator aborted: ", abort_reason_);
  }
  if (!done) {
    aborted_ = true;
    abort_reason_ = "a peer missed the barrier deadline";
  }
  return DCP_GPU_ERROR("threads communicator: a peer did not arrive within ", deadline_.count(),
                       " ms");
}

}  // namespace dcp::gpu
