#include "gpu/cuda/dcp_step_cuda.hpp"

#include <span>
#include <vector>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "gpu/cuda/device_step.hpp"
#include "gpu/cuda/kernels.hpp"

namespace dcp::gpu {
namespace {

// device_step.hpp's Device on a GPU: device memory, the kernels of kernels.cu on the rank's
// stream, and the rank's device communicator.
class CudaDevice {
 public:
  template <class T>
  using Buffer = DeviceBuffer<T>;

  explicit CudaDevice(DeviceCommunicator& comm) : comm_(comm), s_(comm.stream()) {}

  int64_t rank() const { return comm_.rank(); }
  int64_t size() const { return comm_.size(); }
  template <class T>
  Result<Buffer<T>> alloc(size_t n) {
    return DeviceBuffer<T>::create(n, s_);
  }
  template <class T>
  Result<Buffer<T>> upload(const std::vector<T>& host) {
    return DeviceBuffer<T>::upload(std::span<const T>(host), s_);
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
  GpuStatus copy_rows(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch,
                      int64_t width, int64_t rows) {
    DCP_CUDA_TRY(cudaMemcpy2DAsync(dst, bytes(dst_pitch), src, bytes(src_pitch), bytes(width),
                                   static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, s_));
    return {};
  }
  GpuStatus kv_write(const KvCacheSpec& spec, DeviceCacheView cache, int64_t pos0, int64_t len,
                     const float* k, const float* v) {
    return launch_kv_write(spec, cache, pos0, len, k, v, s_);
  }
  GpuStatus partial_attention(const PartialAttentionParams& p) {
    return launch_partial_attention(p, s_);
  }
  GpuStatus agrs_scale(const float* po, const float* pl, const float* lse_all, int64_t tokens,
                       int64_t local_heads, int64_t v_dim, int64_t me, LseBase base,
                       const ReduceSchedule& sched, float* send, float* lse_out) {
    return launch_agrs_scale(po, pl, lse_all, tokens, local_heads, v_dim, me, base, sched, send,
                             lse_out, s_);
  }
  GpuStatus a2a_pack(const float* po, const float* pl, int64_t tokens, int64_t local_heads,
                     int64_t v_dim, int64_t ranks, float* send) {
    return launch_a2a_pack(po, pl, tokens, local_heads, v_dim, ranks, send, s_);
  }
  GpuStatus a2a_combine(const float* recv, int64_t tokens, int64_t local_heads, int64_t v_dim,
                        LseBase base, const ReduceSchedule& sched, float* o, float* lse) {
    return launch_a2a_combine(recv, tokens, local_heads, v_dim, base, sched, o, lse, s_);
  }
  GpuStatus round(float* x, int64_t n, Dtype dtype) { return launch_round(x, n, dtype, s_); }
  GpuStatus all_gather(const float* send, int64_t count, float* recv) {
    return comm_.all_gather(send, count, recv);
  }
  GpuStatus all_to_all(const float* send, int64_t count, float* recv) {
    return comm_.all_to_all(send, count, recv);
  }
  GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv, ReduceOrder order,
                               uint64_t seed) {
    return comm_.reduce_scatter_sum(send, count, recv, order, seed);
  }

 private:
  static size_t bytes(int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); }
  DeviceCommunicator& comm_;
  cudaStream_t s_;
};

}  // namespace

Result<RankStepOutput> cuda_run_tp_rank(DeviceCommunicator& comm, const DcpInputs& in,
                                        const DcpConfig& cfg, int64_t tp_rank) {
  DCP_CUDA_TRY(cudaSetDevice(comm.device()));
  CudaDevice dev(comm);
  return device_step(dev, in, cfg, tp_rank);
}

}  // namespace dcp::gpu
