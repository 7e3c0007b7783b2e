#include "oracle/shard.hpp"

#include <algorithm>
#include <vector>

namespace dcp::oracle {

Case shard_case(const Case& c, const Ownership& own, int64_t rank,
                std::optional<int64_t> sink_rank) {
  Case s = c;
  const int64_t T = c.tokens();
  std::vector<std::vector<int64_t>> owned(static_cast<size_t>(T));
  int64_t kmax = 1;  // a [T, 1] list of padding when the rank owns nothing
  for (int64_t t = 0; t < T; ++t) {
    auto& mine = owned[static_cast<size_t>(t)];
    for (const int64_t p : visible_keys(c, t))
      if (own.of(p) == rank) mine.push_back(p);
    kmax = std::max<int64_t>(kmax, static_cast<int64_t>(mine.size()));
  }
  s.topk = Tensor<int64_t>({T, kmax}, -1);
  for (int64_t t = 0; t < T; ++t) {
    const auto& mine = owned[static_cast<size_t>(t)];
    for (size_t x = 0; x < mine.size(); ++x) s.topk.at({t, static_cast<int64_t>(x)}) = mine[x];
  }
  if (sink_rank != rank) s.sink.clear();
  return s;
}

}  // namespace dcp::oracle
