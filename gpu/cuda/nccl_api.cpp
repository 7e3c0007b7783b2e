#include "gpu/cuda/nccl_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

namespace dcp::gpu {
namespace {

// The SONAME of NCCL 2.x.
constexpr const char* kNcclLibrary = "libnccl.so.2";

Result<NcclApi> load() {
  const char* env = std::getenv("DCP_NCCL_LIBRARY");
  const std::string file = env != nullptr && *env != '\0' ? env : kNcclLibrary;
  void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    return DCP_GPU_ERROR("NCCL not loaded: ", why != nullptr ? why : file.c_str(),
                         " (set DCP_NCCL_LIBRARY or LD_LIBRARY_PATH)");
  }
  NcclApi api;
  api.library = file;
  bool missing = false;
  std::string first_missing;
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (fn == nullptr && !missing) {
      missing = true;
      first_missing = name;
    }
  };
  bind(api.GetVersion, "ncclGetVersion");
  bind(api.GetUniqueId, "ncclGetUniqueId");
  bind(api.CommInitRank, "ncclCommInitRank");
  bind(api.CommInitAll, "ncclCommInitAll");
  bind(api.CommFinalize, "ncclCommFinalize");
  bind(api.CommDestroy, "ncclCommDestroy");
  bind(api.CommAbort, "ncclCommAbort");
  bind(api.CommGetAsyncError, "ncclCommGetAsyncError");
  bind(api.GetErrorString, "ncclGetErrorString");
  bind(api.AllGather, "ncclAllGather");
  bind(api.Send, "ncclSend");
  bind(api.Recv, "ncclRecv");
  bind(api.GroupStart, "ncclGroupStart");
  bind(api.GroupEnd, "ncclGroupEnd");
  if (missing) {
    dlclose(h);
    return DCP_GPU_ERROR("NCCL not loaded: ", file, " has no symbol ", first_missing,
                         " (NCCL >= 2.14 is needed: ncclSend/ncclRecv, ncclCommFinalize)");
  }
  return api;  // the handle stays open for the life of the process
}

}  // namespace

Result<const NcclApi*> nccl_api() {
  static const Result<NcclApi> loaded = load();
  if (!loaded) return loaded.status();
  return &*loaded;
}

std::string nccl_runtime_text() {
  Result<const NcclApi*> api = nccl_api();
  if (!api) return api.status().message();
  int v = 0;
  if ((*api)->GetVersion(&v) != ncclSuccess)
    return "loaded, version unknown (" + (*api)->library + ")";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100) + " (" + (*api)->library + ")";
}

}  // namespace dcp::gpu
