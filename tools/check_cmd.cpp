#include "tools/check_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "oracle/batch.hpp"
#include "oracle/case_file.hpp"
#include "oracle/check.hpp"
#include "oracle/text.hpp"
#include "properties/footprint.hpp"
#include "tools/flags.hpp"
#include "tools/junit.hpp"
#include "tools/session.hpp"
#include "tools/table.hpp"

#ifdef DCP_HAVE_MPI
#include <mpi.h>

#include "gpu/comm/comm_mpi.hpp"
#include "tools/backends.hpp"
#include "tools/mpi_jobs.hpp"
#endif

namespace dcp::tools {
namespace {

using nlohmann::json;
using oracle::Arithmetic;
using oracle::Worst;

struct CheckOptions {
  std::string case_path, result_path, tier = "fast";
  std::string bound = "sound";  // the tier that gates the exit code: sound or statistical
  std::optional<std::string> json_path;
  std::optional<std::string> junit_path;  // --junit: the report as JUnit XML (tools/junit.hpp)
  bool quiet = false;
  int64_t timeout_s = kDefaultTimeoutSeconds;  // under mpirun: how long a process waits for peers
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string part_name(std::optional<int64_t> rank) {
  return rank ? "rank " + std::to_string(*rank) : "output";
}

std::string index_text(const Worst& w) {
  std::ostringstream os;
  os << "(" << w.index[0] << ", " << w.index[1];
  if (w.index[2] >= 0) os << ", " << w.index[2];
  os << ")";
  return os.str();
}

std::string claim_text(const oracle::DcpResult& r) {
  const Arithmetic& a = r.output_claim;
  std::ostringstream os;
  os << "accum " << (a.tf32 ? "tf32" : lower(oracle::dtype_name(a.accum)))
     << (a.truncating_mma ? "" : " (round to nearest)") << (a.ftz ? ", ftz" : "") << ", P cast "
     << (a.p_cast ? lower(oracle::dtype_name(*a.p_cast)) : "none") << ", o "
     << lower(oracle::dtype_name(a.out)) << ", lse " << lower(oracle::dtype_name(a.lse_out))
     << (a.kv_dequant ? ", kv dequantized to " + lower(oracle::dtype_name(*a.kv_dequant)) : "")
     << ", dcp_size " << r.dcp_size
     << (r.owner.empty() ? ", interleave " + std::to_string(r.interleave) : ", owner map")
     << ", splits " << r.splits << ", partials " << lower(oracle::dtype_name(a.partial_o)) << "/"
     << lower(oracle::dtype_name(a.partial_lse)) << " (" << r.partial_format_from << "), merge "
     << lower(oracle::dtype_name(a.merge_accum))
     << (a.merge_lse_accum ? ", merge lse " + lower(oracle::dtype_name(*a.merge_lse_accum)) : "")
     << (a.merge_depth > 0 ? ", pairwise merges " + std::to_string(a.merge_depth) + " deep" : "")
     << ", sink "
     << (r.sink_rank ? "on rank " + std::to_string(*r.sink_rank) : std::string("at the merge"))
     << ", tile " << a.tile << (a.tile == 1 ? " (any)" : "") << ", exp "
     << (a.exp_rel_err ? "rel err " + exact_text(*a.exp_rel_err) : "2 ulp")
     << (a.exp_bias ? " (bias " + exact_text(*a.exp_bias) + ")" : "")
     << (a.merge_exp_rel_err ? " (merge's rel err " + exact_text(*a.merge_exp_rel_err) + ")" : "")
     << (a.rescale_exp_rel_err ? " (rescales' rel err " + exact_text(*a.rescale_exp_rel_err) + ")"
                               : "")
     << ", log " << (a.log_rel_err ? "rel err " + exact_text(*a.log_rel_err) : "2^-21 / 3 ulp");
  return os.str();
}

// The worst element of a tensor; with the sound tier, what each step adds to its bound.
json worst_json(const Worst& w, int64_t elements, int64_t violations,
                const std::vector<oracle::BoundTerm>* terms = nullptr) {
  json idx = json::array({w.index[0], w.index[1]});
  if (w.index[2] >= 0) idx.push_back(w.index[2]);
  json out = {{"elements", elements},
              {"violations", violations},
              {"worst_index", idx},
              {"got", json_number(w.got)},
              {"expected", json_number(w.expected)},
              {"error", json_number(w.error)},
              {"bound", json_number(w.bound)},
              {"ratio", json_number(w.ratio)}};
  if (terms) {
    json list = json::array();
    for (const oracle::BoundTerm& b : *terms)
      list.push_back({{"term", b.name}, {"value", json_number(b.value)}});
    out["bound_terms"] = list;
  }
  return out;
}

// The largest shares of a bound's terms, for the worst element's line: "62% keys, 31%
// accumulation, 7% store" (shares under 1% left out); empty without terms.
std::string shares_text(const std::vector<oracle::BoundTerm>& terms) {
  double total = 0.0;
  for (const oracle::BoundTerm& b : terms) total += b.value;
  if (!(total > 0.0)) return "";
  std::vector<oracle::BoundTerm> sorted = terms;
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const oracle::BoundTerm& x, const oracle::BoundTerm& y) { return x.value > y.value; });
  std::string out;
  for (const oracle::BoundTerm& b : sorted) {
    const double share = 100.0 * b.value / total;
    if (share < 1.0) break;
    out += (out.empty() ? "" : ", ") + cell("%.0f", share) + "% " + b.name;
  }
  return out;
}

// Whether the result passes the tier that gates the exit code.
bool gate(const CheckOptions& o, const oracle::ResultCheck& rc) {
  return o.bound == "statistical" ? rc.pass_statistical() : rc.pass();
}

// docs/tolerances.md §10: each part's derivation allows kStatFalseAlarm, so a correct result is
// SUSPECT with probability at most that times the parts judged.
double statistical_false_alarm(const oracle::ResultCheck& rc) {
  return static_cast<double>(rc.parts.size()) * oracle::kStatFalseAlarm;
}

// The check table's columns.
Table check_table() {
  return Table(3, {{"part", 8, Align::left, 0},
                   {"tens", 4, Align::left},
                   {"elements", 10},
                   {"violations", 10},
                   {"max_err", 11},
                   {"bound", 11},
                   {"err/bound", 10},
                   {"err/stat", 9},
                   {"worst (t, h, d)", 15, Align::left, 2},
                   {"verdict", 0, Align::left, 2}});
}

// One tensor's verdict: FAILED over the sound bound, SUSPECT over the statistical one only.
const char* tensor_verdict(int64_t violations, int64_t suspects) {
  return violations > 0 ? "FAILED" : suspects > 0 ? "SUSPECT" : "OK";
}

void print_row(std::ostream& out, const Table& t, const std::string& part, const char* tensor,
               const Worst& w, const Worst& w_stat, int64_t elements, int64_t violations,
               int64_t suspects) {
  t.print_row(out,
              {part, tensor, std::to_string(elements), std::to_string(violations),
               cell("%.3e", w.error), cell("%.3e", w.bound), cell("%.4f", w.ratio),
               cell("%.4f", w_stat.ratio), index_text(w), tensor_verdict(violations, suspects)});
}

// " (k_scale per head, v_scale per tensor)" for a quantized cache's scales (by token: "per token"
// or "per token and head"); empty without them.
std::string scales_text(const oracle::Case& c) {
  std::string text;
  const bool by_token = c.kv_scale_grain == oracle::ScaleGrain::token;
  for (const auto& [name, s] :
       {std::pair{"k_scale", &c.k_scale}, std::pair{"v_scale", &c.v_scale}}) {
    if (s->empty()) continue;
    const bool one = by_token ? static_cast<int64_t>(s->size()) == c.seq() : s->size() == 1;
    text += std::string(text.empty() ? " (" : ", ") + name +
            (by_token ? (one ? " per token" : " per token and head")
                      : (one ? " per tensor" : " per head"));
  }
  return text.empty() ? text : text + ")";
}

// One request of the file (all of it when the case is not a batch) and its judgement.
struct Request {
  oracle::Case c;
  oracle::DcpResult r;
  oracle::ResultCheck rc;
  int64_t planned = 0;  // parts to judge: the output and every rank's partial
};

// "request 3: " before a batch's part names; empty for one request.
std::string request_prefix(size_t requests, size_t b) {
  return requests > 1 ? "request " + std::to_string(b) + ": " : "";
}

// The processes of the job judging the parts: one (every part here), or mpirun's P.
struct Job {
  int64_t rank = 0, size = 1;
  std::chrono::milliseconds deadline{0};  // how long a process waits for its peers (--timeout)
};

// Which process judges each part, the parts of every request in order (the output, then each
// rank's partial): the most costly first, each to the least loaded process so far. A part's cost
// is its (row, key) pairs, about T Hq S for the output and T Hq S / N for a rank's shard.
std::vector<int64_t> assign_parts(const std::vector<Request>& reqs, int64_t processes) {
  std::vector<double> cost;
  for (const Request& q : reqs) {
    const double full = static_cast<double>(q.c.tokens()) * static_cast<double>(q.c.q_heads()) *
                        static_cast<double>(q.c.seq());
    for (int64_t part = 0; part < q.planned; ++part)
      cost.push_back(part == 0 ? full : full / static_cast<double>(q.r.dcp_size));
  }
  std::vector<size_t> order(cost.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(static_cast<size_t>(processes), 0.0);
  std::vector<int64_t> owner(cost.size(), 0);
  for (const size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owner[i] = least;
    load[static_cast<size_t>(least)] += cost[i];
  }
  return owner;
}

#ifdef DCP_HAVE_MPI
// A judged part as doubles, for the gather to process 0: the rank (-1: the output), kappa, the
// six counts, then four Worst (index, got, expected, error, bound, ratio), then the worst O
// element's and LSE row's bound terms, each a count (0: none) and its values. Counts and indices
// are below 2^53, so exact.
constexpr size_t kWorstDoubles = 8;
constexpr size_t kPartFixed = 8;
constexpr size_t kTermsDoubles = 1 + oracle::kOBoundTermNames.size();
static_assert(oracle::kOBoundTermNames.size() == oracle::kLseBoundTermNames.size());
constexpr size_t kPartDoubles = kPartFixed + 4 * kWorstDoubles + 2 * kTermsDoubles;

void pack_terms(const std::vector<oracle::BoundTerm>& terms, double* p) {
  p[0] = static_cast<double>(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) p[1 + i] = terms[i].value;
}

std::vector<oracle::BoundTerm> unpack_terms(const std::array<const char*, 8>& names,
                                            const double* p) {
  std::vector<oracle::BoundTerm> terms;
  for (size_t i = 0; i < static_cast<size_t>(p[0]); ++i) terms.push_back({names[i], p[1 + i]});
  return terms;
}

void pack_worst(const Worst& w, double* p) {
  for (int i = 0; i < 3; ++i) p[i] = static_cast<double>(w.index[static_cast<size_t>(i)]);
  p[3] = w.got, p[4] = w.expected, p[5] = w.error, p[6] = w.bound, p[7] = w.ratio;
}

Worst unpack_worst(const double* p) {
  Worst w;
  for (int i = 0; i < 3; ++i) w.index[static_cast<size_t>(i)] = static_cast<int64_t>(p[i]);
  w.got = p[3], w.expected = p[4], w.error = p[5], w.bound = p[6], w.ratio = p[7];
  return w;
}

void pack_part(const oracle::PartCheck& pc, double* p) {
  const oracle::Comparison& c = pc.cmp;
  p[0] = pc.rank ? static_cast<double>(*pc.rank) : -1.0;
  p[1] = pc.kappa;
  const int64_t counts[] = {c.o_elements,     c.o_violations, c.lse_elements,
                            c.lse_violations, c.o_suspects,   c.lse_suspects};
  for (size_t i = 0; i < 6; ++i) p[2 + i] = static_cast<double>(counts[i]);
  const Worst* worst[] = {&c.o_worst, &c.lse_worst, &c.o_worst_stat, &c.lse_worst_stat};
  for (size_t i = 0; i < 4; ++i) pack_worst(*worst[i], p + kPartFixed + i * kWorstDoubles);
  pack_terms(pc.worst_terms.o, p + kPartFixed + 4 * kWorstDoubles);
  pack_terms(pc.worst_terms.lse, p + kPartFixed + 4 * kWorstDoubles + kTermsDoubles);
}

oracle::PartCheck unpack_part(const double* p) {
  oracle::PartCheck pc;
  if (p[0] >= 0.0) pc.rank = static_cast<int64_t>(p[0]);
  pc.kappa = p[1];
  oracle::Comparison& c = pc.cmp;
  int64_t* counts[] = {&c.o_elements,     &c.o_violations, &c.lse_elements,
                       &c.lse_violations, &c.o_suspects,   &c.lse_suspects};
  for (size_t i = 0; i < 6; ++i) *counts[i] = static_cast<int64_t>(p[2 + i]);
  Worst* worst[] = {&c.o_worst, &c.lse_worst, &c.o_worst_stat, &c.lse_worst_stat};
  for (size_t i = 0; i < 4; ++i) *worst[i] = unpack_worst(p + kPartFixed + i * kWorstDoubles);
  pc.worst_terms.o = unpack_terms(oracle::kOBoundTermNames, p + kPartFixed + 4 * kWorstDoubles);
  pc.worst_terms.lse =
      unpack_terms(oracle::kLseBoundTermNames, p + kPartFixed + 4 * kWorstDoubles + kTermsDoubles);
  return pc;
}
#endif

// The header: the command, the case (its first request's shapes and, for a batch, the totals),
// the claim (the same for every request: the metadata is the batch's) and the table's header.
void print_check_header(const CheckOptions& o, const std::vector<Request>& reqs, const Table& t) {
  const oracle::Case& c = reqs.front().c;
  std::ostream& out = std::cout;
  out << "# dcp-verify check  case=" << oracle::printable(o.case_path)
      << "  result=" << oracle::printable(o.result_path) << "  tier=" << o.tier << "\n";
  if (reqs.size() > 1) {
    int64_t tokens = 0, keys = 0;
    for (const Request& q : reqs) {
      tokens += q.c.tokens();
      keys += q.c.seq();
    }
    out << "# case: batch of " << reqs.size() << " requests, T_total=" << tokens
        << " S_total=" << keys << " Hq=" << c.q_heads() << " Hkv=" << c.kv_heads()
        << " Dk=" << c.head_dim() << " Dv=" << c.v_dim;
  } else {
    out << "# case: T=" << c.tokens() << " Hq=" << c.q_heads() << " Hkv=" << c.kv_heads()
        << " Dk=" << c.head_dim() << " Dv=" << c.v_dim << " S=" << c.seq();
  }
  out << (c.shared_latent() ? " (shared latent)" : "") << "  q "
      << lower(oracle::dtype_name(c.q_dtype)) << ", kv " << lower(oracle::dtype_name(c.kv_dtype))
      << scales_text(c) << "  lse base " << oracle::lse_base_name(c.lse_base) << "\n"
      << "# claim: " << claim_text(reqs.front().r) << "\n"
      << "#  worst (t, h, d): the element with the largest error/bound; err/stat: the largest "
         "error over the statistical bound (SUSPECT above 1); rank rows: that rank's partial vs "
         "the oracle on its shard\n";
  t.print_header(out);
}

// One row per part and tensor (all of them, or the failing ones with --quiet); in a batch the
// part names the request and t its token within the request.
void print_check_rows(const CheckOptions& o, const Table& t, const std::string& prefix,
                      const oracle::ResultCheck& rc) {
  for (const oracle::PartCheck& p : rc.parts) {
    const bool fine = p.cmp.pass_statistical();
    if (o.quiet && fine) continue;
    const std::string name = prefix + part_name(p.rank);
    print_row(std::cout, t, name, "o", p.cmp.o_worst, p.cmp.o_worst_stat, p.cmp.o_elements,
              p.cmp.o_violations, p.cmp.o_suspects);
    print_row(std::cout, t, name, "lse", p.cmp.lse_worst, p.cmp.lse_worst_stat, p.cmp.lse_elements,
              p.cmp.lse_violations, p.cmp.lse_suspects);
  }
}

// The worst element's line, and the verdict: OK, or what failed (the merged output, the ranks
// with a wrong partial), or how far an interrupted check got.
std::string check_verdict(const oracle::ResultCheck& rc, int64_t planned, std::ostream& out) {
  const bool stopped = static_cast<int64_t>(rc.parts.size()) < planned;
  const oracle::PartCheck& worst = rc.parts[rc.worst_part()];
  const bool o_worse = worst.cmp.o_worst.ratio >= worst.cmp.lse_worst.ratio;
  const Worst& w = o_worse ? worst.cmp.o_worst : worst.cmp.lse_worst;
  out << "# worst: " << part_name(worst.rank) << " " << (o_worse ? "o" : "lse") << " at (t, h"
      << (o_worse ? ", d" : "") << ") = " << index_text(w) << ": got " << cell("%.9g", w.got)
      << ", expected " << cell("%.9g", w.expected) << ", error " << cell("%.3e", w.error)
      << ", bound " << cell("%.3e", w.bound) << ", err/bound " << cell("%.4f", w.ratio) << "\n";
  if (const std::string shares = shares_text(o_worse ? worst.worst_terms.o : worst.worst_terms.lse);
      !shares.empty())
    out << "# its bound: " << shares << " (every term: --json)\n";
  const std::vector<int64_t> bad_ranks = rc.failing_ranks();
  const bool output_ok = rc.parts.front().cmp.pass();
  std::string verdict = rc.pass() ? "OK" : "FAILED";
  if (rc.pass() && !rc.pass_statistical()) {
    // Inside every sound bound, outside a statistical one: name the parts.
    verdict = "SUSPECT (over the statistical bound, inside the sound one:";
    for (const oracle::PartCheck& p : rc.parts)
      if (!p.cmp.pass_statistical()) verdict += " " + part_name(p.rank) + ",";
    verdict.back() = ')';
  }
  if (!rc.pass()) {
    verdict += " (";
    if (!output_ok) verdict += "the merged output violates its bound";
    if (!bad_ranks.empty()) {
      verdict += output_ok ? "" : "; ";
      verdict += "wrong partial on rank";
      verdict += bad_ranks.size() > 1 ? "s" : "";
      for (size_t i = 0; i < bad_ranks.size(); ++i)
        verdict += (i ? ", " : " ") + std::to_string(bad_ranks[i]);
    }
    verdict += ")";
  }
  if (stopped)
    verdict = "INTERRUPTED (" + std::to_string(planned - static_cast<int64_t>(rc.parts.size())) +
              " parts not judged; so far: " + verdict + ")";
  return verdict;
}

// The verdict's keys of a JSON report, for the parts of rc (one request's, or a whole batch's).
json verdict_fields(const CheckOptions& o, const oracle::ResultCheck& rc, bool stopped) {
  return {{"max_ratio", json_number(rc.max_ratio())},
          {"max_stat_ratio", json_number(rc.max_stat_ratio())},
          {"bound", o.bound},
          {"verdict", !rc.pass()               ? "FAILED"
                      : !rc.pass_statistical() ? "SUSPECT"
                                               : "OK"},
          {"false_alarm", json_number(statistical_false_alarm(rc))},
          {"interrupted", stopped},
          {"pass", gate(o, rc) && !stopped}};
}

// One request's part of the JSON report (docs/cli.md): the claim, every part, the verdict.
json request_report(const CheckOptions& o, const oracle::DcpResult& r,
                    const oracle::ResultCheck& rc, bool stopped) {
  const std::vector<int64_t> bad_ranks = rc.failing_ranks();
  const Arithmetic& a = r.output_claim;
  json parts = json::array();
  for (const oracle::PartCheck& p : rc.parts) {
    parts.push_back(
        {{"part", part_name(p.rank)},
         {"rank", p.rank ? json(*p.rank) : json(nullptr)},
         {"pass", p.cmp.pass()},
         {"pass_statistical", p.cmp.pass_statistical()},
         {"max_ratio", json_number(p.cmp.max_ratio())},
         {"max_stat_ratio", json_number(p.cmp.max_stat_ratio())},
         {"kappa", p.kappa},
         {"o", worst_json(p.cmp.o_worst, p.cmp.o_elements, p.cmp.o_violations, &p.worst_terms.o)},
         {"lse", worst_json(p.cmp.lse_worst, p.cmp.lse_elements, p.cmp.lse_violations,
                            &p.worst_terms.lse)},
         {"o_stat", worst_json(p.cmp.o_worst_stat, p.cmp.o_elements, p.cmp.o_suspects)},
         {"lse_stat", worst_json(p.cmp.lse_worst_stat, p.cmp.lse_elements, p.cmp.lse_suspects)}});
  }
  json report = {
      {"claim",
       {{"accum", a.tf32 ? "tf32" : lower(oracle::dtype_name(a.accum))},
        {"ftz", a.ftz},
        {"p_cast", a.p_cast ? json(lower(oracle::dtype_name(*a.p_cast))) : json(nullptr)},
        {"o", lower(oracle::dtype_name(a.out))},
        {"lse", lower(oracle::dtype_name(a.lse_out))},
        {"partial_o", lower(oracle::dtype_name(a.partial_o))},
        {"partial_lse", lower(oracle::dtype_name(a.partial_lse))},
        {"partial_format_from", r.partial_format_from},
        {"tile", a.tile},
        {"accum_rounding", a.truncating_mma ? "any" : "nearest"},
        {"exp_rel_err", a.exp_rel_err ? json_number(*a.exp_rel_err) : json(nullptr)},
        {"exp_bias", a.exp_bias ? json_number(*a.exp_bias) : json(nullptr)},
        {"log_rel_err", a.log_rel_err ? json_number(*a.log_rel_err) : json(nullptr)},
        {"merge_exp_rel_err",
         a.merge_exp_rel_err ? json_number(*a.merge_exp_rel_err) : json(nullptr)},
        {"rescale_exp_rel_err",
         a.rescale_exp_rel_err ? json_number(*a.rescale_exp_rel_err) : json(nullptr)},
        {"merge_accum", lower(oracle::dtype_name(a.merge_accum))},
        {"merge_lse_accum", lower(oracle::dtype_name(a.merge_lse_accum.value_or(a.merge_accum)))},
        {"merge_depth", a.merge_depth},
        {"kv_dequant",
         a.kv_dequant ? json(lower(oracle::dtype_name(*a.kv_dequant))) : json(nullptr)},
        {"dcp_size", r.dcp_size},
        {"interleave", r.owner.empty() ? json(r.interleave) : json(nullptr)},
        {"owner_map", !r.owner.empty()},
        {"splits", r.splits},
        {"sink_rank", r.sink_rank ? json(*r.sink_rank) : json("merge")}}},
      {"parts", parts},
      {"failing_ranks", bad_ranks}};
  report.update(verdict_fields(o, rc, stopped));
  return report;
}

// The JSON report (docs/cli.md): one request's fields at the top level, or for a batch the
// whole batch's verdict there and each request's report in "requests"; false when it could not
// be written.
bool write_check_json(const CheckOptions& o, const std::vector<Request>& reqs,
                      const oracle::ResultCheck& all, bool stopped, double secs) {
  json report = {{"schema", "dcp-verify/check/2"},
                 {"case", o.case_path},
                 {"result", o.result_path},
                 {"tier", o.tier}};
  if (reqs.size() == 1) {
    report.update(request_report(o, reqs.front().r, reqs.front().rc, stopped));
  } else {
    json requests = json::array();
    for (size_t b = 0; b < reqs.size(); ++b) {
      if (reqs[b].rc.parts.empty()) break;  // not reached before an interrupt
      json one = request_report(o, reqs[b].r, reqs[b].rc,
                                static_cast<int64_t>(reqs[b].rc.parts.size()) < reqs[b].planned);
      one["request"] = b;
      requests.push_back(std::move(one));
    }
    report["requests"] = requests;
    report.update(verdict_fields(o, all, stopped));
  }
  report["seconds"] = secs;
  return write_reports("check", o.json_path, o.junit_path, report);
}

int run_check(const CheckOptions& o, const Limits& lim, const Job& job = {}) {
  auto bad = [](const std::string& why) { return refuse("check", why, std::cerr); };
  const auto t0 = std::chrono::steady_clock::now();
  // The files read and checked, each request's case and result, before anything is judged; a
  // refusal here is this process's, and under mpirun every process hears of it (below).
  std::vector<Request> reqs;
  oracle::Tier tier = oracle::Tier::fast;
  int64_t planned = 0;
  props::Footprint judge;
  [[maybe_unused]] double work = 0.0;  // multiply-adds of every part (what MPI peers wait for)
  const std::string refused = [&]() -> std::string {
    if (const auto why = reports_error(o.json_path, o.junit_path,
                                       {{"--case", o.case_path}, {"--result", o.result_path}}))
      return *why;
    // Both files are held in memory while the parts are judged (the case's K and V in place).
    props::Footprint files =
        props::file_footprint(file_bytes(o.case_path), props::FileRead::case_in_place);
    files.bytes += props::file_footprint(file_bytes(o.result_path)).bytes;
    if (const auto why = over_limits(files, lim)) return "--case and --result: " + *why;
    auto case_file = oracle::read_safetensors(o.case_path, oracle::kCaseReadOptions);
    if (!case_file) return case_file.status().message();
    auto result_file = oracle::read_safetensors(o.result_path);
    if (!result_file) return result_file.status().message();
    // A batch is judged request by request (docs/format.md, "Batches").
    auto case_files = oracle::split_case_file(*case_file, o.case_path);
    if (!case_files) return case_files.status().message();
    auto result_files = oracle::split_result_file(*result_file, *case_file, o.result_path);
    if (!result_files) return result_files.status().message();
    const size_t B = case_files->size();
    tier = o.tier == "certify" ? oracle::Tier::certify : oracle::Tier::fast;
    reqs.resize(B);
    for (size_t b = 0; b < B; ++b) {
      const std::string in = B > 1 ? " (request " + std::to_string(b) + ")" : "";
      auto c = oracle::case_from_file(std::move((*case_files)[b]), o.case_path + in);
      if (!c) return c.status().message();
      auto r = oracle::result_from_file((*result_files)[b], *c, o.result_path + in);
      if (!r) return r.status().message();
      reqs[b].planned = oracle::part_count(*r);
      planned += reqs[b].planned;
      // Requests are judged one after the other: the largest one's footprint is the peak.
      const props::Footprint one = props::judge_footprint(*c, reqs[b].planned, tier);
      if (one.bytes > judge.bytes) judge = one;
      work += one.work;
      reqs[b].c = std::move(*c);
      reqs[b].r = std::move(*r);
    }
    judge.bytes += files.bytes;
    if (const auto why = over_limits(judge, lim)) return "--case " + o.case_path + ": " + *why;
    return "";
  }();
#ifdef DCP_HAVE_MPI
  if (job.size > 1) {
    // Every process arrives here, with its refusal or none: one refusing ends them all, named.
    const gpu::MpiVerdict v =
        job_agree("check", refused.empty() ? kExitOk : kExitBadInput, refused, job.deadline);
    if (v.code != kExitOk)
      return bad(v.rank == job.rank ? "process " + std::to_string(job.rank) + ": " + refused
                                    : "process " + std::to_string(v.rank) +
                                          " refused its input, and the job ends: " + v.message);
  }
#endif
  if (!refused.empty()) return bad(refused);
  const size_t B = reqs.size();
  InterruptGuard guard;
  const std::vector<int64_t> owner = assign_parts(reqs, job.size);
  Progress progress("check",
                    static_cast<int64_t>(std::count(owner.begin(), owner.end(), job.rank)));
  oracle::Watch watch;
  watch.stop = [] { return interrupted(); };
  oracle::ResultCheck all;  // every request's parts, for the batch's verdict
  std::vector<std::optional<oracle::PartCheck>> judged(owner.size());  // this process's (MPI)
  std::string why;                                                     // the first error here
  int64_t global = 0, done = 0;
  for (size_t b = 0; b < B && !interrupted() && why.empty(); ++b) {
    Request& q = reqs[b];
    for (int64_t part = 0; part < q.planned && !interrupted(); ++part, ++global) {
      if (owner[static_cast<size_t>(global)] != job.rank) continue;
      progress.update(done++);
      // Part 0 is the merged output, part k >= 1 the partial of rank k - 1.
      auto p = oracle::check_part(
          q.c, q.r, part == 0 ? std::nullopt : std::optional<int64_t>(part - 1), tier, watch);
      if (!p && interrupted()) break;  // inside a part: the parts so far are the summary
      if (!p) {
        why = request_prefix(B, b) + p.status().message();
        break;
      }
      if (job.size > 1) {
        judged[static_cast<size_t>(global)] = *p;
        continue;
      }
      q.rc.parts.push_back(*p);
      all.parts.push_back(*p);
    }
  }
  progress.clear();
#ifdef DCP_HAVE_MPI
  if (job.size > 1) {
    // Every process's parts to process 0, in part order; any error or Ctrl-C ends the job.
    const std::string me = "process " + std::to_string(job.rank);
    const std::string stopped_line = "# check: INTERRUPTED (" + me + "); nothing reported\n";
    // The peers may still be judging: a process waits --timeout beyond the time the whole job's
    // parts may take.
    const JobWait wait{"check", stopped_line, job.deadline + judging_time(work),
                       "the other processes' judgements"};
    const int code = !why.empty() ? kExitBadInput : interrupted() ? kExitInterrupted : kExitOk;
    if (const int jc = job_code(code, wait); jc != kExitOk) {
      if (code == kExitInterrupted) std::cout << stopped_line;
      if (code == kExitBadInput) bad(me + ": " + why);
      return jc;
    }
    std::vector<double> mine(judged.size() * kPartDoubles, 0.0);
    for (size_t g = 0; g < judged.size(); ++g)
      if (judged[g]) pack_part(*judged[g], &mine[g * kPartDoubles]);
    std::vector<double> every(job.rank == 0 ? mine.size() * static_cast<size_t>(job.size) : 0);
    MPI_Request req;
    MPI_Igather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, every.data(),
                static_cast<int>(mine.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD, &req);
    wait_polling(&req, wait);
    if (job.rank != 0) return kExitOk;  // process 0 reports for the job
    size_t g = 0;
    for (size_t b = 0; b < B; ++b)
      for (int64_t part = 0; part < reqs[b].planned; ++part, ++g) {
        const size_t from = static_cast<size_t>(owner[g]) * mine.size() + g * kPartDoubles;
        const oracle::PartCheck p = unpack_part(&every[from]);
        reqs[b].rc.parts.push_back(p);
        all.parts.push_back(p);
      }
  }
#endif
  if (!why.empty()) return bad(why);
  const bool stopped = static_cast<int64_t>(all.parts.size()) < planned;
  if (all.parts.empty()) {
    std::cout << "# check: INTERRUPTED (no part was judged)\n";
    const json report = {{"schema", "dcp-verify/check/2"},
                         {"case", o.case_path},
                         {"result", o.result_path},
                         {"tier", o.tier},
                         {"parts", json::array()},
                         {"interrupted", true},
                         {"pass", false}};
    if (!write_reports("check", o.json_path, o.junit_path, report)) return kExitBadInput;
    return kExitInterrupted;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  Table t = check_table();
  for (size_t b = 0; b < B; ++b) {
    for (const oracle::PartCheck& p : reqs[b].rc.parts)
      t.fit(0, request_prefix(B, b) + part_name(p.rank));
  }
  print_check_header(o, reqs, t);
  std::string verdict;
  if (B == 1) {
    print_check_rows(o, t, "", all);
    verdict = check_verdict(all, planned, std::cout);
  } else {
    // Each request's rows and verdict; the batch's worst element is the worst request's.
    std::string worst_line;
    double worst_ratio = -1.0;
    std::vector<std::string> failed, suspect;
    for (size_t b = 0; b < B && !reqs[b].rc.parts.empty(); ++b) {
      const Request& q = reqs[b];
      print_check_rows(o, t, request_prefix(B, b), q.rc);
      std::ostringstream line;
      const std::string v = check_verdict(q.rc, q.planned, line);
      std::cout << "# request " << b << ": T=" << q.c.tokens() << " S=" << q.c.seq() << ": " << v
                << "\n";
      if (q.rc.max_ratio() > worst_ratio) {
        worst_ratio = q.rc.max_ratio();
        worst_line = "# worst: request " + std::to_string(b) + ", " + line.str().substr(9);
        worst_line = worst_line.substr(0, worst_line.find('\n') + 1);
      }
      if (!q.rc.pass())
        failed.push_back(std::to_string(b));
      else if (!q.rc.pass_statistical())
        suspect.push_back(std::to_string(b));
    }
    std::cout << worst_line;
    auto list = [](const std::vector<std::string>& v) {
      std::string text;
      for (size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + v[i];
      return text;
    };
    verdict =
        !failed.empty()
            ? "FAILED (request" + std::string(failed.size() > 1 ? "s " : " ") + list(failed) + ")"
        : !suspect.empty() ? "SUSPECT (request" + std::string(suspect.size() > 1 ? "s " : " ") +
                                 list(suspect) + ", over the statistical bound only)"
                           : "OK";
    if (stopped)
      verdict = "INTERRUPTED (" + std::to_string(planned - static_cast<int64_t>(all.parts.size())) +
                " parts not judged; so far: " + verdict + ")";
  }
  std::cout << "# parts: " << all.parts.size()
            << "  max err/bound: " << cell("%.4f", all.max_ratio())
            << "  max err/stat: " << cell("%.4f", all.max_stat_ratio())
            << "  time: " << cell("%.1f", secs) << " s"
            << (job.size > 1 ? "  processes: " + std::to_string(job.size) : std::string()) << "\n"
            << "# bound: " << o.bound << " gates the exit; statistical tier's false-alarm "
            << "probability <= " << cell("%.1e", statistical_false_alarm(all)) << "\n"
            << "# check: " << verdict << "\n";
  if ((o.json_path || o.junit_path) && !write_check_json(o, reqs, all, stopped, secs))
    return kExitBadInput;
  if (stopped) return kExitInterrupted;
  return gate(o, all) ? kExitOk : kExitFail;
}

}  // namespace

Command add_check_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Judge an external implementation's result file against the oracle within the bound "
      "derived for its dtypes (docs/format.md)");
  cmd->add_option("--case", o->case_path, "Case file (safetensors): the inputs")->required();
  cmd->add_option("--result", o->result_path,
                  "Result file (safetensors): o [T,Hq,Dv], lse [T,Hq], optional o_partial "
                  "[N,T,Hq,Dv], lse_partial [N,T,Hq]")
      ->required();
  cmd->add_option("--tier", o->tier, "Oracle tier: fast (double-double) or certify (MPFR)")
      ->check(CLI::IsMember({"fast", "certify"}))
      ->capture_default_str();
  add_bound_flag(cmd, o->bound);
  cmd->add_option("--json", o->json_path, "Also write the report as JSON (docs/cli.md)");
  cmd->add_option("--junit", o->junit_path,
                  "Also write the report as JUnit XML, one test case per part (docs/cli.md)");
  add_switch(cmd, "--quiet", o->quiet, "Print failing rows and the summary only");
  add_timeout_flag(cmd, o->timeout_s);
  return {cmd, [o](const Limits& lim) {
#ifdef DCP_HAVE_MPI
            // Under mpirun -np P the parts are shared among the processes (assign_parts) and
            // process 0 reports them all; the node's processes share its memory.
            if (launched_by_mpirun()) {
              if (const auto st = gpu::mpi_init(nullptr, nullptr); !st)
                return refuse("check", st.message(), std::cerr);
              const Job job{gpu::mpi_world_rank(), gpu::mpi_world_size(),
                            std::chrono::seconds(o->timeout_s)};
              Limits mine = lim;
              mine.memory_bytes /= static_cast<double>(gpu::mpi_node().size);
              int code = kExitOk;
              if (job.size > 1) {
                const auto differ = inputs_differ("check", job.deadline);
                code = differ ? refuse("check", *differ, std::cerr) : run_check(*o, mine, job);
              } else {
                code = run_check(*o, lim);
              }
              gpu::mpi_finalize(code);
              return code;
            }
#endif
            return run_check(*o, lim);
          }};
}

}  // namespace dcp::tools
