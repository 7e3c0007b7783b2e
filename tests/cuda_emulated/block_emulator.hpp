// block_emulator.hpp — one CUDA thread block on the CPU, for running the kernel bodies of
// gpu/kernels/bodies.hpp in tests.
//
// The block's threads are cooperative fibers (ucontext) on the calling thread: each runs until
// it reaches sync() or returns, then the next, in ascending or descending thread order (a race
// between two threads inside one barrier phase gives different answers in the two orders);
// once every thread waits at sync() they are all released, as __syncthreads() releases a block. A
// block whose threads do not all meet the same barriers (one returned while another waits) is an
// error, as it is undefined on a GPU. max(v) is the block-wide maximum, built on sync() as the
// device's shuffles-and-shared-memory version is built on __syncthreads().
//
//   BlockEmulator blocks(/*threads=*/128, ThreadOrder::descending);
//   GpuStatus st = blocks.run([&](EmulatedThread& t) { body::partial_attention(t, p, ...); });
#pragma once

#include <ucontext.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu/kernels/bodies.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu::emu {

class BlockEmulator;

enum class ThreadOrder { ascending, descending };

// What a kernel body sees of its block (the Block of gpu/kernels/bodies.hpp).
class EmulatedThread {
 public:
  int tid() const { return tid_; }
  int size() const;
  void sync();
  float max(float v);
  // As a GPU thread: kMaxVPerThread output components in a local array.
  int64_t v_slots(int64_t) const { return kMaxVPerThread; }
  float* accumulators(float* local) { return local; }

 private:
  friend class BlockEmulator;

  enum class ThreadOrder { ascending, descending };
  EmulatedThread(BlockEmulator* b, int tid) : b_(b), tid_(tid) {}
  BlockEmulator* b_;
  int tid_;
};

class BlockEmulator {
 public:
  explicit BlockEmulator(int threads, ThreadOrder order = ThreadOrder::ascending);
  ~BlockEmulator();
  BlockEmulator(const BlockEmulator&) = delete;
  BlockEmulator& operator=(const BlockEmulator&) = delete;
  int threads() const { return n_; }
  // Runs body on every thread of one block; an error when the threads' barriers diverge or a
  // thread's body throws.
  GpuStatus run(const std::function<void(EmulatedThread&)>& body);

 private:
  friend class EmulatedThread;
  enum class State { ready, waiting, done };
  static void trampoline();
  [[gnu::noinline]] bool make_fiber(int i);
  void yield_to_scheduler();

  int n_;
  ThreadOrder order_;
  std::string thrown_;  // what a body threw, if one did
  std::vector<std::unique_ptr<char[]>> stacks_;
  std::vector<ucontext_t> ctx_;
  std::vector<State> state_;
  std::vector<float> slots_;  // max(): one value per thread
  ucontext_t scheduler_{};
  int current_ = 0;
  const std::function<void(EmulatedThread&)>* body_ = nullptr;
};

}  // namespace dcp::gpu::emu
