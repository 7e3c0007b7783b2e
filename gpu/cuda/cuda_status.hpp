// cuda_status.hpp — CUDA runtime errors as GpuStatus values, and waits that cannot hang.
//
// Every runtime call of the CUDA backend goes through DCP_CUDA_TRY, which turns a failure into
// a one-line error naming the call, the runtime's error name and its text, at the caller's
// file:line; a sticky fault (the context is lost) ends the process at once, naming the kernel
// last launched. Waits for device work poll with a deadline instead of blocking forever.
//
//   DCP_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
//   DCP_GPU_TRY(wait_stream(stream, kDefaultCollectiveDeadline, "all_gather"));
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <optional>
#include <string>

#include "gpu/status.hpp"

namespace dcp::gpu {

// The exit code of a process ended by a sticky CUDA fault (sysexits' EX_SOFTWARE): distinct
// from a failed check (1), bad input (2), a time-out (124) and Ctrl-C (130).
inline constexpr int kExitStickyFault = 70;

// Whether a CUDA error leaves the process's context unusable, so that every later CUDA call of
// the process fails too: a fault inside a kernel (an illegal or misaligned address, an illegal
// instruction, a device-side assert, a trap, a hardware stack error, an invalid program
// counter, a launch failure or time-out).
bool sticky_error(cudaError_t e);

// Records a kernel launch on `stream` (`kernel` a literal, such as "partial attention"), so that
// a sticky fault found later names the kernel most likely at fault.
void note_launch(const char* kernel, cudaStream_t stream);

// Ends the process on a sticky error: one line on stderr naming the error, the call that found
// it and its file:line, and the last kernel launched on `stream` (nullptr: in the process), then
// exit kExitStickyFault. A caller that went on would run on a lost context and report every
// later failure as its own, and a property would shrink to a wrong case.
[[noreturn]] void end_on_sticky_error(cudaError_t e, const char* call, cudaStream_t stream,
                                      const char* file, int line);

inline GpuStatus cuda_status(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return {};
  if (sticky_error(e)) end_on_sticky_error(e, call, nullptr, file, line);
  return GpuStatus(gpu_message(call, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e)), file,
                   line);
}

// How long a rank may wait for its own queued kernels (a long context on the simple kernels
// takes seconds); waits for peers use the communicators' collective deadline.
inline constexpr std::chrono::milliseconds kDeviceWorkDeadline{600000};

// Waits until the stream's work is done, polling; a fault in that work is returned as an error
// (a sticky one ends the process: end_on_sticky_error), and so is work still running after
// `deadline` (named by `what`).
// `file` and `line` default to the caller's, so a fault names where it was waited for.
GpuStatus wait_stream(cudaStream_t stream, std::chrono::milliseconds deadline, const char* what,
                      const char* file = __builtin_FILE(), int line = __builtin_LINE());

// Why this process cannot run on `needed` CUDA devices (no driver, no device, too few), or
// nothing when it can.
std::optional<std::string> no_device_reason(int64_t needed);

// The device a process runs on, given its node-local rank among node_processes processes: the
// rank modulo the devices it sees. So a launcher that gives each process one visible GPU (the
// runtime sees 1) and one that shows every process all of the node's GPUs (it sees at least
// node_processes) both work; fewer devices than that, but more than one, is an error naming
// both counts.
Result<int> node_local_device(int64_t local_rank, int64_t node_processes);

}  // namespace dcp::gpu

#define DCP_CUDA_TRY(call) DCP_GPU_TRY(::dcp::gpu::cuda_status((call), #call, __FILE__, __LINE__))
