#include "gpu/cuda/device_arena.hpp"

#include <cuda_runtime_api.h>

#include <memory>

#include "gpu/cuda/cuda_status.hpp"

namespace dcp::gpu {
namespace {

// Every arena of the process, by (device, TP rank). Never destroyed: a block released after the
// runtime shut down would fault.
struct Arenas {
  std::mutex mu;
  std::map<std::pair<int, int64_t>, std::unique_ptr<BlockCache>> by_rank;
};

Arenas& arenas() {
  static auto* a = new Arenas();
  return *a;
}

// Makes `device` current for `fn`, then restores the caller's device.
template <class Fn>
auto on_device(int device, Fn&& fn) {
  int was = 0;
  cudaGetDevice(&was);
  cudaSetDevice(device);
  auto r = fn();
  cudaSetDevice(was);
  return r;
}

// cudaMalloc of `bytes` on `device`; nullptr when out of memory (the error cleared: it is not
// sticky, and the next launch must not see it). A sticky fault ends the process.
void* try_malloc(int device, size_t bytes) {
  return on_device(device, [&]() -> void* {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) return p;
    if (sticky_error(e)) end_on_sticky_error(e, "cudaMalloc (arena)", nullptr, __FILE__, __LINE__);
    cudaGetLastError();
    return nullptr;
  });
}

// Memory for `self` on `device` once the others have let go: the free blocks of the device's
// other arenas (those not busy), and what the stream-ordered pool keeps.
void* reclaim_and_malloc(int device, const BlockCache* self, size_t bytes) {
  std::vector<BlockCache*> siblings;
  {
    const std::lock_guard<std::mutex> lock(arenas().mu);
    for (auto& [key, cache] : arenas().by_rank)
      if (key.first == device && cache.get() != self) siblings.push_back(cache.get());
  }
  for (BlockCache* c : siblings) c->release_free_if_idle();
  on_device(device, [&] {
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
    cudaGetLastError();
    return 0;
  });
  return try_malloc(device, bytes);
}

}  // namespace

BlockCache& device_arena(int device, int64_t rank) {
  const std::lock_guard<std::mutex> lock(arenas().mu);
  std::unique_ptr<BlockCache>& a = arenas().by_rank[{device, rank}];
  if (a == nullptr) {
    auto self = std::make_shared<const BlockCache*>(nullptr);
    a = std::make_unique<BlockCache>(
        [device, self](size_t bytes) -> void* {
          void* p = try_malloc(device, bytes);
          return p != nullptr ? p : reclaim_and_malloc(device, *self, bytes);
        },
        [device](void* p) { on_device(device, [&] { return cudaFree(p); }); });
    *self = a.get();
  }
  return *a;
}

}  // namespace dcp::gpu
