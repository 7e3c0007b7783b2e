#include "gpu/cuda/comm_nccl.hpp"

#include <algorithm>
#include <thread>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/nccl_api.hpp"

namespace dcp::gpu {

// How long a wait sleeps between polls of the stream and of NCCL's asynchronous error.
inline constexpr std::chrono::microseconds kNcclPollInterval{20};

class NcclGroup::RankComm final : public DeviceCommunicator {
 public:
  RankComm(NcclGroup* g, const NcclApi* api, int64_t rank, int device, ncclComm_t comm,
           cudaStream_t stream)
      : g_(g), api_(api), rank_(rank), device_(device), comm_(comm), stream_(stream) {}
  // The communicator itself is finalized or aborted by ~NcclGroup, which sees every rank.
  ~RankComm() override {
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
  }
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return g_->ranks_; }
  std::string name() const override { return "nccl"; }
  int device() const override { return device_; }
  cudaStream_t stream() const override { return stream_; }
  bool released() const { return released_; }
  bool dead() const { return dead_; }
  ncclComm_t nccl_comm() const { return comm_; }

  GpuStatus all_gather(const float* send, int64_t count, float* recv) override {
    DCP_GPU_TRY(usable());
    NCCL_TRY(*api_,
             api_->AllGather(send, recv, static_cast<size_t>(count), ncclFloat, comm_, stream_));
    return wait("all_gather");
  }

  GpuStatus all_to_all(const float* send, int64_t count, float* recv) override {
    DCP_GPU_TRY(usable());
    DCP_GPU_TRY(enqueue_all_to_all(send, count, recv));
    return wait("all_to_all");
  }

  GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv,
                               const SumSpec& how) override {
    DCP_GPU_TRY(usable());
    Result<ReduceSchedule> sched = make_schedule<ReduceSchedule>(size(), how.order, how.seed);
    if (!sched) return sched.status();
    // The received blocks land in plain cudaMalloc memory, which NCCL's same-process peer path
    // can reach (stream-ordered pool memory is not peer-accessible unless granted); it grows to
    // the largest collective and is kept, so no allocation happens between collectives.
    const size_t need = static_cast<size_t>(size() * count);
    if (blocks_.size() < need) {
      Result<DeviceBuffer<float>> b = DeviceBuffer<float>::create(need, stream_);
      if (!b) return b.status();
      blocks_ = std::move(*b);
    }
    DCP_GPU_TRY(enqueue_all_to_all(send, count, blocks_.data()));
    std::vector<const float*> ptrs(static_cast<size_t>(size()));
    for (int64_t s = 0; s < size(); ++s) ptrs[static_cast<size_t>(s)] = blocks_.data() + s * count;
    DCP_GPU_TRY(launch_ordered_sum(ptrs.data(), count, *sched, how.accum, recv, stream_));
    return wait("reduce_scatter");
  }

  // Stops this rank's communicator (a peer failed or a deadline passed).
  void kill() {
    if (dead_) return;
    dead_ = true;
    api_->CommAbort(comm_);
  }

 private:
  // A collective starts only on a live communicator of a group that was not aborted, once the
  // rank's own queued kernels are done (the device-work deadline), so that the collective
  // deadline of wait() measures the exchange alone.
  GpuStatus usable() {
    if (g_->aborted_ && !dead_) {
      released_ = true;
      kill();
    }
    if (dead_) {
      std::lock_guard<std::mutex> lock(g_->mu_);
      return DCP_GPU_ERROR("nccl communicator of rank ", rank_,
                           " was aborted: ", g_->abort_reason_);
    }
    GpuStatus st = wait_stream(stream_, kDeviceWorkDeadline, "nccl collective");
    if (!st) {
      kill();
      g_->abort("rank " + std::to_string(rank_) + ": " + st.message());
      return st;
    }
    g_->arrive(rank_);
    return st;
  }
  GpuStatus enqueue_all_to_all(const float* send, int64_t count, float* recv) {
    const size_t n = static_cast<size_t>(count);
    NCCL_TRY(*api_, api_->GroupStart());
    for (int64_t p = 0; p < size(); ++p) {
      const ncclResult_t s =
          api_->Send(send + p * count, n, ncclFloat, static_cast<int>(p), comm_, stream_);
      const ncclResult_t r =
          api_->Recv(recv + p * count, n, ncclFloat, static_cast<int>(p), comm_, stream_);
      if (s != ncclSuccess || r != ncclSuccess) {
        api_->GroupEnd();
        NCCL_TRY(*api_, s != ncclSuccess ? s : r);
      }
    }
    NCCL_TRY(*api_, api_->GroupEnd());
    return {};
  }
  // Polls the stream until the collective is done, NCCL reports an error, the group is aborted,
  // or the deadline passes; the last three abort this rank's communicator.
  GpuStatus wait(const char* what) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return {};
      std::string why;
      ncclResult_t async = ncclSuccess;
      if (sticky_error(e)) end_on_sticky_error(e, what, stream_, __FILE__, __LINE__);
      if (e != cudaErrorNotReady) {
        why = std::string("device work failed: ") + cudaGetErrorName(e) + ": " +
              cudaGetErrorString(e);
      } else if (api_->CommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess &&
                 async != ncclInProgress) {
        why = std::string("NCCL error: ") + api_->GetErrorString(async);
      } else if (g_->aborted_) {
        released_ = true;
        kill();
        std::lock_guard<std::mutex> lock(g_->mu_);
        return DCP_GPU_ERROR("nccl communicator aborted: ", g_->abort_reason_);
      } else if (std::chrono::steady_clock::now() > g_->gives_up(start)) {
        why = gpu_message(g_->missing(rank_), " did not arrive within ",
                          std::chrono::duration<double>(g_->deadline_).count(),
                          " s of the last arrival (stopped or hung; DcpConfig.deadline sets the "
                          "wait)");
      }
      if (!why.empty()) {
        kill();
        g_->abort("rank " + std::to_string(rank_) + ": " + what + ": " + why);
        return DCP_GPU_ERROR("nccl ", what, " on rank ", rank_, ": ", why);
      }
      std::this_thread::sleep_for(kNcclPollInterval);
    }
  }

  NcclGroup* g_;
  const NcclApi* api_;
  int64_t rank_;
  int device_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  bool dead_ = false;
  bool released_ = false;
  DeviceBuffer<float> blocks_;  // the ReduceScatter's received blocks [N, count]
};

NcclGroup::NcclGroup(int64_t ranks, std::chrono::milliseconds deadline)
    : ranks_(ranks),
      deadline_(deadline),
      entered_(static_cast<size_t>(ranks), 0),
      last_arrival_(std::chrono::steady_clock::now()),
      comms_(static_cast<size_t>(ranks)) {}

void NcclGroup::arrive(int64_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  ++entered_[static_cast<size_t>(rank)];
  last_arrival_ = std::chrono::steady_clock::now();
}

std::chrono::steady_clock::time_point NcclGroup::gives_up(
    std::chrono::steady_clock::time_point start) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::max(start, last_arrival_) + deadline_;
}

std::string NcclGroup::missing(int64_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> behind;
  int64_t here = 0;  // ranks this process drives
  for (int64_t r = 0; r < ranks_; ++r) {
    if (comms_[static_cast<size_t>(r)] == nullptr) continue;
    ++here;
    if (entered_[static_cast<size_t>(r)] < entered_[static_cast<size_t>(rank)]) behind.push_back(r);
  }
  if (here == 1) return "a peer (the ranks of other processes; their own errors name them)";
  if (behind.empty()) return "a peer (every rank of this process entered; NCCL did not finish)";
  return rank_list(behind);
}

NcclGroup::~NcclGroup() {
  // Live communicators are aborted when the group failed (abort is local to a rank), and
  // otherwise finalized together and destroyed: ncclCommFinalize is collective, so one thread
  // finalizing several ranks must group the calls.
  std::vector<RankComm*> live;
  for (auto& c : comms_)
    if (c != nullptr && !c->dead()) live.push_back(c.get());
  if (!live.empty()) {
    const Result<const NcclApi*> api = nccl_api();  // loaded: a communicator exists
    if (aborted_) {
      for (RankComm* c : live) c->kill();
    } else {
      (*api)->GroupStart();
      for (RankComm* c : live) {
        cudaSetDevice(c->device());
        (*api)->CommFinalize(c->nccl_comm());
      }
      (*api)->GroupEnd();
      for (RankComm* c : live) {
        cudaSetDevice(c->device());
        (*api)->CommDestroy(c->nccl_comm());
      }
    }
  }
  comms_.clear();
}

Result<std::unique_ptr<NcclGroup>> NcclGroup::create_all(const std::vector<int>& devices,
                                                         std::chrono::milliseconds deadline) {
  Result<const NcclApi*> api = nccl_api();
  if (!api) return api.status();
  const int n = static_cast<int>(devices.size());
  if (n < 1) return DCP_GPU_ERROR("nccl communicator: no devices");
  std::vector<ncclComm_t> comms(devices.size());
  NCCL_TRY(**api, (*api)->CommInitAll(comms.data(), n, devices.data()));
  std::unique_ptr<NcclGroup> g(new NcclGroup(n, deadline));
  for (int r = 0; r < n; ++r) {
    cudaStream_t s = nullptr;
    DCP_CUDA_TRY(cudaSetDevice(devices[static_cast<size_t>(r)]));
    const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      g->abort("stream creation failed");  // ~NcclGroup aborts the ranks already made
      for (int q = r; q < n; ++q) (*api)->CommAbort(comms[static_cast<size_t>(q)]);
      DCP_CUDA_TRY(e);
    }
    g->comms_[static_cast<size_t>(r)] = std::make_unique<RankComm>(
        g.get(), *api, r, devices[static_cast<size_t>(r)], comms[static_cast<size_t>(r)], s);
  }
  return g;
}

Result<std::unique_ptr<NcclGroup>> NcclGroup::create_rank(const ncclUniqueId& id, int64_t ranks,
                                                          int64_t rank, int device,
                                                          std::chrono::milliseconds deadline) {
  Result<const NcclApi*> api = nccl_api();
  if (!api) return api.status();
  if (rank < 0 || rank >= ranks)
    return DCP_GPU_ERROR("nccl communicator: rank ", rank, " of ", ranks);
  DCP_CUDA_TRY(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  NCCL_TRY(**api, (*api)->CommInitRank(&comm, static_cast<int>(ranks), id, static_cast<int>(rank)));
  cudaStream_t s = nullptr;
  const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    (*api)->CommAbort(comm);
    DCP_CUDA_TRY(e);
  }
  std::unique_ptr<NcclGroup> g(new NcclGroup(ranks, deadline));
  g->comms_[static_cast<size_t>(rank)] =
      std::make_unique<RankComm>(g.get(), *api, rank, device, comm, s);
  return g;
}

Result<ncclUniqueId> NcclGroup::unique_id() {
  Result<const NcclApi*> api = nccl_api();
  if (!api) return api.status();
  ncclUniqueId id;
  NCCL_TRY(**api, (*api)->GetUniqueId(&id));
  return id;
}

DeviceCommunicator& NcclGroup::comm(int64_t rank) { return *comms_[static_cast<size_t>(rank)]; }

void NcclGroup::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) abort_reason_ = why;
  aborted_ = true;
}

bool NcclGroup::released(int64_t rank) const {
  const auto& c = comms_[static_cast<size_t>(rank)];
  return c != nullptr && c->released();
}

}  // namespace dcp::gpu
