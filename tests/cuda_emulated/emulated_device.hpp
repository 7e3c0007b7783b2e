// emulated_device.hpp — the CUDA backend's step on the CPU: device_step.hpp's Device in host
// memory, each launcher of kernels.hpp replaced by its grid run thread by thread (the attention
// blocks through the block emulator), the collectives through the threads communicator.
//
// The kernel bodies (gpu/kernels/bodies.hpp), the launchers' checks and the step's orchestration
// (device_step.hpp) are the code the GPU runs; this file only stands in for the hardware, with
// the same grids as kernels.cu. What it cannot vouch for: device memory and copies, streams,
// the shuffle-based block max, the single-GPU and NCCL communicators.
//
//   Result<GroupRun> run = run_dcp_emulated(inputs, cfg, /*block_threads=*/kAttentionThreads);
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/comm/communicator.hpp"
#include "gpu/host/host_device.hpp"
#include "gpu/kernels/bodies.hpp"
#include "gpu/kernels/launch_checks.hpp"
#include "gpu/run_threads.hpp"
#include "tests/cuda_emulated/block_emulator.hpp"

namespace dcp::gpu::emu {

class EmulatedDevice : public HostDevice {
 public:
  using Schedule = ReduceSchedule;  // the CUDA kernels' capacity

  // blocks: the emulator of the attention and combine blocks (its thread count and order are
  // the blocks').
  EmulatedDevice(Communicator& comm, BlockEmulator& blocks) : HostDevice(&comm), blocks_(blocks) {}

  // The grids of kernels.cu, thread by thread.
  GpuStatus kv_write(const body::KvWrite& a);
  GpuStatus partial_attention(const PartialAttentionParams& p);
  GpuStatus agrs_scale(const body::AgRsScale<Schedule>& a);
  GpuStatus a2a_pack(const body::A2aPack& a);
  GpuStatus a2a_combine(const body::A2aCombine<Schedule>& a);
  // As the NCCL communicator does it: All-to-All, then the ordered-sum kernel's body.
  GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv, const SumSpec& how);

 private:
  // A grid of `blocks` blocks whose threads never meet at a barrier, run thread by thread.
  template <class F>
  void grid(int64_t blocks, F&& thread) {
    for (int64_t b = 0; b < blocks; ++b)
      for (int t = 0; t < blocks_.threads(); ++t) thread(b, t, blocks_.threads());
  }
  BlockEmulator& blocks_;
};

// The whole TP group: every rank a thread with the threads communicator, each running
// device_step on an EmulatedDevice whose blocks have `block_threads` threads run in `order` (the
// GPU's blocks have kAttentionThreads; fewer run faster and need Dv <= block_threads *
// kMaxVPerThread).
Result<GroupRun> run_dcp_emulated(const DcpInputs& in, const DcpConfig& cfg, int block_threads,
                                  ThreadOrder order);

}  // namespace dcp::gpu::emu
