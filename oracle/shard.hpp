// shard.hpp — the oracle's view of DCP's token layout: which rank owns a key, and a case
// restricted to one rank's keys (that rank's exact partial is the oracle's attention of it).
//
// The oracle states the layout itself, from the design (docs/case-model.md), and shares no code
// with gpu/: key p lives on rank floor(p / I) mod N. The sink is counted exactly once: on
// sink_rank, or on no rank when the implementation adds it at the merge (convention.hpp).
//
//   Case s = shard_case(c, /*ranks=*/4, /*interleave=*/2, /*rank=*/1, /*sink_rank=*/0);
//   Expected<Attention> part = reference(s);   // rank 1's exact (O_1, LSE_1)
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "oracle/case.hpp"

namespace dcp::oracle {

// The DCP rank that stores key position pos (pos >= 0, ranks >= 1, interleave >= 1).
inline int64_t dcp_owner(int64_t pos, int64_t ranks, int64_t interleave) {
  return (pos / interleave) % ranks;
}

// Who owns each key: the DCP layout (key p on floor(p / I) mod N), or an explicit map, one rank
// per key position, for engines whose ownership is another function (slot-based, paged pools).
struct Ownership {
  int64_t ranks = 1;
  int64_t interleave = 1;
  std::vector<int64_t> owner;  // [S]; empty: the layout
  int64_t of(int64_t pos) const {
    return owner.empty() ? dcp_owner(pos, ranks, interleave) : owner[static_cast<size_t>(pos)];
  }
};

// The case restricted to the visible keys rank `rank` owns (as a top-k list of global positions,
// so masks and positions are unchanged); the sink kept only when rank == sink_rank.
// Requires a valid case and, with an explicit map, one entry per key position.
Case shard_case(const Case& c, const Ownership& own, int64_t rank,
                std::optional<int64_t> sink_rank);
inline Case shard_case(const Case& c, int64_t ranks, int64_t interleave, int64_t rank,
                       std::optional<int64_t> sink_rank) {
  return shard_case(c, Ownership{ranks, interleave, {}}, rank, sink_rank);
}

}  // namespace dcp::oracle
