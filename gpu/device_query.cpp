#include "gpu/device_query.hpp"

#ifdef DCP_HAVE_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace dcp::gpu {

DeviceReport query_devices() {
  DeviceReport r;
#ifdef DCP_HAVE_CUDA_RUNTIME
  r.runtime_linked = true;
  cudaRuntimeGetVersion(&r.runtime_version);
  cudaDriverGetVersion(&r.driver_version);  // 0 when no driver is installed
  int count = 0;
  const cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess) {
    r.why = std::string(cudaGetErrorName(st)) + ": " + cudaGetErrorString(st);
    return r;
  }
  if (count == 0) r.why = "the CUDA runtime reports 0 devices";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    r.devices.push_back({i, p.name, p.major, p.minor, p.multiProcessorCount,
                         static_cast<int64_t>(p.totalGlobalMem)});
  }
#else
  r.why = "this binary was built without the CUDA runtime (DCP_CUDA=OFF or no nvcc)";
#endif
  return r;
}

}  // namespace dcp::gpu
