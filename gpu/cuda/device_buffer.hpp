// device_buffer.hpp — an owned, zero-filled array in device memory, copied to and from host
// vectors on a stream (each copy waits for the stream, so host data may be reused at once); its
// memory cudaMalloc'd, or a block of a rank's arena (device_arena.hpp) that a step reuses.
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
#include "gpu/cuda/device_arena.hpp"

namespace dcp::gpu {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(o.n_), block_(o.block_), lease_(o.lease_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(block_, o.block_);
    std::swap(lease_, o.lease_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_ == nullptr) return;
    if (lease_.cache != nullptr)
      lease_.cache->give({p_, block_}, lease_.step);  // reusable once the step is settled
    else
      cudaFree(p_);
  }

  // n elements, zero-filled on `stream` (n = 0 holds no memory): a block of the lease's arena
  // (it goes back there, pending until the caller settles the step), or, without one, cudaMalloc.
  static Result<DeviceBuffer> create(size_t n, cudaStream_t stream, ArenaLease lease = {}) {
    DeviceBuffer b;
    b.n_ = n;
    if (n == 0) return b;
    if (lease.cache == nullptr) {
      DCP_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&b.p_), n * sizeof(T)));
      DCP_CUDA_TRY(cudaMemsetAsync(b.p_, 0, n * sizeof(T), stream));
      DCP_CUDA_TRY(cudaStreamSynchronize(stream));
      return b;
    }
    const BlockCache::Block block = lease.cache->take(n * sizeof(T));
    if (block.p == nullptr)
      return DCP_GPU_ERROR("device buffer: out of device memory for ", n * sizeof(T),
                           " bytes (the device's arenas released their free blocks and the "
                           "allocation was tried again)");
    b.p_ = static_cast<T*>(block.p);
    b.block_ = block.bytes;
    b.lease_ = lease;
    // Stream-ordered: whatever reads the buffer runs on this stream after it, or waits for it.
    DCP_CUDA_TRY(cudaMemsetAsync(b.p_, 0, n * sizeof(T), stream));
    return b;
  }
  static Result<DeviceBuffer> upload(std::span<const T> host, cudaStream_t stream,
                                     ArenaLease lease = {}) {
    Result<DeviceBuffer> b = create(host.size(), stream, lease);
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
  size_t block_ = 0;  // the arena block's bytes (at least n_ * sizeof(T))
  ArenaLease lease_;  // where the block goes back; no cache: cudaFree
};

}  // namespace dcp::gpu
