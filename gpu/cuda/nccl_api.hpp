// nccl_api.hpp — NCCL, loaded at run time.
//
// The NCCL library is large (hundreds of MiB) and absent on many machines that have a GPU and
// its driver; linking it would stop the binary from starting there. So the NCCL communicator
// opens libnccl.so.2 when it is first needed (DCP_NCCL_LIBRARY names another file) and calls it
// through this table of the functions it uses; the types come from the toolkit's nccl.h.
//
//   Result<const NcclApi*> api = nccl_api();
//   if (!api) return api.status();            // "NCCL not loaded: libnccl.so.2: cannot open ..."
//   NCCL_TRY(*api, (*api)->GroupStart());
#pragma once

#include <nccl.h>

#include <string>

#include "gpu/status.hpp"

namespace dcp::gpu {

struct NcclApi {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommInitAll) CommInitAll = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  std::string library;  // the file that was opened
};

// The loaded table, or why NCCL cannot be used (the loader's error, a missing symbol). Loads
// once per process.
Result<const NcclApi*> nccl_api();

// "2.28.9 (libnccl.so.2)" or the reason it is not available, for `dcp-verify info`.
std::string nccl_runtime_text();

// The version of the nccl.h this binary was compiled against ("2.28.9"): the API it calls.
inline std::string nccl_headers_version() {
  return std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
         std::to_string(NCCL_PATCH);
}

inline GpuStatus nccl_status(const NcclApi& api, ncclResult_t r, const char* call, const char* file,
                             int line) {
  if (r == ncclSuccess) return {};
  return GpuStatus(gpu_message(call, ": ", api.GetErrorString(r)), file, line);
}

}  // namespace dcp::gpu

#define NCCL_TRY(api, call) \
  DCP_GPU_TRY(::dcp::gpu::nccl_status((api), (call), #call, __FILE__, __LINE__))
