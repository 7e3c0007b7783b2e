// layout_cmd.hpp — `dcp-verify layout`: where the tokens of a chunk live, as a checked table.
//
// A teaching aid for gpu/kernels/layout.hpp (all the math comes from there). For a DCP group of N
// ranks with interleave I and a chunk [a, a + L) it prints the token -> (owner rank, row) map, each
// rank's share of the chunk (chunk_share, the closed form count(r, a + L) - count(r, a), and a
// brute-force count of owner(p) == r) and, with --seq S, the rows each rank needs for a context
// of S tokens and the logical (widened) capacity. It checks what it prints: the three shares
// agree, they sum to L, and position(owner(p), row(p)) == p for every p; exit 1 if not.
//
//   $ dcp-verify layout --dcp-size 4 --interleave 2 --offset 5 --len 11 --seq 100
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify layout` and its flags.
Command add_layout_command(CLI::App& app);

}  // namespace dcp::tools
