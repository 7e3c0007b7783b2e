#include "tools/backends.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "oracle/text.hpp"
#include "plugin/plugin.hpp"
#include "tools/command.hpp"

#ifdef DCP_HAVE_CUDA_BACKEND
#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/run_cuda.hpp"
#endif
#ifdef DCP_HAVE_NCCL_MPI
#include "gpu/cuda/comm_nccl_mpi.hpp"
#endif

namespace dcp::tools {

// The plug-in ABI's lacks bits are the first rows of the feature table, name for name.
constexpr const char* kAbiLackNames[] = DCPV_LACKS_NAMES;
constexpr bool abi_lacks_are_features() {
  if (std::size(kAbiLackNames) != props::kAbiFeatures) return false;
  for (size_t i = 0; i < props::kAbiFeatures; ++i)
    if (std::string_view(kAbiLackNames[i]) != props::kFeatures[i].name) return false;
  return true;
}
static_assert(abi_lacks_are_features(), "DCPV_LACKS_NAMES and props::kFeatures disagree");

static_assert(plugin::kExitLevelTimeout == kExitTimeout,
              "a plug-in level past --timeout ends the process as a timed-out collective does");
static_assert(plugin::kExitLevelCrash == kExitFail,
              "a plug-in level that crashes or calls exit() failed, as a wrong result does");

namespace {

// How a pair's ranks are placed: all in this process, or one per process under mpirun (always,
// or only when mpirun started this process).
enum class Placement { in_process, per_process, per_process_under_mpirun };

// One row per --backend/--comm pair, as nccl-tests registers its collectives: every question
// about a pair (known? built here? where do its ranks live? how is it opened?) is answered from
// this table. A backend's first row is its default --comm.
struct Transport {
  std::string_view backend, comm;
  std::string_view label;    // the backend in prose
  std::string_view summary;  // where its ranks live, for --comm's help
  // nullptr: this binary has it; else why not (the refusal's text after "--comm COMM: ").
  const char* missing = nullptr;
  // The CUDA backend's communicators exchange device buffers; the host's exchange host memory.
  bool device_buffers = false;
  Placement placement = Placement::in_process;
  // In process: the backend, its collectives waiting at most `deadline` for a peer.
  props::DcpBackend (*open)(std::chrono::milliseconds deadline) = nullptr;
  // One rank per process: the step runner (nullptr where it is not built), and why not.
  MpiStep run_mpi = nullptr;
  const char* missing_under_mpirun = nullptr;
};

#ifdef DCP_HAVE_CUDA_BACKEND
constexpr const char* kCudaMissing = nullptr;
template <gpu::DeviceTransport T>
props::DcpBackend open_cuda(std::chrono::milliseconds deadline) {
  return props::DcpBackend([deadline](const gpu::DcpInputs& in, gpu::DcpConfig cfg) {
    cfg.deadline = deadline;
    return gpu::run_dcp_cuda(in, cfg, T);
  });
}
constexpr auto kOpenSingleGpu = &open_cuda<gpu::DeviceTransport::single_gpu>;
constexpr auto kOpenNccl = &open_cuda<gpu::DeviceTransport::nccl>;
#else
constexpr const char* kCudaMissing =
    "this binary was built without the CUDA backend (no nvcc at build time, or DCP_CUDA=OFF)";
constexpr props::DcpBackend (*kOpenSingleGpu)(std::chrono::milliseconds) = nullptr;
constexpr props::DcpBackend (*kOpenNccl)(std::chrono::milliseconds) = nullptr;
#endif
#ifdef DCP_HAVE_MPI
constexpr const char* kMpiMissing = nullptr;
constexpr MpiStep kHostMpi = &gpu::run_dcp_mpi;
#else
constexpr const char* kMpiMissing = "this binary was built without MPI (DCP_MPI=OFF)";
constexpr MpiStep kHostMpi = nullptr;
#endif
#ifdef DCP_HAVE_NCCL_MPI
constexpr const char* kNcclMpiMissing = nullptr;
constexpr MpiStep kNcclMpi = &gpu::run_dcp_nccl_mpi;
#else
constexpr const char* kNcclMpiMissing =
    "this binary was built without MPI; run one process driving every GPU instead";
constexpr MpiStep kNcclMpi = nullptr;
#endif

props::DcpBackend open_host_threads(std::chrono::milliseconds deadline) {
  return host_threads_backend(deadline);
}

const Transport kTransports[] = {
    {.backend = "host",
     .comm = "threads",
     .label = "host",
     .summary = "in-process",
     .open = &open_host_threads},
    {.backend = "host",
     .comm = "mpi",
     .label = "host",
     .summary = "under mpirun",
     .missing = kMpiMissing,
     .placement = Placement::per_process,
     .run_mpi = kHostMpi},
    {.backend = "cuda",
     .comm = "single-gpu",
     .label = "CUDA",
     .summary = "N virtual ranks on one GPU",
     .missing = kCudaMissing,
     .device_buffers = true,
     .open = kOpenSingleGpu},
    {.backend = "cuda",
     .comm = "nccl",
     .label = "CUDA",
     .summary = "one GPU per rank; one process per GPU under mpirun",
     .missing = kCudaMissing,
     .device_buffers = true,
     .placement = Placement::per_process_under_mpirun,
     .open = kOpenNccl,
     .run_mpi = kNcclMpi,
     .missing_under_mpirun = kNcclMpiMissing},
};

// "a or b" over the rows that pass `keep`, each named by `name`, in table order, once each.
template <class Keep, class Name>
std::string listed(Keep keep, Name name) {
  std::vector<std::string_view> seen;
  for (const Transport& t : kTransports)
    if (keep(t) && std::find(seen.begin(), seen.end(), name(t)) == seen.end())
      seen.push_back(name(t));
  std::string out;
  for (size_t i = 0; i < seen.size(); ++i) out += (i ? " or " : "") + std::string(seen[i]);
  return out;
}

// A backend's first row: its default --comm, and whether the backend is built at all.
bool first_of_backend(const Transport& t) {
  return &t == &*std::find_if(std::begin(kTransports), std::end(kTransports),
                              [&](const Transport& r) { return r.backend == t.backend; });
}

const Transport* find_transport(std::string_view backend, std::string_view comm) {
  for (const Transport& t : kTransports)
    if (t.backend == backend && t.comm == comm) return &t;
  return nullptr;
}

bool runs_per_process(const Transport& t) {
  return t.placement == Placement::per_process ||
         (t.placement == Placement::per_process_under_mpirun && launched_by_mpirun());
}

}  // namespace

std::optional<std::string> unavailable(const std::string& backend, const std::string& comm) {
  const Transport* const first = find_transport(backend, default_comm(backend));
  if (first == nullptr)
    return "--backend: got '" + backend + "'; expected " +
           listed(first_of_backend, [](const Transport& t) { return t.backend; });
  // A backend whose default pair is not built is not built at all, whatever the --comm.
  if (first->missing != nullptr)
    return "--backend " + backend + ": " + first->missing + "; expected " +
           listed([](const Transport& t) { return first_of_backend(t) && t.missing == nullptr; },
                  [](const Transport& t) { return t.backend; });
  const Transport* const t = find_transport(backend, comm);
  if (t == nullptr) {
    const std::string expected = listed([&](const Transport& r) { return r.backend == backend; },
                                        [](const Transport& r) { return r.comm; });
    const auto other = [&](const Transport& r) { return r.comm == comm; };
    if (first->device_buffers)
      return "--comm " + comm + ": the " + std::string(first->label) +
             " backend exchanges device buffers; expected " + expected;
    if (std::any_of(std::begin(kTransports), std::end(kTransports), other))
      return "--comm " + comm + ": exchanges device buffers; pass --backend " +
             listed(other, [](const Transport& r) { return r.backend; });
    return "--comm: got '" + comm + "'; expected " + expected;
  }
  if (t->missing != nullptr) return "--comm " + comm + ": " + t->missing;
  if (runs_per_process(*t) && t->run_mpi == nullptr)
    return "--comm " + comm + " under mpirun: " + t->missing_under_mpirun;
  return std::nullopt;
}

std::string default_comm(const std::string& backend) {
  for (const Transport& t : kTransports)
    if (t.backend == backend) return std::string(t.comm);
  return "";
}

bool one_rank_per_process(const std::string& backend, const std::string& comm) {
  const Transport* const t = find_transport(backend, comm);
  return t != nullptr && runs_per_process(*t);
}

std::optional<MpiStep> mpi_step(const std::string& backend, const std::string& comm) {
  const Transport* const t = find_transport(backend, comm);
  if (t == nullptr || !runs_per_process(*t) || t->run_mpi == nullptr) return std::nullopt;
  return t->run_mpi;
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
  const Transport& t = *find_transport(backend, comm);
  if (runs_per_process(t) || t.open == nullptr)  // run_cmd's MpiRunner runs it, not this
    return props::DcpBackend([comm](const gpu::DcpInputs&, const gpu::DcpConfig&) {
      return gpu::Result<gpu::GroupRun>(DCP_GPU_ERROR(
          "--comm ", comm, ": runs one rank per process under mpirun, not in this process"));
    });
  return t.open(deadline);
}

oracle::Expected<props::DcpBackend> open_in_process_backend(const std::string& backend,
                                                            std::chrono::milliseconds deadline) {
  return open_backend(backend, default_comm(backend), deadline);
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
  if (p->attends() || p->has_combine()) b.levels = plugin::plugin_backend(*p, deadline);
  if (p->has_step()) b.step = plugin::plugin_step_backend(*p, deadline);
  b.merges = p->has_combine() || (!b.levels && p->has_step());
  b.attends = p->attends() || (!b.levels && p->has_step());
  b.batches = p->has_paged() && (p->lacks & DCPV_LACKS_BATCH) == 0;
  b.lacks = p->lacked_features();
  b.uncarried = p->uncarried_features();
  for (size_t i = props::kAbiFeatures; i < std::size(props::kFeatures); ++i) {
    b.lacks.emplace_back(props::kFeatures[i].name);  // features no ABI version carries
    b.uncarried.emplace_back(props::kFeatures[i].name);
  }
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

std::string comms_help() {
  std::string out;
  for (const Transport& t : kTransports) {
    const bool first = first_of_backend(t);
    const bool last = &t == std::end(kTransports) - 1 || (&t + 1)->backend != t.backend;
    out += std::string(first ? (out.empty() ? "" : "; ") : " or ") + std::string(t.comm) + " (" +
           std::string(t.summary) + (first ? ", the " + std::string(t.backend) + " default" : "") +
           ")" + (last ? " for " + std::string(t.backend) : "");
  }
  return out;
}

std::string backends_help() {
  const std::string built =
      listed([](const Transport& t) { return first_of_backend(t) && t.missing == nullptr; },
             [](const Transport& t) { return t.backend; });
  const std::string missing =
      listed([](const Transport& t) { return first_of_backend(t) && t.missing != nullptr; },
             [](const Transport& t) { return t.backend; });
  return missing.empty() ? built : built + " (" + missing + ": not built)";
}

}  // namespace dcp::tools
