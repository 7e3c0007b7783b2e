#include "tools/layout_cmd.hpp"

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpu/dcp_step.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/layout.hpp"
#include "harness/report.hpp"
#include "oracle/status.hpp"
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
  // A paged allocation of --batch requests of contexts from S/2 to S (as `run` makes them).
  int64_t page_size = 0, batch = 1, shared_prefix = 0, retired = 0;
  uint64_t page_seed = 1;
};

// The chunk length: --len, or two full cycles of I N positions (capped to the table's limit).
int64_t chunk_len(const LayoutOptions& o) {
  if (o.len) return *o.len;
  const int64_t two_cycles = 2 * o.ranks * o.interleave;
  return std::min(two_cycles, kMaxTableLen);
}

// Column widths wide enough for the largest position and row.
struct LayoutWidths {
  size_t pos, num, rows;
  explicit LayoutWidths(int64_t largest) {
    const size_t digits = std::to_string(largest).size();
    pos = std::max<size_t>(9, digits + 1);
    num = std::max<size_t>(13, digits + 2);
    rows = std::max<size_t>(18, 2 * digits + 6);  // "[a, b)"
  }
};

// One line a position of [a, end): its owner and row, and whether position(owner, row) gives it
// back. Returns how many did not.
int64_t print_positions(const gpu::DcpLayout& lay, int64_t a, int64_t end, const LayoutWidths& w,
                        std::ostream& out) {
  const Table t(2, {{"pos", w.pos, Align::right, 0},
                    {"owner", 7, Align::right, 0},
                    {"row", w.pos, Align::right, 0},
                    {"position(owner,row)", std::max<size_t>(21, w.pos + 1), Align::right, 0},
                    {"verdict", 0, Align::left, 2}});
  t.print_header(out);
  int64_t wrong = 0;
  for (int64_t pos = a; pos < end; ++pos) {
    const int64_t owner = lay.owner(pos), row = lay.row(pos), back = lay.position(owner, row);
    const bool right = back == pos;
    if (!right) ++wrong;
    t.print_row(out, {std::to_string(pos), std::to_string(owner), std::to_string(row),
                      std::to_string(back), right ? "OK" : "WRONG"});
  }
  return wrong;
}

struct ShareCheck {
  int64_t sum = 0, wrong = 0;
};

// A contiguous chunk fills consecutive rows on each rank: [count(r, a), count(r, a + L)). One line
// a rank: the share three ways (chunk_share, the closed form, brute force) and the rows.
ShareCheck print_shares(const gpu::DcpLayout& lay, int64_t a, int64_t len, const LayoutWidths& w,
                        std::ostream& out) {
  const int64_t end = a + len;
  out << "# chunk shares of [" << a << ", " << end
      << "): chunk_share(r, a, L); closed form count(r, a+L) - count(r, a); brute force "
         "#{p in chunk : owner(p) = r}; rows the chunk fills on r\n";
  const Table t(2, {{"rank", 5, Align::right, 0},
                    {"chunk_share", w.num, Align::right, 0},
                    {"closed_form", w.num, Align::right, 0},
                    {"brute_force", w.num, Align::right, 0},
                    {"rows", w.rows, Align::left, 2},
                    {"verdict", 0, Align::left, 0}});
  t.print_header(out);
  ShareCheck c;
  for (int64_t r = 0; r < lay.ranks; ++r) {
    const int64_t share = lay.chunk_share(r, a, len);
    const int64_t closed = lay.count(r, end) - lay.count(r, a);
    int64_t brute = 0;
    for (int64_t pos = a; pos < end; ++pos) brute += lay.owner(pos) == r ? 1 : 0;
    const bool right = share == closed && share == brute;
    if (!right) ++c.wrong;
    c.sum += share;
    const std::string rows =
        "[" + std::to_string(lay.count(r, a)) + ", " + std::to_string(lay.count(r, end)) + ")";
    t.print_row(out, {std::to_string(r), std::to_string(share), std::to_string(closed),
                      std::to_string(brute), rows, right ? "OK" : "WRONG"});
  }
  return c;
}

// The rows each rank needs for a context of S tokens and the cache they come to. Returns whether
// they sum to S.
bool print_context(const gpu::DcpLayout& lay, int64_t seq, const LayoutWidths& w,
                   std::ostream& out) {
  out << "# context of S=" << seq << " tokens: rows_for(r, S), the rows rank r needs\n";
  const Table t(2, {{"rank", 5, Align::right, 0}, {"rows_for", w.num, Align::right, 0}});
  t.print_header(out);
  int64_t rows_max = 0, rows_sum = 0;
  for (int64_t r = 0; r < lay.ranks; ++r) {
    const int64_t rows = lay.rows_for(r, seq);
    rows_max = std::max(rows_max, rows);
    rows_sum += rows;
    t.print_row(out, {std::to_string(r), std::to_string(rows)});
  }
  // The KV cache allocates the same number of rows on every rank, a multiple of I.
  const int64_t physical = (rows_max + lay.interleave - 1) / lay.interleave * lay.interleave;
  out << "# physical rows per rank: " << physical
      << " (the largest rows_for, rounded up to a multiple of I); logical (widened) capacity: "
      << lay.logical_capacity(physical) << " = " << physical << " x N\n"
      << "# rows_for sums to " << rows_sum << " over the ranks (expected S = " << seq << ")\n";
  return rows_sum == seq;
}

// Request b's context: S - floor(b S / (2 B)), as `run --batch` makes them.
int64_t context_of(int64_t seq, int64_t b, int64_t batch) { return seq - b * seq / (2 * batch); }

// A paged allocation of `run --batch`'s requests over the group's pools (gpu/dcp_step.hpp):
// the batch's inputs and plan_pages' pages, planned before anything is printed.
struct PagedBatch {
  gpu::DcpInputs in;
  gpu::PagePlan plan;
};

// The batch of --seq, --batch, --shared-prefix and --retired planned, or why it cannot be (one
// line, naming the flag).
oracle::Expected<PagedBatch> plan_paged(const LayoutOptions& o, const gpu::DcpLayout& lay) {
  gpu::DcpInputs in;
  in.seq = *o.seq;
  if (o.batch > 1) {
    in.cu_seqlens_q = {0};
    in.cu_seqlens_k = {0};
    for (int64_t b = 0; b < o.batch; ++b) {
      in.cu_seqlens_q.push_back(std::max<int64_t>(0, b + 1 - o.retired));  // retired: no query
      in.cu_seqlens_k.push_back(in.cu_seqlens_k.back() + context_of(*o.seq, b, o.batch));
    }
    in.seq = in.cu_seqlens_k.back();
  }
  in.shared_prefix = o.shared_prefix;
  in.retired = o.retired;
  gpu::DcpConfig cfg;
  cfg.layout = lay;
  cfg.tp_size = lay.ranks;
  cfg.page_size = o.page_size;
  cfg.page_seed = o.page_seed;
  const int64_t shortest = context_of(*o.seq, o.batch - 1, o.batch);
  if (o.page_size % lay.interleave != 0)
    return DCP_ERROR("--page-size ", o.page_size, " is not a multiple of --interleave ",
                     lay.interleave,
                     " (a virtual page of page_size N slots holds whole "
                     "interleave blocks)");
  if (o.shared_prefix > 0 && o.batch < 2)
    return DCP_ERROR("--shared-prefix ", o.shared_prefix, ": needs --batch of at least 2");
  if (o.retired > 0 && o.retired >= o.batch)
    return DCP_ERROR("--retired ", o.retired, ": expected fewer than --batch ", o.batch,
                     " (a live request at least)");
  if (o.shared_prefix > shortest)
    return DCP_ERROR("--shared-prefix ", o.shared_prefix, ": more than the shortest request's ",
                     shortest, " tokens");
  if (in.seq > kMaxTableLen)
    return DCP_ERROR("the batch's ", in.seq, " tokens: more than the ", kMaxTableLen,
                     " lines the table prints (a smaller --seq or --batch)");
  gpu::Result<gpu::PagePlan> plan = gpu::plan_pages(in, cfg);
  if (!plan) return DCP_ERROR(plan.status().message());
  return PagedBatch{std::move(in), std::move(*plan)};
}

// The pages of a planned batch: one line a token of each request, its widened slot, owner,
// virtual page, pool page and pool row. Checks that the slot's owner is the position's, that the
// request's view (its block table) finds the token at the slot's row, and that no pool row of
// any rank holds two tokens, apart from a shared page's, held once for every request. Returns
// the lines that failed.
int64_t print_paged(const LayoutOptions& o, const gpu::DcpLayout& lay, const PagedBatch& batch,
                    std::ostream& out) {
  const gpu::DcpInputs& in = batch.in;
  const gpu::PagePlan& plan = batch.plan;
  const int64_t total = in.seq;
  const int64_t P = plan.page_size, virtual_page = P * lay.ranks;
  out << "# paged allocation: " << o.batch << " request(s) of S_b = S - floor(b S / (2 B)) tokens"
      << (o.shared_prefix > 0 ? ", sharing the first " + std::to_string(o.shared_prefix) : "")
      << (o.retired > 0 ? ", the first " + std::to_string(o.retired) +
                              " retired (their own pages freed, then reused)"
                        : "")
      << "; pages of P=" << P << " rows, virtual pages of P N = " << virtual_page
      << " slots; a pool of " << plan.pool_pages << " pages a rank (" << plan.shared_pages
      << " shared), in an order drawn from --page-seed " << o.page_seed << "\n"
      << "#  slot = table[p / (P N)] P N + p mod (P N) (the widened slot); owner(slot) = owner(p); "
         "pool_row = table[row(p) / P] P + row(p) mod P = row(slot)\n";
  const Table t(2, {{"req", 5, Align::right, 0},
                    {"pos", 7, Align::right, 0},
                    {"slot", 9, Align::right, 0},
                    {"owner", 7, Align::right, 0},
                    {"vpage", 7, Align::right, 0},
                    {"pool_page", 11, Align::right, 0},
                    {"pool_row", 10, Align::right, 0},
                    {"verdict", 0, Align::left, 2}});
  t.print_header(out);
  // (rank, pool row) -> the (request, position) it holds: at most kMaxTableLen entries.
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> held;
  int64_t wrong = 0;
  const std::set<int32_t> freed(plan.freed.begin(), plan.freed.end());
  for (int64_t b = 0; b < in.requests(); ++b) {
    if (b == in.retired)  // the retired requests' own pages are free again: drop their tokens
      std::erase_if(
          held, [&](const auto& e) { return e.second.second >= plan.shared_pages * virtual_page; });
    const int32_t* table = plan.table(b);
    gpu::KvView view;
    view.block_table = table;
    view.page = P;
    for (int64_t pos = 0; pos < in.request_seq(b); ++pos) {
      const int64_t slot = gpu::widened_slot(plan, table, lay, pos);
      const int64_t owner = lay.owner(slot), pool_row = lay.row(slot);
      bool ok = owner == lay.owner(pos) && view.slot(lay.row(pos)) == pool_row;
      const bool shared_page = pos < plan.shared_pages * virtual_page;
      const auto [cell, fresh] = held.try_emplace({owner, pool_row}, b, pos);
      if (!fresh && !(shared_page && cell->second.second == pos)) ok = false;  // two tokens
      if (!ok) ++wrong;
      t.print_row(out, {std::to_string(b), std::to_string(pos), std::to_string(slot),
                        std::to_string(owner), std::to_string(pos / virtual_page),
                        std::to_string(table[pos / virtual_page]), std::to_string(pool_row),
                        !ok                                      ? "WRONG"
                        : b < in.retired                         ? "OK retired"
                        : shared_page && b > 0                   ? "OK shared"
                        : freed.count(table[pos / virtual_page]) ? "OK reused"
                                                                 : "OK"});
    }
  }
  out << "# paged: " << wrong << " of " << total
      << " tokens misplaced (slot owner, view row, or a pool row holding two tokens)\n";
  return wrong;
}

// Every flag is range-checked as it is parsed (flags.hpp), so the layout is valid here.
int run_layout(const LayoutOptions& o, std::ostream& out, std::ostream& err) {
  if (o.page_size > 0 && !o.seq) {
    err << "dcp-verify layout: --page-size: needs --seq, the context it allocates\n";
    return kExitBadInput;
  }
  if (o.page_size == 0 && (o.batch > 1 || o.shared_prefix > 0 || o.retired > 0)) {
    err << "dcp-verify layout: --batch, --shared-prefix, --retired: a paged allocation's; give "
           "--page-size\n";
    return kExitBadInput;
  }
  const gpu::DcpLayout lay{o.ranks, o.interleave};
  // Every refusal before the first line of output.
  std::optional<PagedBatch> batch;
  if (o.page_size > 0) {
    oracle::Expected<PagedBatch> planned = plan_paged(o, lay);
    if (!planned) {
      err << "dcp-verify layout: " << planned.status().message() << "\n";
      return kExitBadInput;
    }
    batch = std::move(*planned);
  }
  const int64_t a = o.offset, len = chunk_len(o), end = a + len;
  const LayoutWidths w(std::max(end, o.seq.value_or(0)));
  out << "# dcp-verify layout  N=" << lay.ranks << "  I=" << lay.interleave << "  chunk [" << a
      << ", " << end << ")  L=" << len << (o.seq ? "  S=" + std::to_string(*o.seq) : "") << "\n"
      << "#  owner(p) = floor(p / I) mod N;  row(p) = floor(p / (I N)) I + p mod I;  "
         "position(owner, row) must give p back (gpu/kernels/layout.hpp)\n";
  const int64_t inverse_wrong = print_positions(lay, a, end, w, out);
  const ShareCheck shares = print_shares(lay, a, len, w, out);
  const bool seq_ok = !o.seq || print_context(lay, *o.seq, w, out);
  const int64_t paged_wrong = batch ? print_paged(o, lay, *batch, out) : 0;
  const bool ok =
      inverse_wrong == 0 && shares.wrong == 0 && shares.sum == len && seq_ok && paged_wrong == 0;
  out << "# checks: position(owner(p), row(p)) == p wrong for " << inverse_wrong << " of " << len
      << " positions; shares wrong for " << shares.wrong << " of " << lay.ranks
      << " ranks; shares sum to " << shares.sum << " (expected L = " << len << ")\n"
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
  cmd->add_option("--page-size", o->page_size,
                  "P: with --seq, print a paged allocation: the widened slot, rank, pool page "
                  "and pool row of every token (0: none)")
      ->check(int_in(0, kMaxTableLen));
  cmd->add_option("--batch", o->batch,
                  "B, requests of the paged allocation (contexts from S/2 to S, as run makes them)")
      ->check(int_in(1, kMaxTableLen))
      ->capture_default_str();
  cmd->add_option("--shared-prefix", o->shared_prefix,
                  "L, tokens the requests share (their whole virtual pages are held once)")
      ->check(int_in(0, kMaxTableLen))
      ->capture_default_str();
  cmd->add_option("--retired", o->retired,
                  "R, the first requests of the batch, finished: their own pages freed and "
                  "reused by the rest")
      ->check(int_in(0, kMaxTableLen))
      ->capture_default_str();
  cmd->add_option("--page-seed", o->page_seed, "The pool's shuffled order")
      ->check(seed_value())
      ->capture_default_str();
  return {cmd, [o](const harness::Limits&) { return run_layout(*o, std::cout, std::cerr); }};
}

}  // namespace dcp::tools
