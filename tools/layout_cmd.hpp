// layout_cmd.hpp — `dcp-verify layout`: where the tokens of a chunk live, as a checked table.
//
// A teaching aid for gpu/kernels/layout.hpp (all the math comes from there). For a DCP group of N
// ranks with interleave I and a chunk [a, a + L) it prints the token -> (owner rank, row) map, each
// rank's share of the chunk (chunk_share, the closed form count(r, a + L) - count(r, a), and a
// brute-force count of owner(p) == r) and, with --seq S, the rows each rank needs for a context
// of S tokens and the logical (widened) capacity; with --page-size P also a paged allocation of
// --batch B requests (contexts from S/2 to S) sharing --shared-prefix L tokens, as plan_pages
// hands it out: each token's widened slot, rank, virtual page, pool page and pool row. It checks
// what it prints: the three shares agree, they sum to L, position(owner(p), row(p)) == p for
// every p, and a paged token lives on its position's owner, where its request's block table finds
// it, in a pool row no other token holds (a shared page's tokens once for all requests); exit 1
// if not.
//
//   $ dcp-verify layout --dcp-size 4 --interleave 2 --offset 5 --len 11 --seq 100
//   $ dcp-verify layout --dcp-size 2 --seq 24 --page-size 2 --batch 3 --shared-prefix 9
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify layout` and its flags.
Command add_layout_command(CLI::App& app);

}  // namespace dcp::tools
