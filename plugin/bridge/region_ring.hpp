// region_ring.hpp — the bridge's shared region as a ring of the requests in flight: each request
// takes a region for its payload and its reply's room when it is sent and frees it once its reply
// has been read. Replies are read in the order the requests were sent, so regions are freed in the
// order they were taken, and the regions in use always form one run around the ring.
#pragma once

#include <cstddef>
#include <deque>

namespace dcp::bridge {

// [begin, end) in bytes; empty: no room (the request goes on the socket).
struct Region {
  size_t begin = 0, end = 0;
  bool empty() const { return end <= begin; }
};

class RegionRing {
 public:
  static constexpr size_t kAlign = 64;  // each region starts on a cache line

  explicit RegionRing(size_t capacity) : capacity_(capacity) {}

  // The next request's region of at least `bytes` (rounded up to kAlign), after the newest in use,
  // or at the ring's start where the end has no room; an empty one where no room is free (or bytes
  // is 0). Either way it is the newest request's, freed by free_oldest in its turn.
  Region take(size_t bytes) {
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    Region r = place(bytes);
    regions_.push_back(r);
    return r;
  }

  // Frees the region of the oldest request in flight (the one whose reply was read).
  void free_oldest() {
    if (!regions_.empty()) regions_.pop_front();
  }

  // The requests in flight (their regions or empty ones): what the tests check the ring by.
  size_t in_flight() const { return regions_.size(); }

 private:
  Region place(size_t bytes) const {
    if (bytes == 0 || bytes > capacity_) return {};
    const Region *oldest = nullptr, *newest = nullptr;
    for (const Region& r : regions_)
      if (!r.empty()) {
        if (oldest == nullptr) oldest = &r;
        newest = &r;
      }
    if (oldest == nullptr) return {0, bytes};
    const size_t first = oldest->begin, last = newest->end;
    if (last > first) {  // in use: [first, last); free: [last, capacity) and [0, first)
      if (capacity_ - last >= bytes) return {last, last + bytes};
      if (first >= bytes) return {0, bytes};
      return {};
    }
    if (first - last >= bytes) return {last, last + bytes};  // wrapped: free is [last, first)
    return {};
  }

  size_t capacity_;
  std::deque<Region> regions_;  // the requests in flight, oldest first
};

}  // namespace dcp::bridge
