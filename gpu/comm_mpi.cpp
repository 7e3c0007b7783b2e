#include "gpu/comm_mpi.hpp"

#include <mpi.h>

#include <cstdlib>
#include <vector>

namespace dcp::gpu {
namespace {

GpuStatus mpi_check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return {};
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return DCP_GPU_ERROR(call, " failed: ", std::string(msg, static_cast<size_t>(len)));
}
#define DCP_MPI_CHECK(call) DCP_GPU_TRY(mpi_check((call), #call))

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    int r = 0, n = 0;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    rank_ = r;
    size_ = n;
  }
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  GpuStatus all_gather(std::span<const float> send, std::span<float> recv) override {
    DCP_GPU_TRY(check_collective("all_gather", size_, send.size(), recv.size(), 1, size_));
    DCP_MPI_CHECK(MPI_Allgather(send.data(), static_cast<int>(send.size()), MPI_FLOAT, recv.data(),
                                static_cast<int>(send.size()), MPI_FLOAT, comm_));
    return {};
  }
  GpuStatus all_to_all(std::span<const float> send, std::span<float> recv) override {
    DCP_GPU_TRY(check_collective("all_to_all", size_, send.size(), recv.size(), size_, size_));
    const int count = static_cast<int>(send.size() / static_cast<size_t>(size_));
    DCP_MPI_CHECK(
        MPI_Alltoall(send.data(), count, MPI_FLOAT, recv.data(), count, MPI_FLOAT, comm_));
    return {};
  }
  GpuStatus reduce_scatter_sum(std::span<const float> send, std::span<float> recv,
                               ReduceOrder order, uint64_t seed) override {
    DCP_GPU_TRY(check_collective("reduce_scatter", size_, send.size(), recv.size(), size_, 1));
    std::vector<float> blocks(send.size());
    DCP_GPU_TRY(all_to_all(send, blocks));
    std::vector<const float*> ptrs(static_cast<size_t>(size_));
    for (int64_t s = 0; s < size_; ++s) ptrs[static_cast<size_t>(s)] = &blocks[s * recv.size()];
    sum_blocks_ordered(ptrs, static_cast<int64_t>(recv.size()), order, seed, recv);
    return {};
  }

 private:
  MPI_Comm comm_;
  int64_t rank_ = 0, size_ = 1;
};

// Gathers equal-size float vectors of every world rank on rank 0 ([world][count]).
GpuStatus gather_all(const std::vector<float>& mine, std::vector<std::vector<float>>& out) {
  const int64_t n = mpi_world_size();
  std::vector<float> flat(mpi_world_rank() == 0 ? mine.size() * static_cast<size_t>(n) : 0);
  DCP_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, flat.data(),
                           static_cast<int>(mine.size()), MPI_FLOAT, 0, MPI_COMM_WORLD));
  if (mpi_world_rank() != 0) return {};
  out.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    out[static_cast<size_t>(r)].assign(
        flat.begin() + static_cast<std::ptrdiff_t>(r * mine.size()),
        flat.begin() + static_cast<std::ptrdiff_t>((r + 1) * mine.size()));
  return {};
}

}  // namespace

GpuStatus mpi_init(int* argc, char*** argv) {
  int done = 0;
  MPI_Initialized(&done);
  if (done) return {};
  DCP_MPI_CHECK(MPI_Init(argc, argv));
  return {};
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string v(text, static_cast<size_t>(len));
  const size_t eol = v.find_first_of("\r\n,");
  return eol == std::string::npos ? v : v.substr(0, eol);
}

void mpi_finalize() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

int64_t mpi_world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int64_t mpi_world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
}

Result<MpiRun> run_dcp_mpi(const DcpInputs& in, const DcpConfig& cfg) {
  DCP_GPU_TRY(validate_inputs(in, cfg));
  const DcpGeometry geo = *DcpGeometry::create(cfg, in.dims);
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  if (world != cfg.tp_size)
    return DCP_GPU_ERROR("--comm mpi: ", world, " processes but --tp-size is ", cfg.tp_size,
                         " (run with mpirun -np ", cfg.tp_size, ")");
  MPI_Comm group;
  DCP_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(geo.group(me)),
                               static_cast<int>(geo.dcp_rank(me)), &group));
  MpiCommunicator comm(group);
  Result<RankStepOutput> r = run_tp_rank(comm, in, cfg, me);
  MPI_Comm_free(&group);
  if (!r) return r.status();
  return gather_on_root(in, cfg, *r);
}

Result<MpiRun> gather_on_root(const DcpInputs& in, const DcpConfig& cfg,
                              const RankStepOutput& mine) {
  Result<DcpGeometry> geo_r = DcpGeometry::create(cfg, in.dims);
  if (!geo_r) return geo_r.status();
  const DcpGeometry& geo = *geo_r;
  const int64_t world = mpi_world_size(), me = mpi_world_rank();
  MpiRun out;
  out.root = me == 0;
  std::vector<std::vector<float>> o, lse, po, pl;
  DCP_GPU_TRY(gather_all(mine.o, o));
  DCP_GPU_TRY(gather_all(mine.lse, lse));
  DCP_GPU_TRY(gather_all(mine.partial_o, po));
  DCP_GPU_TRY(gather_all(mine.partial_lse, pl));
  if (!out.root) return out;
  const AttentionDims& d = in.dims;
  GroupRun& run = out.group;
  run = empty_group_run(geo, d);
  for (int64_t tp_rank = 0; tp_rank < world; ++tp_rank) {
    RankStepOutput ro;
    ro.o = o[static_cast<size_t>(tp_rank)];
    ro.lse = lse[static_cast<size_t>(tp_rank)];
    ro.partial_o = po[static_cast<size_t>(tp_rank)];
    ro.partial_lse = pl[static_cast<size_t>(tp_rank)];
    place_rank_output(geo, d, tp_rank, ro, run);
  }
  return out;
}

}  // namespace dcp::gpu
