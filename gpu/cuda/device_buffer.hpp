// device_buffer.hpp — an owned, zero-filled array in device memory, copied to and from host
// vectors on a stream (each copy waits for the stream, so host data may be reused at once).
//
//   Result<DeviceBuffer<float>> q = DeviceBuffer<float>::upload(host_q, stream);
//   kernel<<<g, b, 0, stream>>>(q->data(), ...);
//   DCP_GPU_TRY(q->download(host_q, stream));
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <utility>

#include "gpu/cuda/cuda_status.hpp"

namespace dcp::gpu {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }

  // n elements, zero-filled (n = 0 holds no memory).
  static Result<DeviceBuffer> create(size_t n, cudaStream_t stream) {
    DeviceBuffer b;
    b.n_ = n;
    if (n == 0) return b;
    DCP_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&b.p_), n * sizeof(T)));
    DCP_CUDA_TRY(cudaMemsetAsync(b.p_, 0, n * sizeof(T), stream));
    DCP_CUDA_TRY(cudaStreamSynchronize(stream));
    return b;
  }
  static Result<DeviceBuffer> upload(std::span<const T> host, cudaStream_t stream) {
    Result<DeviceBuffer> b = create(host.size(), stream);
    if (!b) return b;
    if (!host.empty()) {
      DCP_CUDA_TRY(
          cudaMemcpyAsync(b->p_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream));
      DCP_CUDA_TRY(cudaStreamSynchronize(stream));
    }
    return b;
  }
  // Copies the whole buffer into host (host.size() == size()).
  GpuStatus download(std::span<T> host, cudaStream_t stream) const {
    if (host.size() != n_)
      return DCP_GPU_ERROR("device buffer: download into ", host.size(), " elements; holds ", n_);
    if (n_ == 0) return {};
    DCP_CUDA_TRY(
        cudaMemcpyAsync(host.data(), p_, host.size_bytes(), cudaMemcpyDeviceToHost, stream));
    DCP_CUDA_TRY(cudaStreamSynchronize(stream));
    return {};
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace dcp::gpu
