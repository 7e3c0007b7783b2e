#include "tools/layout_cmd.hpp"

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "gpu/kernels/layout.hpp"
#include "tools/flags.hpp"

namespace dcp::tools {
namespace {

// Bounds that keep the tables readable and every product in gpu/kernels/layout.hpp inside int64_t
// (I N <= 2^30 with flags.hpp's --dcp-size and --interleave caps, positions < 2^41).
constexpr int64_t kMaxTableLen = 4096;              // --len: the table prints one line a position
constexpr int64_t kMaxPosition = int64_t{1} << 40;  // --offset and --seq

struct LayoutOptions {
  int64_t ranks = 4;       // N
  int64_t interleave = 1;  // I
  int64_t offset = 0;      // a, the chunk's first global position
  std::optional<int64_t> len, seq;
};

// The chunk length: --len, or two full cycles of I N positions (capped to the table's limit).
int64_t chunk_len(const LayoutOptions& o) {
  if (o.len) return *o.len;
  const int64_t two_cycles = 2 * o.ranks * o.interleave;
  return std::min(two_cycles, kMaxTableLen);
}

// Every flag is range-checked as it is parsed (flags.hpp), so the layout is valid here.
int run_layout(const LayoutOptions& o, std::ostream& out) {
  const gpu::DcpLayout lay{o.ranks, o.interleave};
  const int64_t a = o.offset, len = chunk_len(o), end = a + len;
  // Columns wide enough for the largest position and row.
  const int digits = static_cast<int>(std::to_string(std::max(end, o.seq.value_or(0))).size());
  const int pos_w = std::max(9, digits + 1), num_w = std::max(13, digits + 2);
  const int rows_w = std::max(18, 2 * digits + 6);  // "[a, b)"

  out << "# dcp-verify layout  N=" << lay.ranks << "  I=" << lay.interleave << "  chunk [" << a
      << ", " << end << ")  L=" << len << (o.seq ? "  S=" + std::to_string(*o.seq) : "") << "\n"
      << "#  owner(p) = floor(p / I) mod N;  row(p) = floor(p / (I N)) I + p mod I;  "
         "position(owner, row) must give p back (gpu/kernels/layout.hpp)\n"
      << "# " << std::setw(pos_w) << "pos" << std::setw(7) << "owner" << std::setw(pos_w) << "row"
      << std::setw(std::max(21, pos_w + 1)) << "position(owner,row)"
      << "  verdict\n";
  int64_t inverse_wrong = 0;
  for (int64_t pos = a; pos < end; ++pos) {
    const int64_t owner = lay.owner(pos), row = lay.row(pos), back = lay.position(owner, row);
    const bool right = back == pos;
    if (!right) ++inverse_wrong;
    out << "  " << std::setw(pos_w) << pos << std::setw(7) << owner << std::setw(pos_w) << row
        << std::setw(std::max(21, pos_w + 1)) << back << "  " << (right ? "OK" : "WRONG") << "\n";
  }

  // A contiguous chunk fills consecutive rows on each rank: [count(r, a), count(r, a + L)).
  out << "# chunk shares of [" << a << ", " << end
      << "): chunk_share(r, a, L); closed form count(r, a+L) - count(r, a); brute force "
         "#{p in chunk : owner(p) = r}; rows the chunk fills on r\n"
      << "# " << std::setw(5) << "rank" << std::setw(num_w) << "chunk_share" << std::setw(num_w)
      << "closed_form" << std::setw(num_w) << "brute_force"
      << "  " << std::left << std::setw(rows_w) << "rows" << std::right << "verdict\n";
  int64_t share_sum = 0, shares_wrong = 0;
  for (int64_t r = 0; r < lay.ranks; ++r) {
    const int64_t share = lay.chunk_share(r, a, len);
    const int64_t closed = lay.count(r, end) - lay.count(r, a);
    int64_t brute = 0;
    for (int64_t pos = a; pos < end; ++pos) brute += lay.owner(pos) == r ? 1 : 0;
    const bool right = share == closed && share == brute;
    if (!right) ++shares_wrong;
    share_sum += share;
    const std::string rows =
        "[" + std::to_string(lay.count(r, a)) + ", " + std::to_string(lay.count(r, end)) + ")";
    out << "  " << std::setw(5) << r << std::setw(num_w) << share << std::setw(num_w) << closed
        << std::setw(num_w) << brute << "  " << std::left << std::setw(rows_w) << rows << std::right
        << (right ? "OK" : "WRONG") << "\n";
  }

  bool seq_ok = true;
  if (o.seq) {
    const int64_t seq = *o.seq;
    out << "# context of S=" << seq << " tokens: rows_for(r, S), the rows rank r needs\n"
        << "# " << std::setw(5) << "rank" << std::setw(num_w) << "rows_for"
        << "\n";
    int64_t rows_max = 0, rows_sum = 0;
    for (int64_t r = 0; r < lay.ranks; ++r) {
      const int64_t rows = lay.rows_for(r, seq);
      rows_max = std::max(rows_max, rows);
      rows_sum += rows;
      out << "  " << std::setw(5) << r << std::setw(num_w) << rows << "\n";
    }
    // The KV cache allocates the same number of rows on every rank, a multiple of I.
    const int64_t physical = (rows_max + lay.interleave - 1) / lay.interleave * lay.interleave;
    out << "# physical rows per rank: " << physical
        << " (the largest rows_for, rounded up to a multiple of I); logical (widened) capacity: "
        << lay.logical_capacity(physical) << " = " << physical << " x N\n"
        << "# rows_for sums to " << rows_sum << " over the ranks (expected S = " << seq << ")\n";
    seq_ok = rows_sum == seq;
  }

  const bool ok = inverse_wrong == 0 && shares_wrong == 0 && share_sum == len && seq_ok;
  out << "# checks: position(owner(p), row(p)) == p wrong for " << inverse_wrong << " of " << len
      << " positions; shares wrong for " << shares_wrong << " of " << lay.ranks
      << " ranks; shares sum to " << share_sum << " (expected L = " << len << ")\n"
      << "# layout: " << (ok ? "OK" : "FAILED") << "\n";
  return ok ? kExitOk : kExitFail;
}

}  // namespace

Command add_layout_command(CLI::App& app) {
  auto o = std::make_shared<LayoutOptions>();
  CLI::App* cmd = app.add_subcommand("layout",
                                     "Print where the tokens of a chunk live across a DCP group "
                                     "(gpu/kernels/layout.hpp), and check it");
  cmd->add_option("--dcp-size", o->ranks, "N, ranks in a DCP group")
      ->check(int_in(1, kMaxRanks))
      ->capture_default_str();
  cmd->add_option("--interleave", o->interleave,
                  "I, tokens per block dealt to a rank (1: round-robin)")
      ->check(int_in(1, kMaxInterleave))
      ->capture_default_str();
  cmd->add_option("--offset", o->offset, "a, the chunk's first global position")
      ->check(int_in(0, kMaxPosition))
      ->capture_default_str();
  cmd->add_option("--len", o->len, "L, the chunk's length, <= 4096 (default 2 N I, at most 4096)")
      ->check(int_in(0, kMaxTableLen));
  cmd->add_option("--seq", o->seq, "S, a context length: rows each rank needs for it")
      ->check(int_in(0, kMaxPosition));
  return {cmd, [o](const Limits&) { return run_layout(*o, std::cout); }};
}

}  // namespace dcp::tools
