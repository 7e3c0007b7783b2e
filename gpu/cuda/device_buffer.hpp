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
      : p_(std::exchange(o.p_, nullptr)),
        n_(o.n_),
        block_(o.block_),
        arena_(o.arena_),
        stream_(o.stream_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(block_, o.block_);
    std::swap(arena_, o.arena_);
    std::swap(stream_, o.stream_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_ == nullptr) return;
    if (arena_ != nullptr)
      arena_->give(p_, block_, stream_);  // reusable once the stream is idle (settle)
    else
      cudaFree(p_);
  }

  // n elements, zero-filled on `stream` (n = 0 holds no memory): from `arena` when given (its
  // block goes back there, pending until the caller settles the stream), else cudaMalloc'd.
  static Result<DeviceBuffer> create(size_t n, cudaStream_t stream, BlockCache* arena = nullptr) {
    DeviceBuffer b;
    b.n_ = n;
    if (n == 0) return b;
    if (arena != nullptr) {
      void* p = arena->take(n * sizeof(T), &b.block_);
      if (p == nullptr)
        return DCP_GPU_ERROR("device buffer: out of device memory for ", n * sizeof(T),
                             " bytes (the arena released its free blocks and tried again)");
      b.p_ = static_cast<T*>(p);
      b.arena_ = arena;
      b.stream_ = stream;
    } else {
      DCP_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&b.p_), n * sizeof(T)));
      DCP_CUDA_TRY(cudaMemsetAsync(b.p_, 0, n * sizeof(T), stream));
      DCP_CUDA_TRY(cudaStreamSynchronize(stream));
      return b;
    }
    // Stream-ordered: whatever reads the buffer runs on this stream after it, or waits for it.
    DCP_CUDA_TRY(cudaMemsetAsync(b.p_, 0, n * sizeof(T), stream));
    return b;
  }
  static Result<DeviceBuffer> upload(std::span<const T> host, cudaStream_t stream,
                                     BlockCache* arena = nullptr) {
    Result<DeviceBuffer> b = create(host.size(), stream, arena);
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
  size_t block_ = 0;               // the arena block's bytes (at least n_ * sizeof(T))
  BlockCache* arena_ = nullptr;    // where the block goes back; nullptr: cudaFree
  cudaStream_t stream_ = nullptr;  // the stream whose work may still use it
};

}  // namespace dcp::gpu
