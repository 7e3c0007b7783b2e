// The bridge's ring of shared-memory regions (plugin/bridge/region_ring.hpp): requests in flight
// never share a byte, a request takes the ring's start again once the end has no room, and one
// that does not fit is given no region (it goes on the socket).
#include <gtest/gtest.h>

#include <vector>

#include "plugin/bridge/region_ring.hpp"

namespace dcp::bridge {
namespace {

bool overlap(const Region& a, const Region& b) {
  return !a.empty() && !b.empty() && a.begin < b.end && b.begin < a.end;
}

TEST(RegionRing, FirstRegionAtTheStartRoundedToCacheLines) {
  RegionRing ring(1024);
  const Region r = ring.take(100);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, 128u);
  EXPECT_TRUE(ring.take(0).empty());  // nothing to place: the socket
  EXPECT_EQ(ring.in_flight(), 2u);    // both are requests in flight all the same
}

TEST(RegionRing, NoRoomGivesNoRegion) {
  RegionRing ring(512);
  ring.take(192);                         // [0, 192)
  EXPECT_EQ(ring.take(192).begin, 192u);  // [192, 384)
  EXPECT_TRUE(ring.take(192).empty());    // 128 left at the end, the start in use
  const Region r = ring.take(128);        // fits the end
  EXPECT_EQ(r.begin, 384u);
  EXPECT_EQ(r.end, 512u);
  EXPECT_EQ(ring.in_flight(), 4u);
}

TEST(RegionRing, WrappedRegionStaysBeforeTheOldest) {
  RegionRing ring(512);
  ring.take(192);                   // a [0, 192)
  const Region b = ring.take(192);  // b [192, 384)
  ring.free_oldest();               // a read: in use [192, 384)
  const Region c = ring.take(192);  // end has 128: wraps to [0, 192)
  EXPECT_EQ(c.begin, 0u);
  EXPECT_FALSE(overlap(b, c));
  EXPECT_TRUE(ring.take(64).empty());  // wrapped: free is [192, 192), none
  ring.free_oldest();                  // b read: in use [0, 192) (and the empty one)
  const Region d = ring.take(256);     // after c
  EXPECT_EQ(d.begin, 192u);
  EXPECT_FALSE(overlap(c, d));
  EXPECT_TRUE(ring.take(1024).empty());  // larger than the ring
}

// Many requests of varied sizes taken and freed in order, a few in flight at a time: no two
// regions in flight overlap, every region lies inside the ring, and most requests get one.
TEST(RegionRing, RegionsInFlightNeverOverlap) {
  constexpr size_t kCapacity = 4096;
  RegionRing ring(kCapacity);
  std::vector<Region> flight;  // oldest first, as the ring holds them
  size_t placed = 0, requests = 0;
  for (size_t i = 0; i < 2000; ++i) {
    const size_t bytes = 64 + (i * 7919) % 1500;
    const Region r = ring.take(bytes);
    ++requests;
    if (!r.empty()) {
      ++placed;
      EXPECT_LE(r.end, kCapacity);
      EXPECT_GE(r.end - r.begin, bytes);
      for (const Region& other : flight) EXPECT_FALSE(overlap(r, other)) << "request " << i;
    }
    flight.push_back(r);
    const size_t keep = 1 + i % 4;  // up to four in flight, as four ranks' threads
    while (flight.size() > keep) {
      ring.free_oldest();
      flight.erase(flight.begin());
    }
    ASSERT_EQ(ring.in_flight(), flight.size());
  }
  EXPECT_GT(placed, requests * 3 / 4);
}

}  // namespace
}  // namespace dcp::bridge
