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

#include <optional>
#include <string_view>

#include "gpu/dcp_step.hpp"
#include "gpu/run_threads.hpp"

namespace dcp::gpu {

enum class DeviceTransport { single_gpu, nccl };

inline std::string_view transport_name(DeviceTransport t) {
  return t == DeviceTransport::single_gpu ? "single-gpu" : "nccl";
}
inline std::optional<DeviceTransport> parse_transport(std::string_view s) {
  if (s == "single-gpu") return DeviceTransport::single_gpu;
  if (s == "nccl") return DeviceTransport::nccl;
  return std::nullopt;
}

// Fails with the runtime's reason when the devices are missing ("no CUDA device: ...").
Result<GroupRun> run_dcp_cuda(const DcpInputs& in, const DcpConfig& cfg, DeviceTransport transport,
                              int device = 0);

}  // namespace dcp::gpu
