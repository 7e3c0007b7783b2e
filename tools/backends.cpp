#include "tools/backends.hpp"

#include <cstdlib>
#include <utility>

#include "oracle/text.hpp"
#include "plugin/plugin.hpp"
#include "tools/command.hpp"

#ifdef DCP_HAVE_CUDA_BACKEND
#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/run_cuda.hpp"
#endif

namespace dcp::tools {

static_assert(plugin::kExitLevelTimeout == kExitTimeout,
              "a plug-in level past --timeout ends the process as a timed-out collective does");
static_assert(plugin::kExitLevelCrash == kExitFail,
              "a plug-in level that crashes or calls exit() failed, as a wrong result does");

std::optional<std::string> unavailable(const std::string& backend, const std::string& comm) {
  const bool device_comm = comm == "single-gpu" || comm == "nccl";
  if (backend == "cuda") {
#ifndef DCP_HAVE_CUDA_BACKEND
    return std::string(
        "--backend cuda: this binary was built without the CUDA backend (no nvcc at build "
        "time, or DCP_CUDA=OFF); expected host");
#else
    if (!device_comm)
      return "--comm " + comm + ": the CUDA backend exchanges device buffers; expected " +
             "single-gpu or nccl";
#if !defined(DCP_HAVE_NCCL_MPI)
    if (comm == "nccl" && launched_by_mpirun())
      return std::string(
          "--comm nccl under mpirun: this binary was built without MPI; run one process "
          "driving every GPU instead");
#endif
    return std::nullopt;
#endif
  }
  if (backend != "host") return "--backend: got '" + backend + "'; expected host or cuda";
  if (device_comm) return "--comm " + comm + ": exchanges device buffers; pass --backend cuda";
  if (comm == "mpi") {
#ifndef DCP_HAVE_MPI
    return std::string("--comm mpi: this binary was built without MPI (DCP_MPI=OFF)");
#else
    return std::nullopt;
#endif
  }
  if (comm != "threads") return "--comm: got '" + comm + "'; expected threads or mpi";
  return std::nullopt;
}

std::optional<std::string> no_device([[maybe_unused]] const std::string& backend) {
#ifdef DCP_HAVE_CUDA_BACKEND
  if (backend == "cuda") return gpu::no_device_reason(1);
#endif
  return std::nullopt;
}

oracle::Expected<props::DcpBackend> open_backend(const std::string& backend,
                                                 const std::string& comm,
                                                 std::chrono::milliseconds deadline) {
  if (const auto why = unavailable(backend, comm)) return DCP_ERROR(*why);
  if (const auto why = no_device(backend)) return DCP_ERROR("--backend ", backend, ": ", *why);
#ifdef DCP_HAVE_CUDA_BACKEND
  if (backend == "cuda") {
    const gpu::DeviceTransport t = *gpu::parse_transport(comm);
    return props::DcpBackend([t, deadline](const gpu::DcpInputs& in, gpu::DcpConfig cfg) {
      cfg.deadline = deadline;
      return gpu::run_dcp_cuda(in, cfg, t);
    });
  }
#endif
  return host_threads_backend(deadline);
}

oracle::Expected<props::DcpBackend> open_in_process_backend(const std::string& backend,
                                                            std::chrono::milliseconds deadline) {
  return open_backend(backend, backend == "cuda" ? "single-gpu" : "threads", deadline);
}

oracle::Expected<ImplBackends> open_impl(const std::string& path, const std::string& backend,
                                         const std::string& comm,
                                         std::chrono::milliseconds deadline) {
  if (backend != "host" || comm != "threads")
    return DCP_ERROR(
        "--impl: a plug-in runs on --backend host --comm threads (its levels on the "
        "host device's threads); got --backend ",
        backend, " --comm ", comm);
  oracle::Expected<plugin::Plugin> p = plugin::load_plugin(path, deadline);
  if (!p) return p.status();
  ImplBackends b;
  if (p->has_partial() || p->has_combine()) b.levels = plugin::plugin_backend(*p, deadline);
  if (p->has_step()) b.step = plugin::plugin_step_backend(*p, deadline);
  b.merges = p->has_combine() || (!b.levels && p->has_step());
  b.attends = p->has_partial() || (!b.levels && p->has_step());
  // Escaped: a name or path with a newline would print a line of its own into the report.
  b.label =
      oracle::printable(p->impl->name) + " (" + oracle::printable(path) + ", " + p->levels() + ")";
  return b;
}

props::DcpBackend host_threads_backend(std::chrono::milliseconds deadline, gpu::RankStep step) {
  return props::DcpBackend(
      [deadline, step = std::move(step)](const gpu::DcpInputs& in, gpu::DcpConfig cfg) {
        cfg.deadline = deadline;
        return gpu::run_dcp_threads(in, cfg, step);
      });
}

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

std::string backends_help() {
#ifdef DCP_HAVE_CUDA_BACKEND
  return "host or cuda";
#else
  return "host (cuda: not built)";
#endif
}

}  // namespace dcp::tools
