#include "gpu/cuda/comm_single_gpu.hpp"

#include "gpu/comm/communicator.hpp"
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
    DCP_GPU_TRY(publish(send, count, "all_gather"));
    GpuStatus st;
    for (int64_t s = 0; s < size() && st; ++s) st = copy(recv + s * count, peer(s), count);
    return finish("all_gather", st);
  }

  GpuStatus all_to_all(const float* send, int64_t count, float* recv) override {
    DCP_GPU_TRY(publish(send, size() * count, "all_to_all"));
    GpuStatus st;
    for (int64_t s = 0; s < size() && st; ++s)
      st = copy(recv + s * count, peer(s) + rank_ * count, count);
    return finish("all_to_all", st);
  }

  GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv,
                               const SumSpec& how) override {
    Result<ReduceSchedule> sched = make_schedule<ReduceSchedule>(size(), how.order, how.seed);
    if (!sched) return fail(sched.status());
    DCP_GPU_TRY(publish(send, size() * count, "reduce_scatter"));
    std::vector<const float*> blocks(static_cast<size_t>(size()));
    for (int64_t s = 0; s < size(); ++s) blocks[static_cast<size_t>(s)] = peer(s) + rank_ * count;
    return finish("reduce_scatter",
                  launch_ordered_sum(blocks.data(), count, *sched, how.accum, recv, stream_));
  }

 private:
  const float* peer(int64_t s) const { return static_cast<const float*>(g_->rv_.peer(s)); }
  GpuStatus copy(float* dst, const float* src, int64_t count) {
    DCP_CUDA_TRY(cudaMemcpyAsync(dst, src, static_cast<size_t>(count) * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream_));
    return {};
  }
  // A failure of this rank outside the rendezvous: its queued work is drained (it may read
  // peers' buffers), then the group is aborted so no peer waits for it.
  GpuStatus fail(GpuStatus st) {
    wait_stream(stream_, kDeviceWorkDeadline, "single-gpu drain");
    g_->rv_.abort("rank " + std::to_string(rank_) + ": " + st.message());
    return st;
  }
  // The send buffer is complete once the rank's stream is idle (its own kernels: the device-work
  // deadline); then the peers meet (the collective deadline).
  GpuStatus publish(const float* send, int64_t count, const char* what) {
    if (count < 0) return fail(DCP_GPU_ERROR(what, ": count ", count, " is negative"));
    GpuStatus st = wait_stream(stream_, kDeviceWorkDeadline, what);
    if (!st) return fail(st);
    return g_->rv_.publish(rank_, send, static_cast<size_t>(count), what);
  }
  // Waits for this rank's copies or sums (st: whether they were enqueued), then for every
  // peer's, before any buffer is reused.
  GpuStatus finish(const char* what, GpuStatus st) {
    if (st) st = wait_stream(stream_, g_->deadline_, what);
    if (!st) fail(st);
    GpuStatus met = g_->rv_.barrier(rank_, what);
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
