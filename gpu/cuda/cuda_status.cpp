#include "gpu/cuda/cuda_status.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace dcp::gpu {

// How long a poll sleeps between queries: short against a decode step's milliseconds.
inline constexpr std::chrono::microseconds kPollInterval{20};

bool sticky_error(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

namespace {

// The last kernel launched on each stream, and in the process (kernel names are literals).
struct Launches {
  std::mutex mu;
  std::map<cudaStream_t, const char*> by_stream;
  const char* last = nullptr;
  cudaStream_t last_stream = nullptr;
};

Launches& launches() {
  static Launches l;
  return l;
}

}  // namespace

void note_launch(const char* kernel, cudaStream_t stream) {
  Launches& l = launches();
  const std::lock_guard<std::mutex> lock(l.mu);
  l.by_stream[stream] = kernel;
  l.last = kernel;
  l.last_stream = stream;
}

void end_on_sticky_error(cudaError_t e, const char* call, cudaStream_t stream, const char* file,
                         int line) {
  std::string kernel = "no kernel launched yet";
  {
    Launches& l = launches();
    const std::lock_guard<std::mutex> lock(l.mu);
    const auto on = stream != nullptr ? l.by_stream.find(stream) : l.by_stream.end();
    if (on != l.by_stream.end())
      kernel = std::string("the last kernel launched on its stream: ") + on->second;
    else if (l.last != nullptr)
      kernel = std::string("the last kernel launched in the process: ") + l.last;
  }
  std::fprintf(stderr,
               "dcp-verify: sticky CUDA fault %s (%s) found by %s at %s:%d; %s. The CUDA context "
               "is lost: the process ends (exit %d)\n",
               cudaGetErrorName(e), cudaGetErrorString(e), call, file, line, kernel.c_str(),
               kExitStickyFault);
  std::fflush(nullptr);  // what the process printed so far reaches its file or pipe
  std::_Exit(kExitStickyFault);
}

GpuStatus wait_stream(cudaStream_t stream, std::chrono::milliseconds deadline, const char* what,
                      const char* file, int line) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return {};
    if (sticky_error(e)) end_on_sticky_error(e, what, stream, file, line);
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
