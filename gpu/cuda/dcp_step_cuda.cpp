#include "gpu/cuda/dcp_step_cuda.hpp"

#include <cstdint>
#include <span>
#include <vector>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/device_arena.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/device_step.hpp"

namespace dcp::gpu {
namespace {

// device_step.hpp's Device on a GPU: device memory, the kernels of kernels.cu on the rank's
// stream, and the rank's device communicator.
class CudaDevice {
 public:
  template <class T>
  using Buffer = DeviceBuffer<T>;
  using Schedule = ReduceSchedule;

  // The buffers of the step come from the rank's arena; once they are gone (they are the
  // step's locals) and the stream is idle, their blocks are reusable. If the stream never goes
  // idle (a hung kernel) they stay pending: never reused while work may read them.
  CudaDevice(DeviceCommunicator& comm, int64_t tp_rank)
      : comm_(comm),
        s_(comm.stream()),
        arena_(device_arena(comm.device(), tp_rank)),
        lease_{&arena_, arena_.begin_step()} {}
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;
  ~CudaDevice() {
    if (wait_stream(s_, kDeviceWorkDeadline, "step end")) arena_.settle(lease_.step);
  }

  int64_t rank() const { return comm_.rank(); }
  int64_t size() const { return comm_.size(); }
  template <class T>
  Result<Buffer<T>> alloc(size_t n) {
    return DeviceBuffer<T>::create(n, s_, lease_);
  }
  template <class T>
  Result<Buffer<T>> upload(const std::vector<T>& host) {
    return DeviceBuffer<T>::upload(std::span<const T>(host), s_, lease_);
  }
  template <class T>
  Result<std::vector<T>> download(const Buffer<T>& b) {
    std::vector<T> host(b.size());
    DCP_GPU_TRY(b.download(host, s_));
    return host;
  }
  GpuStatus sync() {
    DCP_CUDA_TRY(cudaStreamSynchronize(s_));
    return {};
  }
  GpuStatus copy_rows(const RowCopy& c) {
    DCP_CUDA_TRY(cudaMemcpy2DAsync(c.dst, bytes(c.dst_pitch), c.src, bytes(c.src_pitch),
                                   bytes(c.width), static_cast<size_t>(c.rows),
                                   cudaMemcpyDeviceToDevice, s_));
    return {};
  }
  GpuStatus kv_write(const body::KvWrite& a) { return launch_kv_write(a, s_); }
  GpuStatus partial_attention(const PartialAttentionParams& p) {
    return launch_partial_attention(p, s_);
  }
  GpuStatus agrs_scale(const body::AgRsScale<Schedule>& a) { return launch_agrs_scale(a, s_); }
  GpuStatus a2a_pack(const body::A2aPack& a) { return launch_a2a_pack(a, s_); }
  GpuStatus a2a_combine(const body::A2aCombine<Schedule>& a) { return launch_a2a_combine(a, s_); }
  GpuStatus round(float* x, int64_t n, StorageFormat dtype) {
    return launch_round(x, n, dtype, s_);
  }
  GpuStatus all_gather(const float* send, int64_t count, float* recv) {
    return comm_.all_gather(send, count, recv);
  }
  GpuStatus all_to_all(const float* send, int64_t count, float* recv) {
    return comm_.all_to_all(send, count, recv);
  }
  GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv, const SumSpec& how) {
    return comm_.reduce_scatter_sum(send, count, recv, how);
  }

 private:
  static size_t bytes(int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); }
  DeviceCommunicator& comm_;
  cudaStream_t s_;
  BlockCache& arena_;
  ArenaLease lease_;
};

}  // namespace

Result<RankStepOutput> cuda_run_tp_rank(DeviceCommunicator& comm, const DcpInputs& in,
                                        const DcpConfig& cfg, int64_t tp_rank) {
  DCP_CUDA_TRY(cudaSetDevice(comm.device()));
  // The default pool keeps what it was given (its release threshold at the maximum): a
  // threshold of 0 would return scratch memory to the driver at every synchronization, and
  // every later step would map it again.
  cudaMemPool_t pool;
  DCP_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, comm.device()));
  uint64_t keep_all = UINT64_MAX;
  DCP_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  CudaDevice dev(comm, tp_rank);
  return device_step(dev, in, cfg, tp_rank);
}

}  // namespace dcp::gpu
