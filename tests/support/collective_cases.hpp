// collective_cases.hpp — one exercise of a communicator's collectives with exact answers, for
// every transport's tests: rank r gathers the value r, sends 100 r + 10 d + i to rank d, and
// reduce-scatters the same sends (small integers: exact in any reduction order).
//
//   std::vector<CollectiveResults> got(kCollectiveRanks);  // filled by each rank's collectives
//   expect_collective_results(got);
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace dcp::test_support {

inline constexpr int64_t kCollectiveRanks = 5, kCollectiveCount = 3;

// Rank r's AllGather input [count].
inline std::vector<float> gather_input(int64_t r) {
  return std::vector<float>(kCollectiveCount, static_cast<float>(r));
}

// Rank r's All-to-All and ReduceScatter input [N, count].
inline std::vector<float> send_input(int64_t r) {
  std::vector<float> send(kCollectiveRanks * kCollectiveCount);
  for (int64_t d = 0; d < kCollectiveRanks; ++d)
    for (int64_t i = 0; i < kCollectiveCount; ++i)
      send[d * kCollectiveCount + i] = static_cast<float>(100 * r + 10 * d + i);
  return send;
}

struct CollectiveResults {
  std::vector<float> gathered;  // [N, count]
  std::vector<float> a2a;       // [N, count]
  std::vector<float> rs;        // [count]
};

// Every rank's results against the exact answers.
inline void expect_collective_results(const std::vector<CollectiveResults>& got) {
  constexpr int64_t kN = kCollectiveRanks, kCount = kCollectiveCount;
  ASSERT_EQ(static_cast<int64_t>(got.size()), kN);
  for (int64_t r = 0; r < kN; ++r) {
    const CollectiveResults& g = got[static_cast<size_t>(r)];
    ASSERT_EQ(static_cast<int64_t>(g.gathered.size()), kN * kCount);
    ASSERT_EQ(static_cast<int64_t>(g.a2a.size()), kN * kCount);
    ASSERT_EQ(static_cast<int64_t>(g.rs.size()), kCount);
    for (int64_t s = 0; s < kN; ++s)
      for (int64_t i = 0; i < kCount; ++i) {
        EXPECT_EQ(g.gathered[s * kCount + i], static_cast<float>(s)) << "rank " << r;
        EXPECT_EQ(g.a2a[s * kCount + i], static_cast<float>(100 * s + 10 * r + i)) << "rank " << r;
      }
    for (int64_t i = 0; i < kCount; ++i)
      EXPECT_EQ(g.rs[i], static_cast<float>(100 * (kN * (kN - 1) / 2) + kN * (10 * r + i)))
          << "rank " << r;
  }
}

}  // namespace dcp::test_support
