#include "gpu/cuda/comm_single_gpu.hpp"

#include "gpu/communicator.hpp"
#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/kernels.hpp"

namespace dcp::gpu {

class SingleGpuGroup::RankComm final : public DeviceCommunicator {
 public:
  RankComm(SingleGpuGroup* g, int64_t rank, cudaStream_t stream)
      : g_(g), rank_(rank), stream_(stream) {}
  ~RankComm() override { cudaStreamDestroy(stream_); }
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return g_->rv_.size(); }
  std::string name() const override { return "single-gpu"; }
  int device() const override { return g_->device_; }
  cudaStream_t stream() const override { return stream_; }

  GpuStatus all_gather(const float* send, int64_t count, float* recv) override {
    DCP_GPU_TRY(publish(send, count));
    for (int64_t s = 0; s < size(); ++s)
      DCP_CUDA_TRY(cudaMemcpyAsync(recv + s * count, peer(s), bytes(count),
                                   cudaMemcpyDeviceToDevice, stream_));
    return finish("all_gather");
  }

  GpuStatus all_to_all(const float* send, int64_t count, float* recv) override {
    DCP_GPU_TRY(publish(send, size() * count));
    for (int64_t s = 0; s < size(); ++s)
      DCP_CUDA_TRY(cudaMemcpyAsync(recv + s * count, peer(s) + rank_ * count, bytes(count),
                                   cudaMemcpyDeviceToDevice, stream_));
    return finish("all_to_all");
  }

  GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv, ReduceOrder order,
                               uint64_t seed) override {
    Result<ReduceSchedule> sched = make_schedule(size(), order, seed);
    if (!sched) return sched.status();
    DCP_GPU_TRY(publish(send, size() * count));
    std::vector<const float*> blocks(static_cast<size_t>(size()));
    for (int64_t s = 0; s < size(); ++s) blocks[static_cast<size_t>(s)] = peer(s) + rank_ * count;
    DCP_GPU_TRY(launch_ordered_sum(blocks.data(), count, *sched, recv, stream_));
    return finish("reduce_scatter");
  }

 private:
  static size_t bytes(int64_t count) { return static_cast<size_t>(count) * sizeof(float); }
  const float* peer(int64_t s) const { return static_cast<const float*>(g_->rv_.peer(s)); }
  // The send buffer is complete once the rank's stream is idle; then the peers meet.
  GpuStatus publish(const float* send, int64_t count) {
    if (count < 0) return DCP_GPU_ERROR("collective: count ", count, " is negative");
    GpuStatus st = wait_stream(stream_, g_->deadline_, "single-gpu collective");
    if (!st) {
      g_->rv_.abort("rank " + std::to_string(rank_) + ": " + st.message());
      return st;
    }
    return g_->rv_.publish(rank_, send, static_cast<size_t>(count));
  }
  // Waits for this rank's copies or sums, then for every peer's, before buffers are reused.
  GpuStatus finish(const char* what) {
    GpuStatus st = wait_stream(stream_, g_->deadline_, what);
    if (!st) g_->rv_.abort("rank " + std::to_string(rank_) + ": " + st.message());
    GpuStatus met = g_->rv_.barrier(rank_);
    return st ? met : st;
  }
  SingleGpuGroup* g_;
  int64_t rank_;
  cudaStream_t stream_;
};

SingleGpuGroup::SingleGpuGroup(int64_t ranks, int device, std::chrono::milliseconds deadline)
    : rv_(ranks, "single-gpu", deadline), device_(device), deadline_(deadline) {}

SingleGpuGroup::~SingleGpuGroup() = default;

Result<std::unique_ptr<SingleGpuGroup>> SingleGpuGroup::create(int64_t ranks, int device,
                                                               std::chrono::milliseconds deadline) {
  if (ranks < 1) return DCP_GPU_ERROR("single-gpu communicator: ", ranks, " ranks; expected >= 1");
  DCP_CUDA_TRY(cudaSetDevice(device));
  std::unique_ptr<SingleGpuGroup> g(new SingleGpuGroup(ranks, device, deadline));
  for (int64_t r = 0; r < ranks; ++r) {
    cudaStream_t s = nullptr;
    DCP_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g->comms_.push_back(std::make_unique<RankComm>(g.get(), r, s));
  }
  return g;
}

DeviceCommunicator& SingleGpuGroup::comm(int64_t rank) {
  return *comms_[static_cast<size_t>(rank)];
}

}  // namespace dcp::gpu
