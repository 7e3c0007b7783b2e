#include "tools/sweep_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "gpu/run_threads.hpp"
#include "harness/report.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/footprint.hpp"
#include "tools/backends.hpp"
#include "tools/flags.hpp"
#include "tools/run_cmd.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

using nlohmann::json;

constexpr double kBytesPerGB = 1e9, kBytesPerMB = 1e6, kSecondsPerUs = 1e-6;
// Repeated multiplication by a factor such as 1.1 rounds at every step and may land a hair above
// an -e it should reach exactly: a relative slack far below one token keeps -e in the sweep.
constexpr double kSizeSlack = 1e-12;
constexpr int64_t kMaxSweepSeq = int64_t{1} << 24;  // beyond this the oracle check takes minutes
constexpr double kMaxFactor = 1024.0;  // -f: at least two sizes between 1 and 2^24 stay possible
constexpr size_t kMaxSizes = 1000;     // rows of one sweep (-b, -e and -f together)

struct SweepOptions : CaseOptions {
  std::string backend = "host";
  int64_t min_seq = 1024, max_seq = 16384, iters = 5, warmup = 1, check = 1;
  double factor = 2.0;
  uint64_t seed = 1;
  int64_t timeout_s = kDefaultTimeoutSeconds;
  std::optional<std::string> json_path;
};

struct SweepRow {
  int64_t seq = 0;
  double us = 0, us_one = 0, kv_bytes = 0, gbps = 0, ratio = -1;
  bool pass = true, checked = false;
  std::string report;
};

struct Timed {
  double median_us = 0.0;  // median wall time of the timed runs
  gpu::GroupRun last;      // the last run's output
};

// `iters` timed runs after `warmup` untimed ones; Ctrl-C stops between runs (nullopt).
gpu::Result<std::optional<Timed>> time_step(const props::DcpBackend& backend,
                                            const gpu::DcpInputs& in, const gpu::DcpConfig& cfg,
                                            int64_t iters, int64_t warmup) {
  Timed out;
  std::vector<double> us;
  for (int64_t i = 0; i < warmup + iters; ++i) {
    if (interrupted()) return std::optional<Timed>();
    const auto t0 = std::chrono::steady_clock::now();
    gpu::Result<gpu::GroupRun> run = backend(in, cfg);
    const double t =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (!run) return run.status();
    if (i >= warmup) us.push_back(t);
    out.last = std::move(*run);
  }
  std::sort(us.begin(), us.end());
  out.median_us = us[us.size() / 2];
  return std::optional<Timed>(std::move(out));
}

// KV bytes every rank of the TP group reads in one step: the rows it owns that some query token
// sees (masks and top-k included), times the KV heads it holds, in the caches' storage format (1
// byte an fp8 element, 2 a bf16 or f16 one, 4 an f32 one).
double kv_bytes_read(const props::DcpSetup& s, const oracle::Case& c) {
  const gpu::AttentionDims d{s.spec.tokens,   s.spec.q_heads, s.spec.kv_heads,
                             s.spec.head_dim, s.spec.v_dim,   s.spec.shared_latent};
  const auto geo = gpu::DcpGeometry::create(s.cfg, d);
  std::vector<char> read(static_cast<size_t>(c.seq()), 0);  // position seen by some token
  for (int64_t t = 0; t < c.tokens(); ++t)
    for (const int64_t p : oracle::visible_keys(c, t)) read[static_cast<size_t>(p)] = 1;
  std::vector<double> rows(static_cast<size_t>(geo->n), 0.0);  // per dcp rank
  for (int64_t p = 0; p < c.seq(); ++p)
    if (read[static_cast<size_t>(p)]) rows[static_cast<size_t>(s.cfg.layout.owner(p))] += 1.0;
  const double per_row_head =
      static_cast<double>(s.spec.head_dim + (s.spec.shared_latent ? 0 : s.spec.v_dim)) *
      static_cast<double>(gpu::format_bytes(props::to_storage_format(c.kv_dtype)));
  double bytes = 0;
  for (int64_t r = 0; r < geo->tp; ++r)
    bytes += rows[static_cast<size_t>(geo->dcp_rank(r))] * static_cast<double>(geo->kv_heads(r)) *
             per_row_head;
  return bytes;
}

std::string sizes_text(const SweepOptions& o) {
  std::ostringstream os;
  os << "-b " << o.min_seq << " -e " << o.max_seq << " -f " << exact_text(o.factor) << " -n "
     << o.iters << " -w " << o.warmup << " -c " << o.check << " --seed " << o.seed << case_flags(o);
  return os.str();
}

// The setup's fields as the sweep's flags name them: S is set by -b and -e.
constexpr props::SetupNames kSweepNames = [] {
  props::SetupNames n = kFlagNames;
  n.seq = "S (-b/-e)";
  return n;
}();

// One size's setup: the case the flags describe at context length `seq`.
oracle::Expected<RunCase> sized_case(CaseOptions shape, int64_t seq, const SweepOptions& o) {
  shape.seq = seq;
  return configured_case(shape, o.seed, 0, kSweepNames);  // the backend sets the deadline
}

// Sizes -b f^k up to -e: refused before counting them when there would be too many (an -f one
// ulp above 1 would take ~10^15 steps).
oracle::Expected<std::vector<int64_t>> sweep_sizes(const SweepOptions& o) {
  const double steps =
      std::floor(std::log(static_cast<double>(o.max_seq) / static_cast<double>(o.min_seq)) /
                 std::log(o.factor)) +
      1.0;
  if (!(steps <= static_cast<double>(kMaxSizes)))
    return DCP_ERROR("-b ", o.min_seq, " -e ", o.max_seq, " -f ", exact_text(o.factor), ": about ",
                     exact_text(steps), " sizes; expected at most ", kMaxSizes, " (a larger -f)");
  std::vector<int64_t> seqs;
  for (double s = static_cast<double>(o.min_seq);
       s <= static_cast<double>(o.max_seq) * (1 + kSizeSlack); s *= o.factor) {
    const auto v = static_cast<int64_t>(s + 0.5);
    if (seqs.empty() || v != seqs.back()) seqs.push_back(v);
  }
  return seqs;
}

// Why the sweep does not fit the limits: the largest size decides the memory (its own cache or
// the N = 1 baseline's), and every size x (warmup + iters + check) x (N, 1) the work.
std::optional<std::string> over_sweep_limits(const SweepOptions& o, const props::DcpSetup& last,
                                             const std::vector<int64_t>& seqs,
                                             const harness::Limits& lim) {
  props::DcpSetup big = last;
  // Every size writes its own chunks: budget for the longest write make_chunks draws.
  big.chunks = {std::min(o.max_seq, props::kMaxWriteChunk)};
  props::Footprint f = props::dcp_check_footprint(big, props::KvHolding::stored);
  props::DcpSetup one = big;  // the N = 1 baseline holds the whole cache on one rank
  one.cfg.tp_size = 1;
  one.cfg.layout = {1, 1};
  const props::Footprint f1 = props::dcp_check_footprint(one, props::KvHolding::stored);
  if (f1.bytes > f.bytes) f = f1;
  f.work = 0;
  const double runs = static_cast<double>(o.warmup + o.iters) + (o.check ? 1.0 : 0.0);
  for (const int64_t seq : seqs) {
    props::DcpSetup s = last;
    s.spec.seq = seq;
    s.chunks = {seq};
    f.work += 2.0 * runs * props::dcp_check_footprint(s).work;
  }
  if (const auto why = harness::over_limits(f, lim))
    return "-e " + std::to_string(o.max_seq) + case_flags(o) + ": " + *why;
  return std::nullopt;
}

// The sweep table's columns.
const Table& sweep_table() {
  static const Table t(1, {{"S", 10, Align::right, 0},
                           {"time(us)", 10, Align::right, 2},
                           {"KV MB", 8, Align::right, 2},
                           {"GB/s", 7, Align::right, 2},
                           {"N=1 time(us)", 12, Align::right, 2},
                           {"speedup", 7, Align::right, 2},
                           {"err/bound", 10, Align::right, 2},
                           {"verdict", 0, Align::left, 2}});
  return t;
}

void print_sweep_header(const SweepOptions& o, const props::DcpSetup& s0) {
  std::cout << "# dcp-verify sweep  backend=" << o.backend << "  " << sizes_text(o) << "\n"
            << "# case: " << props::describe(s0.spec) << " | " << props::describe(s0.cfg) << "\n"
            << "#  time: median wall time of one whole DCP step (KV writes, partial attention, "
               "combine) over -n runs; N=1: the same step on one rank\n"
            << "#  KV MB: bytes all ranks read (the caches' storage format: 2 B a bf16 element); "
               "GB/s: KV MB / time\n";
  sweep_table().print_header(std::cout);
}

// One size: the step timed on N ranks and on one, and judged (-c 1); nothing when interrupted.
oracle::Expected<std::optional<SweepRow>> measure_size(const props::DcpBackend& backend,
                                                       const CaseOptions& shape, int64_t seq,
                                                       const SweepOptions& o) {
  auto rc = sized_case(shape, seq, o);
  if (!rc) return rc.status();
  const props::DcpSetup& s = rc->setup;
  const oracle::Case c = props::make_case(s.spec, props::KvHolding::stored);
  const gpu::DcpInputs in = props::to_dcp_inputs(c, s.chunks);
  SweepRow row;
  row.seq = seq;
  const auto timed = time_step(backend, in, s.cfg, o.iters, o.warmup);
  if (!timed) return DCP_ERROR(timed.status().message());
  gpu::DcpConfig one = s.cfg;
  one.tp_size = 1;
  one.layout = {1, 1};
  one.page_scales = false;  // scales by page follow N ranks' pages: one rank keeps them by token
  const auto timed_one = time_step(backend, in, one, o.iters, o.warmup);
  if (!timed_one) return DCP_ERROR(timed_one.status().message());
  if (!*timed || !*timed_one)
    return std::optional<SweepRow>();  // Ctrl-C: this size is not reported
  row.us = (*timed)->median_us;
  row.us_one = (*timed_one)->median_us;
  row.kv_bytes = kv_bytes_read(s, c);
  row.gbps = row.kv_bytes / (row.us * kSecondsPerUs) / kBytesPerGB;
  if (o.check) {
    const props::DcpCheck chk = props::judge_dcp(c, s.cfg, (*timed)->last, {});
    row.checked = true;
    row.ratio = chk.max_ratio;
    row.pass = chk.pass;
    row.report = chk.report;
  }
  return std::optional<SweepRow>(row);
}

void print_size_row(const SweepRow& row) {
  sweep_table().print_row(
      std::cout,
      {std::to_string(row.seq), cell("%.1f", row.us), cell("%.3f", row.kv_bytes / kBytesPerMB),
       cell("%.2f", row.gbps), cell("%.1f", row.us_one), cell("%.2fx", row.us_one / row.us),
       row.checked ? cell("%.4f", row.ratio) : "-",
       row.checked ? (row.pass ? "OK" : "FAILED") : "unchecked"});
  if (!row.pass) {
    std::istringstream rep(row.report);
    for (std::string l; std::getline(rep, l);) std::cout << "#    " << l << "\n";
  }
}

// The summary lines and the JSON report; the exit code.
int finish_sweep(const SweepOptions& o, const props::DcpSetup& s0,
                 const std::vector<SweepRow>& rows, size_t planned, double secs) {
  int64_t failed = 0;
  for (const SweepRow& r : rows) failed += r.pass ? 0 : 1;
  const bool stopped = rows.size() < planned;
  char secs_s[32];
  std::snprintf(secs_s, sizeof secs_s, "%.1f", secs);
  std::cout << "# sizes: " << rows.size() << "  failed: " << failed << "  time: " << secs_s << " s"
            << (stopped
                    ? "  (interrupted: " + std::to_string(planned - rows.size()) + " sizes not run)"
                    : "")
            << "\n# reproduce: dcp-verify sweep " << sizes_text(o) << "\n"
            << "# sweep: "
            << (stopped      ? "INTERRUPTED"
                : failed > 0 ? "FAILED"
                : o.check    ? "OK"
                             : "UNCHECKED (-c 0: timed only, nothing judged)")
            << "\n";
  if (o.json_path) {
    json jrows = json::array();
    for (const SweepRow& r : rows)
      jrows.push_back({{"seq", r.seq},
                       {"time_us", r.us},
                       {"kv_bytes", r.kv_bytes},
                       {"gbps", r.gbps},
                       {"one_rank_time_us", r.us_one},
                       {"speedup", r.us_one / r.us},
                       {"ratio", r.checked ? json_number(r.ratio) : json(nullptr)},
                       {"verdict", r.checked ? (r.pass ? "OK" : "FAILED") : "unchecked"},
                       {"pass", r.checked ? json(r.pass) : json(nullptr)},
                       {"report", r.report}});
    const json report = {{"schema", "dcp-verify/sweep/2"},
                         {"backend", o.backend},
                         {"case", props::describe(s0.spec) + " | " + props::describe(s0.cfg)},
                         {"min_seq", o.min_seq},
                         {"max_seq", o.max_seq},
                         {"factor", o.factor},
                         {"iters", o.iters},
                         {"warmup", o.warmup},
                         {"check", o.check == 1},
                         {"seed", o.seed},
                         {"rows", jrows},
                         {"interrupted", stopped},
                         {"pass", o.check ? json(failed == 0 && !stopped) : json(nullptr)},
                         {"seconds", secs}};
    if (!write_json("sweep", *o.json_path, report)) return kExitBadInput;
  }
  if (stopped) return kExitInterrupted;
  return failed == 0 ? kExitOk : kExitFail;
}

int run_sweep(const SweepOptions& o, const harness::Limits& lim) {
  auto bad = [](const std::string& why) { return refuse("sweep", why, std::cerr); };
  if (const auto why = output_error("--json", o.json_path, {})) return bad(*why);
  const auto backend = open_in_process_backend(o.backend, std::chrono::seconds(o.timeout_s));
  if (!backend) return bad(backend.status().message());
  if (o.seq) return bad("--seq: the sweep sets S itself; use -b/--min-seq and -e/--max-seq");
  if (o.batch)
    return bad("--batch: the sweep times one request per step; run --batch checks batches");
  if (o.shared_prefix || o.retired)
    return bad(std::string(o.shared_prefix ? "--shared-prefix" : "--retired") +
               ": a batch's in one step, and the sweep times one request per step; run --batch "
               "--page-size checks them");
  if (o.max_seq < o.min_seq)
    return bad("-e/--max-seq: got " + std::to_string(o.max_seq) + "; expected -b .. 2^24");
  CaseOptions shape = o;
  if (!shape.dcp_size && !shape.preset) shape.dcp_size = 4;
  auto first = sized_case(shape, o.min_seq, o);
  if (!first) return bad(first.status().message());
  auto last = sized_case(shape, o.max_seq, o);
  if (!last) return bad(last.status().message());
  const auto seqs = sweep_sizes(o);
  if (!seqs) return bad(seqs.status().message());
  if (const auto why = over_sweep_limits(o, last->setup, *seqs, lim)) return bad(*why);
  print_sweep_header(o, first->setup);

  InterruptGuard guard;
  Progress progress("sweep", static_cast<int64_t>(seqs->size()));
  std::vector<SweepRow> rows;
  const auto t0 = std::chrono::steady_clock::now();
  for (const int64_t seq : *seqs) {
    if (interrupted()) break;
    progress.update(static_cast<int64_t>(rows.size()));
    const auto row = measure_size(*backend, shape, seq, o);
    if (!row) return bad(row.status().message());
    if (!*row) break;
    rows.push_back(**row);
    progress.clear();
    print_size_row(**row);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return finish_sweep(o, first->setup, rows, seqs->size(), secs);
}

}  // namespace

Command add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Time the DCP step over context lengths from -b to -e by factor -f, with bandwidth, the "
      "speedup over one rank and error/bound (like nccl-tests)");
  cmd->add_option("--backend", o->backend,
                  "Backend: " + backends_help() + " (cuda: N virtual ranks on GPU 0)")
      ->capture_default_str();
  cmd->add_option("-b,--min-seq", o->min_seq, "Smallest context length S")
      ->check(int_in(1, kMaxSweepSeq))
      ->capture_default_str();
  cmd->add_option("-e,--max-seq", o->max_seq, "Largest context length S (at least -b)")
      ->check(int_in(1, kMaxSweepSeq))
      ->capture_default_str();
  cmd->add_option("-f,--factor", o->factor, "Multiply S by this between rows")
      ->check(real_in(1.0, kMaxFactor, true))
      ->capture_default_str();
  cmd->add_option("-n,--iters", o->iters, "Timed runs per size (the median is shown)")
      ->check(int_in(1, kMaxIters))
      ->capture_default_str();
  cmd->add_option("-w,--warmup", o->warmup, "Untimed runs before them")
      ->check(int_in(0, kMaxIters))
      ->capture_default_str();
  cmd->add_option("-c,--check", o->check, "1: judge every size against the oracle; 0: time only")
      ->check(int_in(0, 1))
      ->capture_default_str();
  add_case_flags(cmd, *o);
  cmd->add_option("--seed", o->seed, "Seed of the case values and chunk writes")
      ->check(seed_value())
      ->capture_default_str();
  add_timeout_flag(cmd, o->timeout_s);
  cmd->add_option("--json", o->json_path, "Also write the report as JSON (docs/cli.md)");
  return {cmd, [o](const harness::Limits& lim) { return run_sweep(*o, lim); }};
}

}  // namespace dcp::tools
