#include "gpu/cuda/cuda_status.hpp"

#include <thread>

namespace dcp::gpu {

// How long a poll sleeps between queries: short against a decode step's milliseconds.
inline constexpr std::chrono::microseconds kPollInterval{20};

GpuStatus wait_stream(cudaStream_t stream, std::chrono::milliseconds deadline, const char* what) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return {};
    if (e != cudaErrorNotReady)
      return DCP_GPU_ERROR(what, ": device work failed: ", cudaGetErrorName(e), ": ",
                           cudaGetErrorString(e));
    if (std::chrono::steady_clock::now() > until)
      return DCP_GPU_ERROR(what, ": device work still running after ", deadline.count(), " ms");
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::optional<std::string> no_device_reason(int64_t needed) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return std::string("no CUDA device: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  if (count < needed)
    return "needs " + std::to_string(needed) + " CUDA device(s); the runtime sees " +
           std::to_string(count);
  return std::nullopt;
}

Result<int> node_local_device(int64_t local_rank, int64_t node_processes) {
  if (const auto why = no_device_reason(1)) return DCP_GPU_ERROR(*why);
  int count = 0;
  DCP_CUDA_TRY(cudaGetDeviceCount(&count));
  if (count > 1 && count < node_processes)
    return DCP_GPU_ERROR("the node runs ", node_processes, " processes but this one sees ", count,
                         " CUDA devices: give each process one (CUDA_VISIBLE_DEVICES) or all "
                         "of them one each");
  return static_cast<int>(local_rank % count);
}

}  // namespace dcp::gpu
