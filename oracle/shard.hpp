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

#include "oracle/case.hpp"

namespace dcp::oracle {

// The DCP rank that stores key position pos (pos >= 0, ranks >= 1, interleave >= 1).
inline int64_t dcp_owner(int64_t pos, int64_t ranks, int64_t interleave) {
  return (pos / interleave) % ranks;
}

// The case restricted to the visible keys rank `rank` owns (as a top-k list of global positions,
// so masks and positions are unchanged); the sink kept only when rank == sink_rank.
// Requires a valid case.
Case shard_case(const Case& c, int64_t ranks, int64_t interleave, int64_t rank,
                std::optional<int64_t> sink_rank);

}  // namespace dcp::oracle
