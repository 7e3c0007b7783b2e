// run_cuda.hpp — the whole attention TP group on GPUs from one process (the CUDA backend's
// counterpart of run_threads.hpp): every TP rank a host thread driving its device rank.
//
//   single_gpu: every DCP group is a SingleGpuGroup of N virtual ranks on device `device`
//               (a one-GPU machine runs the whole path);
//   nccl:       DCP group g is an NcclGroup over devices g N .. g N + N - 1 (tp devices needed).
// The result is assembled as run_dcp_threads assembles it, so the same judge serves both.
//
//   Result<GroupRun> run = run_dcp_cuda(inputs, cfg, DeviceTransport::single_gpu);
#pragma once

#include "gpu/dcp_step.hpp"
#include "gpu/run_threads.hpp"

namespace dcp::gpu {

enum class DeviceTransport { single_gpu, nccl };

// Fails with the runtime's reason when the devices are missing ("no CUDA device: ...").
Result<GroupRun> run_dcp_cuda(const DcpInputs& in, const DcpConfig& cfg, DeviceTransport transport,
                              int device = 0);

}  // namespace dcp::gpu
