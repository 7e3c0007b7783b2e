// device_query.hpp — what the CUDA runtime linked into this binary sees: its version, the
// driver's, and every device. Without a driver (or without a GPU) the query says why instead;
// nothing here needs a GPU to start. In builds without CUDA it reports that no runtime is linked.
//
//   DeviceReport r = query_devices();
//   if (r.devices.empty()) std::cout << "no device: " << r.why << "\n";
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dcp::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;  // compute capability
  int multiprocessors = 0;
  int64_t memory_bytes = 0;
};

struct DeviceReport {
  bool runtime_linked = false;  // this binary was built with the CUDA runtime
  int runtime_version = 0;      // e.g. 13000 for CUDA 13.0 (0: unknown)
  int driver_version = 0;       // 0: no driver
  std::vector<DeviceInfo> devices;
  std::string why;  // when devices is empty: the runtime's error, or why nothing was queried
};

DeviceReport query_devices();

}  // namespace dcp::gpu
