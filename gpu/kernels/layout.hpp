// layout.hpp — where each token of the context lives across the N ranks of a DCP group.
//
// Token at global position pos lives on rank owner(pos) = floor(pos / I) mod N, in rank-local
// row row(pos) = floor(pos / (I N)) I + pos mod I. I = 1 is round-robin; I > 1 deals blocks of I
// consecutive tokens to each rank in turn (block interleave). position(rank, row) inverts the
// pair. count(rank, x) is the number of positions in [0, x) a rank owns, in closed form, so a
// chunk [a, a + L) gives rank r exactly count(r, a + L) - count(r, a) tokens.
//
// The widened slot space: every layer above the KV write/read kernels sees one unsplit logical
// space of capacity physical_rows * N; only this header knows it is split.
//
//   DcpLayout lay{/*ranks=*/4, /*interleave=*/2};
//   lay.owner(5) == 2;  lay.row(5) == 1;  lay.position(2, 1) == 5;  lay.count(2, 6) == 2;
#pragma once

#include <cstdint>

#include "gpu/kernels/hd.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

struct DcpLayout {
  int64_t ranks = 1;       // N, the DCP group size
  int64_t interleave = 1;  // I, tokens per block dealt to one rank

  // The rank that stores global position pos (pos >= 0).
  DCP_HD constexpr int64_t owner(int64_t pos) const { return (pos / interleave) % ranks; }
  // The rank-local row of global position pos on its owner.
  DCP_HD constexpr int64_t row(int64_t pos) const {
    return (pos / (interleave * ranks)) * interleave + pos % interleave;
  }
  // The global position stored at (rank, row): the inverse of (owner, row).
  DCP_HD constexpr int64_t position(int64_t rank, int64_t row) const {
    return (row / interleave) * interleave * ranks + rank * interleave + row % interleave;
  }
  // Positions in [0, x) owned by rank: full cycles of I N give I each; the partial cycle gives
  // the part of [rank I, rank I + I) below its length.
  DCP_HD constexpr int64_t count(int64_t rank, int64_t x) const {
    const int64_t cycle = interleave * ranks;
    const int64_t rem = x % cycle - rank * interleave;
    const int64_t tail = rem < 0 ? 0 : (rem > interleave ? interleave : rem);
    return (x / cycle) * interleave + tail;
  }
  // Tokens of the chunk [a, a + len) that land on rank.
  DCP_HD constexpr int64_t chunk_share(int64_t rank, int64_t a, int64_t len) const {
    return count(rank, a + len) - count(rank, a);
  }
  // Rows a rank needs to hold a context of seq tokens.
  DCP_HD constexpr int64_t rows_for(int64_t rank, int64_t seq) const { return count(rank, seq); }
  // The logical (widened) capacity of physical_rows rows per rank.
  DCP_HD constexpr int64_t logical_capacity(int64_t physical_rows) const {
    return physical_rows * ranks;
  }
};

// N >= 1 and I >= 1, named by their flags.
inline GpuStatus validate_layout(const DcpLayout& l) {
  if (l.ranks < 1) return DCP_GPU_ERROR("DcpLayout.ranks: got ", l.ranks, "; expected >= 1");
  if (l.interleave < 1)
    return DCP_GPU_ERROR("DcpLayout.interleave: got ", l.interleave, "; expected >= 1");
  return {};
}

}  // namespace dcp::gpu
