#include "gpu/cuda/device_arena.hpp"

#include <cuda_runtime_api.h>

#include <memory>

namespace dcp::gpu {

BlockCache& device_arena(int device, int64_t rank) {
  static std::mutex mu;
  // Never destroyed: a block released after the runtime shut down would fault.
  static auto* arenas = new std::map<std::pair<int, int64_t>, std::unique_ptr<BlockCache>>();
  const std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<BlockCache>& a = (*arenas)[{device, rank}];
  if (a == nullptr)
    a = std::make_unique<BlockCache>(
        [device](size_t bytes) -> void* {
          void* p = nullptr;
          int was = 0;
          cudaGetDevice(&was);
          cudaSetDevice(device);
          const cudaError_t e = cudaMalloc(&p, bytes);
          cudaSetDevice(was);
          if (e == cudaSuccess) return p;
          cudaGetLastError();  // out of memory is not sticky: the next launch must not see it
          return nullptr;
        },
        [device](void* p) {
          int was = 0;
          cudaGetDevice(&was);
          cudaSetDevice(device);
          cudaFree(p);
          cudaSetDevice(was);
        });
  return *a;
}

}  // namespace dcp::gpu
