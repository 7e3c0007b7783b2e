// emulated_device.hpp — the CUDA backend's step on the CPU: device_step.hpp's Device in host
// memory, each launcher of kernels.hpp replaced by its grid run thread by thread (the attention
// blocks through the block emulator), the collectives through the threads communicator.
//
// The kernel bodies (kernel_bodies.hpp), the launchers' checks and the step's orchestration
// (device_step.hpp) are the code the GPU runs; this file only stands in for the hardware, with
// the same grids as kernels.cu. What it cannot vouch for: device memory and copies, streams,
// the shuffle-based block max, the single-GPU and NCCL communicators.
//
//   Result<GroupRun> run = run_dcp_emulated(inputs, cfg, /*block_threads=*/kAttentionThreads);
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/communicator.hpp"
#include "gpu/cuda/kernel_bodies.hpp"
#include "gpu/cuda/launch_checks.hpp"
#include "gpu/run_threads.hpp"
#include "tests/cuda_emulated/block_emulator.hpp"

namespace dcp::gpu::emu {

class EmulatedDevice {
 public:
  template <class T>
  using Buffer = std::vector<T>;

  // blocks: the emulator of the attention and combine blocks (its thread count and order are
  // the blocks').
  EmulatedDevice(Communicator& comm, BlockEmulator& blocks) : comm_(comm), blocks_(blocks) {}

  int64_t rank() const { return comm_.rank(); }
  int64_t size() const { return comm_.size(); }
  template <class T>
  Result<Buffer<T>> alloc(size_t n) {
    return Buffer<T>(n, T{});
  }
  template <class T>
  Result<Buffer<T>> upload(const std::vector<T>& host) {
    return host;
  }
  template <class T>
  Result<std::vector<T>> download(const Buffer<T>& b) {
    return b;
  }
  GpuStatus sync() { return {}; }
  GpuStatus copy_rows(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch,
                      int64_t width, int64_t rows);
  GpuStatus kv_write(const KvCacheSpec& spec, DeviceCacheView cache, int64_t pos0, int64_t len,
                     const float* k, const float* v);
  GpuStatus partial_attention(const PartialAttentionParams& p);
  GpuStatus agrs_scale(const float* po, const float* pl, const float* lse_all, int64_t tokens,
                       int64_t local_heads, int64_t v_dim, int64_t me, LseBase base,
                       const ReduceSchedule& sched, float* send, float* lse_out);
  GpuStatus a2a_pack(const float* po, const float* pl, int64_t tokens, int64_t local_heads,
                     int64_t v_dim, int64_t ranks, float* send);
  GpuStatus a2a_combine(const float* recv, int64_t tokens, int64_t local_heads, int64_t v_dim,
                        LseBase base, const ReduceSchedule& sched, float* o, float* lse);
  GpuStatus round(float* x, int64_t n, Dtype dtype);
  GpuStatus all_gather(const float* send, int64_t count, float* recv);
  GpuStatus all_to_all(const float* send, int64_t count, float* recv);
  // As the NCCL communicator does it: All-to-All, then the ordered-sum kernel's body.
  GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv, ReduceOrder order,
                               uint64_t seed);

 private:
  // A grid of `blocks` blocks whose threads never meet at a barrier, run thread by thread.
  template <class F>
  void grid(int64_t blocks, F&& thread) {
    for (int64_t b = 0; b < blocks; ++b)
      for (int t = 0; t < blocks_.threads(); ++t) thread(b, t, blocks_.threads());
  }
  Communicator& comm_;
  BlockEmulator& blocks_;
};

// The whole TP group: every rank a thread with the threads communicator, each running
// device_step on an EmulatedDevice whose blocks have `block_threads` threads run in `order` (the
// GPU's blocks have kAttentionThreads; fewer run faster and need Dv <= block_threads *
// kMaxVPerThread).
Result<GroupRun> run_dcp_emulated(const DcpInputs& in, const DcpConfig& cfg, int block_threads,
                                  ThreadOrder order);

}  // namespace dcp::gpu::emu
