// device_comm.hpp — the collectives of communicator.hpp over device memory.
//
// A DeviceCommunicator connects the N ranks of one DCP group whose buffers live on GPUs. Each
// rank owns a stream; the rank's kernels and its collectives run on it. Counts are floats per
// block and buffers are device pointers laid out by rank, as in communicator.hpp:
//   all_gather          send [count]     -> recv [N, count]
//   all_to_all          send [N, count]  -> recv [N, count]   (block d to rank d)
//   reduce_scatter_sum  send [N, count]  -> recv [count], summed over ranks as SumSpec says
// A collective returns once recv holds its result (so the caller may read or free buffers), or
// with an error when a peer failed or the deadline passed; it never hangs.
//
// Implementations: SingleGpuGroup (comm_single_gpu.hpp: N virtual ranks on one device) and
// NcclGroup (comm_nccl.hpp: one rank per GPU).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "gpu/kernels/merge.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  virtual std::string name() const = 0;
  virtual int device() const = 0;           // the CUDA device this rank runs on
  virtual cudaStream_t stream() const = 0;  // the rank's stream

  virtual GpuStatus all_gather(const float* send, int64_t count, float* recv) = 0;
  virtual GpuStatus all_to_all(const float* send, int64_t count, float* recv) = 0;
  virtual GpuStatus reduce_scatter_sum(const float* send, int64_t count, float* recv,
                                       const SumSpec& how) = 0;
};

}  // namespace dcp::gpu
