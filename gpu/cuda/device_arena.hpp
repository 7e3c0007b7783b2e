// device_arena.hpp — each rank's device memory, kept between steps: a step's buffers reuse the
// blocks earlier steps left, so that once the shapes have been seen a step calls neither
// cudaMalloc nor cudaFree (each of which synchronizes the whole device, serializing the virtual
// ranks that share it, about 30 times a step).
//
//   BlockCache& arena = device_arena(device, tp_rank);
//   Result<DeviceBuffer<float>> b = DeviceBuffer<float>::create(n, stream, &arena);
//   ...                                    // b's destructor gives its block back (pending)
//   DCP_GPU_TRY(wait_stream(stream, ...));  arena.settle(stream);   // now reusable
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace dcp::gpu {

// The bookkeeping, free of CUDA so that it is tested without a device: blocks free for reuse,
// and blocks given back while the work of a stream may still read them (pending until that
// stream is idle: settle).
class BlockCache {
 public:
  using Allocate = std::function<void*(size_t bytes)>;  // nullptr when out of memory
  using Release = std::function<void(void* p)>;
  BlockCache(Allocate allocate, Release release)
      : allocate_(std::move(allocate)), release_(std::move(release)) {}
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  ~BlockCache() {
    for (const auto& [bytes, p] : free_) release_(p);
  }

  // A block of at least `bytes` (its size in *got): the smallest free block of at most
  // kMaxSlack times that, else a new one. When the allocation fails, every free block is
  // released and it is tried once more; nullptr: out of memory even then.
  void* take(size_t bytes, size_t* got) {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= kMaxSlack * bytes) {
      *got = it->first;
      void* p = it->second;
      free_.erase(it);
      return p;
    }
    void* p = allocate_(bytes);
    if (p == nullptr && !free_.empty()) {
      for (const auto& [size, q] : free_) release_(q);
      free_.clear();
      p = allocate_(bytes);
    }
    if (p == nullptr) return nullptr;
    ++allocations_;
    *got = bytes;
    return p;
  }
  // A block taken from this cache, given back by work queued on `stream` (a token: the cache
  // never calls CUDA): reused only after settle(stream).
  void give(void* p, size_t bytes, const void* stream) {
    const std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({p, bytes, stream});
  }
  // `stream` is idle: the blocks it gave back may be reused.
  void settle(const void* stream) {
    const std::lock_guard<std::mutex> lock(mu_);
    std::vector<Pending> still;
    for (const Pending& b : pending_) {
      if (b.stream == stream)
        free_.emplace(b.bytes, b.p);
      else
        still.push_back(b);
    }
    pending_ = std::move(still);
  }
  // Blocks allocated so far (a step whose shapes were seen before adds none).
  int64_t allocations() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return allocations_;
  }

 private:
  // A free block serves a request of at least half its size: a large block is not spent on a
  // small buffer, and sizes that differ a little between steps (another sequence length) reuse.
  static constexpr size_t kMaxSlack = 2;
  struct Pending {
    void* p;
    size_t bytes;
    const void* stream;
  };
  Allocate allocate_;
  Release release_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // by size
  std::vector<Pending> pending_;
  int64_t allocations_ = 0;
};

// The arena of TP rank `rank` on `device` in this process: cudaMalloc'd blocks (plain device
// memory, which NCCL's same-process peer path can reach), created on first use and kept until
// the process ends (never destroyed: the runtime may be gone by static destruction).
BlockCache& device_arena(int device, int64_t rank);

}  // namespace dcp::gpu
