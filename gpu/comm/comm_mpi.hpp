// comm_mpi.hpp — the MPI transport: one TP rank per process (OpenMPI), built when MPI is found
// (CMake option DCP_MPI). The step runner over it is run_mpi.hpp.
//
// MPI_COMM_WORLD is the attention TP group (world size = tp_size); DCP group g is the world
// ranks g N .. g N + N - 1, matching dcp_rank = tp_rank mod N. Every exchange is point-to-point
// on MPI_COMM_WORLD and every wait polls, so nothing blocks for good:
//   - a wait ends at its deadline (DcpConfig::deadline, `--timeout`) with an error naming the
//     world ranks whose messages did not arrive (a stopped, hung or dead peer);
//   - a rank that fails tells every other rank (mpi_notify_failure), and a wait that receives
//     such a notice ends at once with the failed rank's message;
//   - no communicator is created or freed per step (MPI_Comm_split would block on a stopped peer).
// ReduceScatter is an All-to-All followed by a local sum in the configured order, so every
// transport reduces in the same order (communicator.hpp).
//
//   DCP_GPU_TRY(mpi_init(&argc, &argv));
//   std::unique_ptr<Communicator> comm = mpi_group(first, n, deadline);   // a DCP group
//   Result<MpiVerdict> v = mpi_agree(code, why, cfg.deadline);   // every rank: the same verdict
//   mpi_gather_bytes(my_judgement, "gathering judgements", cfg.deadline);  // all on rank 0
//   mpi_finalize();
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/comm/communicator.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

GpuStatus mpi_init(int* argc, char*** argv);
// MPI_Finalize; after a failure that left messages in flight anywhere (a rank failed mid-step,
// and the verdict said so) MPI_Finalize could wait for them forever, so the job ends with
// MPI_Abort(code) from rank 0, once it has printed its line (the others wait for it).
void mpi_finalize(int code);
// The MPI library's own version line (callable before mpi_init).
std::string mpi_library_version();
int64_t mpi_world_rank();
int64_t mpi_world_size();
// This process among the job's processes on its node (they share its memory and its GPUs): its
// node-local rank and their number, as the launcher says (OpenMPI, MPICH, Slurm), else found
// with MPI_Comm_split_type.
struct MpiNode {
  int64_t rank = 0, size = 1;
};
MpiNode mpi_node();
// Ends every process of the job.
[[noreturn]] void mpi_abort(int code);

// The world ranks [first, first + size) as a communicator (this process is one of them); waits
// end at `deadline`.
std::unique_ptr<Communicator> mpi_group(int64_t first, int64_t size,
                                        std::chrono::milliseconds deadline);

// Sends `bytes` from member `root` of the group [first, first + size) to every member (each
// passes a buffer of the same size; root's is sent).
GpuStatus mpi_broadcast_bytes(int64_t first, int64_t size, int64_t root, std::span<uint8_t> bytes,
                              std::chrono::milliseconds deadline);

// Tells every other world rank that this one failed: their waits end with `why`. Once per
// process, and not when this rank's failure was itself another rank's notice.
void mpi_notify_failure(const std::string& why);

// Whether a wait of this process passed its deadline (some peer never arrived).
bool mpi_deadline_passed();

// What every rank learns of a step: the outcome of the lowest world rank whose outcome was not
// 0, with its message (code 0: every rank succeeded).
struct MpiVerdict {
  int code = 0;
  int64_t rank = -1;
  std::string message;
};

// Every world rank calls it with its own outcome (0: success; any other code: failure, with a
// one-line message); all of them return the same verdict, or an error when a peer does not
// take part within `deadline`. Rank 0 waits that long for the others; they wait twice as long
// for its verdict, plus `root_work`, the time rank 0 may spend before it agrees (judging), so a
// missing rank is named by rank 0, which waited for it.
Result<MpiVerdict> mpi_agree(int code, const std::string& message,
                             std::chrono::milliseconds deadline,
                             std::chrono::milliseconds root_work = {});

// Every world rank's bytes on rank 0, by world rank (rank 0's own included); the other ranks
// get an empty list. Every rank calls it; the sizes may differ. Rank 0 waits `deadline` for the
// others, they twice as long (a large message waits for rank 0 to take it); the error names
// `what` and the ranks that did not arrive.
Result<std::vector<std::vector<uint8_t>>> mpi_gather_bytes(std::span<const uint8_t> mine,
                                                           const char* what,
                                                           std::chrono::milliseconds deadline);

// mpi_gather_bytes for messages of one size on every rank, in one round, as part of a step: a
// peer's failure notice (mpi_notify_failure) ends the wait. Rank 0 waits `root_wait`, the others
// `sender_wait` (a large message waits for rank 0 to take it).
Result<std::vector<std::vector<uint8_t>>> mpi_gather_same_size(
    std::span<const uint8_t> mine, const char* what, std::chrono::milliseconds root_wait,
    std::chrono::milliseconds sender_wait);

}  // namespace dcp::gpu
