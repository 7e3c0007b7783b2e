#include "gpu/comm/communicator.hpp"

#include <vector>

namespace dcp::gpu {

void sum_blocks_ordered(std::span<const float* const> blocks, int64_t count, const SumSpec& how,
                        std::span<float> out) {
  const int64_t n = static_cast<int64_t>(blocks.size());
  std::vector<std::vector<float>> work(blocks.size());
  for (int64_t s = 0; s < n; ++s) work[static_cast<size_t>(s)].assign(blocks[s], blocks[s] + count);
  const int64_t root = reduce_slots(n, how.order, how.seed, [&](int64_t dst, int64_t src) {
    auto& d = work[static_cast<size_t>(dst)];
    const auto& s = work[static_cast<size_t>(src)];
    for (size_t i = 0; i < static_cast<size_t>(count); ++i) d[i] = round_to(how.accum, d[i] + s[i]);
  });
  if (n == 0) return;
  const auto& r = work[static_cast<size_t>(root)];
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = r[static_cast<size_t>(i)];
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
