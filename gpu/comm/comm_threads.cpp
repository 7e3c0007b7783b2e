#include "gpu/comm/comm_threads.hpp"

#include <algorithm>

namespace dcp::gpu {

class ThreadGroup::RankComm final : public Communicator {
 public:
  RankComm(Rendezvous* rv, int64_t rank) : rv_(rv), rank_(rank) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return rv_->size(); }
  std::string name() const override { return "threads"; }

  GpuStatus all_gather(std::span<const float> send, std::span<float> recv) override {
    const int64_t n = size();
    DCP_GPU_TRY(check_collective("all_gather", n, send.size(), recv.size(), 1, n));
    DCP_GPU_TRY(rv_->publish(rank_, send.data(), send.size(), "all_gather"));
    for (int64_t s = 0; s < n; ++s)
      std::copy_n(peer(s), send.size(), recv.data() + s * send.size());
    return rv_->barrier(rank_, "all_gather");
  }

  GpuStatus all_to_all(std::span<const float> send, std::span<float> recv) override {
    const int64_t n = size();
    DCP_GPU_TRY(check_collective("all_to_all", n, send.size(), recv.size(), n, n));
    DCP_GPU_TRY(rv_->publish(rank_, send.data(), send.size(), "all_to_all"));
    const size_t count = send.size() / static_cast<size_t>(n);
    for (int64_t s = 0; s < n; ++s)
      std::copy_n(peer(s) + rank_ * count, count, recv.data() + s * count);
    return rv_->barrier(rank_, "all_to_all");
  }

  GpuStatus reduce_scatter_sum(std::span<const float> send, std::span<float> recv,
                               const SumSpec& how) override {
    const int64_t n = size();
    DCP_GPU_TRY(check_collective("reduce_scatter", n, send.size(), recv.size(), n, 1));
    DCP_GPU_TRY(rv_->publish(rank_, send.data(), send.size(), "reduce_scatter"));
    const size_t count = recv.size();
    std::vector<const float*> blocks(static_cast<size_t>(n));
    for (int64_t s = 0; s < n; ++s) blocks[static_cast<size_t>(s)] = peer(s) + rank_ * count;
    // Every rank meets the barrier, whether its sum succeeded or not (peers would wait for it).
    const GpuStatus summed = sum_blocks_ordered(blocks, static_cast<int64_t>(count), how, recv);
    DCP_GPU_TRY(rv_->barrier(rank_, "reduce_scatter"));
    return summed;
  }

 private:
  const float* peer(int64_t s) const { return static_cast<const float*>(rv_->peer(s)); }
  Rendezvous* rv_;
  int64_t rank_;
};

ThreadGroup::ThreadGroup(int64_t ranks, std::chrono::milliseconds deadline)
    : rv_(ranks, "threads", deadline) {
  for (int64_t r = 0; r < ranks; ++r) comms_.push_back(std::make_unique<RankComm>(&rv_, r));
}

ThreadGroup::~ThreadGroup() = default;

Communicator& ThreadGroup::comm(int64_t rank) { return *comms_[static_cast<size_t>(rank)]; }

}  // namespace dcp::gpu
