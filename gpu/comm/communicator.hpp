// communicator.hpp — the collectives the DCP path needs, over any transport.
//
// A Communicator connects the N ranks of one DCP group. Buffers are fp32 and laid out by rank:
//   all_gather          send [count]            -> recv [N, count]   (block s from rank s)
//   all_to_all          send [N, count]         -> recv [N, count]   (block d goes to rank d;
//                                                                     block s came from rank s)
//   reduce_scatter_sum  send [N, count]         -> recv [count] = sum over ranks s of block
//                                                  `rank` of s's send, summed as SumSpec says
//                                                  (merge.hpp: order, partial sums' format)
// Every rank must call the same collectives with the same counts. A collective that cannot
// complete (a peer failed, a deadline passed) returns an error instead of hanging.
//
// Implementations: ThreadGroup (comm_threads.hpp: N ranks as threads of one process) and
// MpiCommunicator (comm_mpi.hpp: one rank per process).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpu/kernels/merge.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

// How long a rank waits for its peers in any collective before the collective fails, naming the
// ranks that did not arrive (dcp-verify --timeout). The clock starts when the waiting rank
// arrives, so the slowest rank's own work counts against it: five minutes cover a whole
// long-context step of the host path on a small machine.
inline constexpr std::chrono::milliseconds kDefaultCollectiveDeadline{300000};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  virtual std::string name() const = 0;

  virtual GpuStatus all_gather(std::span<const float> send, std::span<float> recv) = 0;
  virtual GpuStatus all_to_all(std::span<const float> send, std::span<float> recv) = 0;
  virtual GpuStatus reduce_scatter_sum(std::span<const float> send, std::span<float> recv,
                                       const SumSpec& how) = 0;
};

// The most ranks a communicator's group holds (the properties' and `run`'s limit on N).
inline constexpr int64_t kMaxGroupRanks = 1024;

// Sums N blocks of `count` floats (blocks[s] points at rank s's contribution) into out [count],
// combining whole blocks in the given order, each partial sum rounded to how.accum: the kernel
// body every device's reduce-scatter runs (body::ordered_sum), so every transport reduces in the
// same tree and format. Refuses more than kMaxGroupRanks blocks.
GpuStatus sum_blocks_ordered(std::span<const float* const> blocks, int64_t count,
                             const SumSpec& how, std::span<float> out);

// "rank 3" or "ranks 1, 3": the ranks a collective waited for in vain, for its error.
std::string rank_list(const std::vector<int64_t>& ranks);

// Size checks shared by the communicators (one-line errors naming the collective).
GpuStatus check_collective(const char* what, int64_t n, size_t send, size_t recv,
                           int64_t send_blocks, int64_t recv_blocks);

}  // namespace dcp::gpu
