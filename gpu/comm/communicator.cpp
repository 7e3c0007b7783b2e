#include "gpu/comm/communicator.hpp"

#include <vector>

#include "gpu/kernels/bodies.hpp"
#include "gpu/kernels/launch_checks.hpp"

namespace dcp::gpu {

GpuStatus sum_blocks_ordered(std::span<const float* const> blocks, int64_t count,
                             const SumSpec& how, std::span<float> out) {
  using Schedule = ReduceScheduleOf<kMaxGroupRanks>;
  const int64_t n = static_cast<int64_t>(blocks.size());
  DCP_GPU_ASSIGN(sched, make_schedule<Schedule>(n, how.order, how.seed));
  std::vector<float> slots(static_cast<size_t>(n));
  for (int64_t i = 0; i < count; ++i)
    body::ordered_sum(blocks.data(), count, sched, how.accum, out.data(), i, slots.data());
  return {};
}

std::string rank_list(const std::vector<int64_t>& ranks) {
  std::string s = ranks.size() == 1 ? "rank" : "ranks";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : " ") + std::to_string(ranks[i]);
  return s;
}

GpuStatus check_collective(const char* what, int64_t n, size_t send, size_t recv,
                           int64_t send_blocks, int64_t recv_blocks) {
  if (send % static_cast<size_t>(send_blocks) != 0)
    return DCP_GPU_ERROR(what, ": send size ", send, " is not a multiple of ", send_blocks);
  const size_t count = send / static_cast<size_t>(send_blocks);
  if (recv != count * static_cast<size_t>(recv_blocks))
    return DCP_GPU_ERROR(what, ": recv size ", recv, "; expected ", count * recv_blocks, " for ", n,
                         " ranks");
  return {};
}

}  // namespace dcp::gpu
