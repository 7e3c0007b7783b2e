// device_arena.hpp — each rank's device memory, kept between steps: a step's buffers reuse the
// blocks earlier steps left, so that once the shapes have been seen a step calls neither
// cudaMalloc nor cudaFree (each of which synchronizes the whole device, serializing the virtual
// ranks that share it, about 30 times a step).
//
//   BlockCache& arena = device_arena(device, tp_rank);
//   const ArenaLease lease{&arena, arena.begin_step()};
//   Result<DeviceBuffer<float>> b = DeviceBuffer<float>::create(n, stream, lease);
//   ...                                      // b's destructor gives its block back (pending)
//   if (wait_stream(stream, ...)) arena.settle(lease.step);   // the stream is idle: reusable
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
// and blocks given back by a step whose work may still read them (pending until that step is
// settled, its stream idle).
class BlockCache {
 public:
  struct Block {
    void* p = nullptr;  // nullptr: out of memory
    size_t bytes = 0;   // at least what was asked
  };
  using Allocate = std::function<void*(size_t bytes)>;  // nullptr when out of memory
  using Release = std::function<void(void* p)>;
  BlockCache(Allocate allocate, Release release)
      : allocate_(std::move(allocate)), release_(std::move(release)) {}
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  ~BlockCache() {
    for (const auto& [bytes, p] : free_) release_(p);
  }

  // A token for the blocks of one step (never reused, unlike a stream's handle).
  uint64_t begin_step() {
    const std::lock_guard<std::mutex> lock(mu_);
    return ++steps_;
  }
  // A block of at least `bytes`: the smallest free block of at most kMaxSlack times that, else
  // a new one. When the allocation fails, every free block is released and it is tried once
  // more (the allocator itself may reclaim elsewhere first).
  Block take(size_t bytes) {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= kMaxSlack * bytes) {
      const Block b{it->second, it->first};
      free_.erase(it);
      return b;
    }
    void* p = allocate_(bytes);
    if (p == nullptr && !free_.empty()) {
      release_free();
      p = allocate_(bytes);
    }
    if (p == nullptr) return {};
    ++allocations_;
    return {p, bytes};
  }
  // A block taken from this cache, given back by `step`: reused only after settle(step).
  void give(Block b, uint64_t step) {
    const std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({b, step});
  }
  // `step`'s work is done: the blocks it gave back may be reused.
  void settle(uint64_t step) {
    const std::lock_guard<std::mutex> lock(mu_);
    std::vector<Pending> still;
    for (const Pending& q : pending_) {
      if (q.step == step)
        free_.emplace(q.block.bytes, q.block.p);
      else
        still.push_back(q);
    }
    pending_ = std::move(still);
  }
  // Releases the free blocks unless another thread holds the cache (a sibling rank short of
  // memory asks; waiting could deadlock two ranks asking each other). Whether it did.
  bool release_free_if_idle() {
    const std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    release_free();
    return true;
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
    Block block;
    uint64_t step;
  };
  void release_free() {  // with mu_ held
    for (const auto& [size, p] : free_) release_(p);
    free_.clear();
  }
  Allocate allocate_;
  Release release_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // by size
  std::vector<Pending> pending_;
  int64_t allocations_ = 0;
  uint64_t steps_ = 0;
};

// Where a buffer's block comes from and goes back to: a rank's arena, for one step.
struct ArenaLease {
  BlockCache* cache = nullptr;  // nullptr: cudaMalloc and cudaFree
  uint64_t step = 0;
};

// The arena of TP rank `rank` on `device` in this process: cudaMalloc'd blocks (plain device
// memory, which NCCL's same-process peer path can reach), created on first use and kept until
// the process ends (never destroyed: the runtime may be gone by static destruction). Short of
// memory, it first releases the free blocks of the device's other arenas and trims the device's
// stream-ordered pool, then tries again; a sticky fault met allocating ends the process
// (cuda_status.hpp).
BlockCache& device_arena(int device, int64_t rank);

}  // namespace dcp::gpu
