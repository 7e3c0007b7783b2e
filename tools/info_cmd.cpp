#include "tools/info_cmd.hpp"

#include <mpfr.h>

#include <iostream>
#include <memory>
#include <string>

#include "gpu/device_query.hpp"
#include "tools/session.hpp"
#ifdef DCP_HAVE_MPI
#include "gpu/comm/comm_mpi.hpp"
#endif
#ifdef DCP_HAVE_CUDA_BACKEND
#include "gpu/cuda/nccl_api.hpp"
#endif

namespace dcp::tools {
namespace {

using nlohmann::json;

#ifdef __clang__
constexpr const char* kCompiler = "clang";
#else
constexpr const char* kCompiler = "g++";
#endif

std::string version_text(int v) {  // CUDA's 1000 * major + 10 * minor
  return v ? std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) : "none";
}

// What this binary was built with and finds at run time.
struct BuildFacts {
  std::string cuda_built;  // the CUDA toolkit; empty: built without CUDA
  std::string mpi;         // the MPI library; empty: built without MPI
  bool cuda_backend = false;
  std::string nccl, nccl_headers, nccl_built;
  bool nccl_loaded = false;
  const char* nccl_mpi = "";  // ", nccl under mpirun" when built
};

BuildFacts build_facts() {
  BuildFacts f;
  f.cuda_built = DCP_CUDA_TOOLKIT;
#ifdef DCP_HAVE_MPI
  f.mpi = gpu::mpi_library_version();
#endif
#ifdef DCP_HAVE_CUDA_BACKEND
  f.cuda_backend = true;
  f.nccl = gpu::nccl_runtime_text();
  f.nccl_loaded = gpu::nccl_api().ok();
  f.nccl_headers = gpu::nccl_headers_version();
  f.nccl_built = "; opened at run time, built against nccl.h " + f.nccl_headers;
#else
  f.nccl = "not used (built without the CUDA backend)";
#endif
#ifdef DCP_HAVE_NCCL_MPI
  f.nccl_mpi = ", nccl under mpirun";
#endif
  return f;
}

void print_info(const BuildFacts& f, const gpu::DeviceReport& dev, const harness::Limits& lim,
                std::ostream& out) {
  out << "# dcp-verify info\n"
      << "  version           " << DCP_VERSION << "\n"
      << "  compiler          " << kCompiler << " " << __VERSION__ << " (" << DCP_BUILD_TYPE
      << ")\n"
      << "  backends          host (threads" << (f.mpi.empty() ? "" : ", mpi") << ")"
      << (f.cuda_backend ? std::string("; cuda (single-gpu, nccl") + f.nccl_mpi + ")"
                         : std::string("; cuda: not built"))
      << "\n"
      << "  cuda toolkit      "
      << (f.cuda_built.empty() ? "not used (built without nvcc)"
                               : f.cuda_built + ", architectures " + DCP_CUDA_ARCHS)
      << "\n"
      << "  nccl              " << f.nccl << f.nccl_built << "\n"
      << "  mpi               " << (f.mpi.empty() ? "not built (DCP_MPI=OFF or not found)" : f.mpi)
      << "\n"
      << "  oracle            MPFR " << mpfr_get_version() << " (certify tier), double-double "
      << "(fast tier)\n"
      << "  cuda runtime      "
      << (dev.runtime_linked ? version_text(dev.runtime_version) + " (static)" : "not linked")
      << "\n"
      << "  cuda driver       " << (dev.runtime_linked ? version_text(dev.driver_version) : "-")
      << "\n"
      << "  memory            " << harness::bytes_text(lim.memory_bytes)
      << " available (a command that needs more is refused up front)\n";
  if (dev.devices.empty()) out << "  devices           none: " << dev.why << "\n";
  for (const gpu::DeviceInfo& d : dev.devices) {
    out << "  device " << d.index << "          " << d.name << "  sm_" << d.sm_major << d.sm_minor
        << "  " << d.multiprocessors << " SMs  " << d.memory_bytes / (int64_t{1} << 20) << " MiB\n";
  }
}

json info_json(const BuildFacts& f, const gpu::DeviceReport& dev, const harness::Limits& lim) {
  json devices = json::array();
  for (const gpu::DeviceInfo& d : dev.devices)
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"sm", std::to_string(d.sm_major) + std::to_string(d.sm_minor)},
                       {"multiprocessors", d.multiprocessors},
                       {"memory_bytes", d.memory_bytes}});
  json backends = json::array({"host"});
  if (!f.mpi.empty()) backends.push_back("host+mpi");
  if (f.cuda_backend) {
    backends.push_back("cuda+single-gpu");
    backends.push_back("cuda+nccl");
    if (*f.nccl_mpi != '\0') backends.push_back("cuda+nccl+mpi");
  }
  return {{"schema", "dcp-verify/info/1"},
          {"version", DCP_VERSION},
          {"compiler", std::string(kCompiler) + " " + __VERSION__},
          {"build_type", DCP_BUILD_TYPE},
          {"backends", backends},
          {"nccl", f.nccl_loaded ? json(f.nccl) : json(nullptr)},
          {"nccl_headers", f.cuda_backend ? json(f.nccl_headers) : json(nullptr)},
          {"nccl_unavailable_reason", f.nccl_loaded ? json(nullptr) : json(f.nccl)},
          {"cuda_toolkit", f.cuda_built.empty() ? json(nullptr) : json(f.cuda_built)},
          {"cuda_architectures", f.cuda_built.empty() ? json(nullptr) : json(DCP_CUDA_ARCHS)},
          {"mpi", f.mpi.empty() ? json(nullptr) : json(f.mpi)},
          {"mpfr", mpfr_get_version()},
          {"oracle_tiers", json::array({"fast (double-double)", "certify (MPFR)"})},
          {"cuda_runtime", dev.runtime_linked ? json(version_text(dev.runtime_version)) : nullptr},
          {"cuda_runtime_static", dev.runtime_linked},
          {"cuda_driver", dev.driver_version ? json(version_text(dev.driver_version)) : nullptr},
          {"devices", devices},
          {"no_device_reason", dev.devices.empty() ? json(dev.why) : json(nullptr)},
          {"memory_available_bytes", lim.memory_bytes}};
}

int run_info(const std::optional<std::string>& json_path, const harness::Limits& lim) {
  if (const auto why = output_error("--json", json_path, {}))
    return refuse("info", *why, std::cerr);
  const BuildFacts facts = build_facts();
  const gpu::DeviceReport dev = gpu::query_devices();
  print_info(facts, dev, lim, std::cout);
  if (json_path && !write_json("info", *json_path, info_json(facts, dev, lim)))
    return kExitBadInput;
  return kExitOk;
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto json_path = std::make_shared<std::optional<std::string>>();
  CLI::App* cmd =
      app.add_subcommand("info", "What this binary was built with and the devices it sees");
  cmd->add_option("--json", *json_path, "Also write the report as JSON (docs/cli.md)");
  return {cmd, [json_path](const harness::Limits& lim) { return run_info(*json_path, lim); }};
}

}  // namespace dcp::tools
