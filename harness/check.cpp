#include "harness/check.hpp"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <string_view>

#include "harness/report.hpp"
#include "oracle/batch.hpp"
#include "oracle/text.hpp"
#include "properties/footprint.hpp"

namespace dcp::harness {

using nlohmann::json;
using oracle::Arithmetic;
using oracle::Worst;

std::string part_name(std::optional<int64_t> rank) {
  return rank ? "rank " + std::to_string(*rank) : "output";
}

bool passes(props::BoundTier gate, const oracle::ResultCheck& rc) {
  return gate == props::BoundTier::statistical ? rc.pass_statistical() : rc.pass();
}

double statistical_false_alarm(const oracle::ResultCheck& rc) {
  return static_cast<double>(rc.parts.size()) * oracle::kStatFalseAlarm;
}

oracle::Expected<CheckPlan> plan_check(const CheckParams& p, const Limits& lim) {
  CheckPlan plan;
  plan.params = p;
  // Both files are held in memory while the parts are judged (the case's K and V in place, where
  // read so).
  props::Footprint files =
      props::file_footprint(file_bytes(p.case_path),
                            p.in_place ? props::FileRead::case_in_place : props::FileRead::decoded);
  files.bytes += props::file_footprint(file_bytes(p.result_path)).bytes;
  if (const auto why = over_limits(files, lim)) return DCP_ERROR("--case and --result: ", *why);
  auto case_file = oracle::read_safetensors(
      p.case_path, p.in_place ? oracle::kCaseReadOptions : oracle::StReadOptions{});
  if (!case_file) return case_file.status();
  auto result_file = oracle::read_safetensors(p.result_path);
  if (!result_file) return result_file.status();
  // A batch is judged request by request (docs/format.md, "Batches").
  auto case_files = oracle::split_case_file(*case_file, p.case_path);
  if (!case_files) return case_files.status();
  auto result_files = oracle::split_result_file(*result_file, *case_file, p.result_path);
  if (!result_files) return result_files.status();
  const size_t B = case_files->size();
  plan.reqs.resize(B);
  props::Footprint judge;
  for (size_t b = 0; b < B; ++b) {
    const std::string in = B > 1 ? " (request " + std::to_string(b) + ")" : "";
    auto c = oracle::case_from_file(std::move((*case_files)[b]), p.case_path + in);
    if (!c) return c.status();
    auto r = oracle::result_from_file((*result_files)[b], *c, p.result_path + in);
    if (!r) return r.status();
    CheckRequest& q = plan.reqs[b];
    q.planned = oracle::part_count(*r);
    plan.planned += q.planned;
    // Requests are judged one after the other: the largest one's footprint is the peak.
    const props::Footprint one = props::judge_footprint(*c, q.planned, p.tier);
    if (one.bytes > judge.bytes) judge = one;
    plan.work += one.work;
    q.c = std::move(*c);
    q.r = std::move(*r);
  }
  judge.bytes += files.bytes;
  if (const auto why = over_limits(judge, lim))
    return DCP_ERROR("--case ", p.case_path, ": ", *why);
  return plan;
}

std::vector<int64_t> assign_parts(const CheckPlan& plan, int64_t processes) {
  std::vector<double> cost;
  for (const CheckRequest& q : plan.reqs) {
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

oracle::Status judge_parts(const CheckPlan& plan, const std::vector<int64_t>& owner,
                           int64_t process, const oracle::Watch& watch,
                           std::vector<std::optional<oracle::PartCheck>>& judged,
                           const std::function<void(int64_t)>& progress) {
  const auto stopped = [&] { return watch.stop && watch.stop(); };
  const size_t B = plan.reqs.size();
  int64_t global = 0, done = 0;
  for (size_t b = 0; b < B && !stopped(); ++b) {
    const CheckRequest& q = plan.reqs[b];
    for (int64_t part = 0; part < q.planned && !stopped(); ++part, ++global) {
      if (owner[static_cast<size_t>(global)] != process) continue;
      if (progress) progress(done++);
      // Part 0 is the merged output, part k >= 1 the partial of rank k - 1.
      auto p =
          oracle::check_part(q.c, q.r, part == 0 ? std::nullopt : std::optional<int64_t>(part - 1),
                             plan.params.tier, watch);
      if (!p && stopped()) break;  // inside a part: the parts so far are the summary
      if (!p)
        return DCP_ERROR(B > 1 ? "request " + std::to_string(b) + ": " : "", p.status().message());
      judged[static_cast<size_t>(global)] = std::move(*p);
    }
  }
  return {};
}

oracle::ResultCheck collect_parts(CheckPlan& plan,
                                  const std::vector<std::optional<oracle::PartCheck>>& judged) {
  oracle::ResultCheck all;
  size_t g = 0;
  for (CheckRequest& q : plan.reqs) {
    q.rc.parts.clear();
    for (int64_t part = 0; part < q.planned; ++part, ++g) {
      if (g >= judged.size() || !judged[g]) return all;
      q.rc.parts.push_back(*judged[g]);
      all.parts.push_back(*judged[g]);
    }
  }
  return all;
}

namespace {

// The worst element of a tensor; with the sound tier, what each step adds to its bound.
json worst_json(const oracle::Worst& w, int64_t elements, int64_t violations,
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

json optional_number(const std::optional<double>& x) { return x ? json_number(*x) : json(nullptr); }

// What the result claims, as the report spells it (docs/cli.md).
json claim_json(const oracle::DcpResult& r) {
  const oracle::Arithmetic& a = r.output_claim;
  return {{"accum", a.tf32 ? "tf32" : oracle::format_text(a.accum)},
          {"ftz", a.ftz},
          {"p_cast", a.p_cast ? json(oracle::format_text(*a.p_cast)) : json(nullptr)},
          {"o", oracle::format_text(a.out)},
          {"lse", oracle::format_text(a.lse_out)},
          {"partial_o", oracle::format_text(a.partial_o)},
          {"partial_lse", oracle::format_text(a.partial_lse)},
          {"partial_format_from", r.partial_format_from},
          {"tile", a.tile},
          {"dot_lanes", a.dot_lanes},
          {"accum_rounding", a.truncating_mma ? "any" : "nearest"},
          {"exp_rel_err", optional_number(a.exp_rel_err)},
          {"exp_bias", optional_number(a.exp_bias)},
          {"log_rel_err", optional_number(a.log_rel_err)},
          {"merge_exp_rel_err", optional_number(a.merge_exp_rel_err)},
          {"rescale_exp_rel_err", optional_number(a.rescale_exp_rel_err)},
          {"merge_accum", oracle::format_text(a.merge_accum)},
          {"merge_lse_accum", oracle::format_text(a.merge_lse_accum.value_or(a.merge_accum))},
          {"merge_depth", a.merge_depth},
          {"merge_form", a.merge_scaled ? "scaled" : "any"},
          {"kv_dequant", a.kv_dequant ? json(oracle::format_text(*a.kv_dequant)) : json(nullptr)},
          {"dcp_size", r.dcp_size},
          {"interleave", r.owner.empty() ? json(r.interleave) : json(nullptr)},
          {"owner_map", !r.owner.empty()},
          {"splits", r.splits},
          {"sink_rank", r.sink_rank ? json(*r.sink_rank) : json("merge")}};
}

// The verdict's keys of a report, for the parts of rc (one request's, or a whole batch's).
json verdict_fields(props::BoundTier gate, const oracle::ResultCheck& rc, bool stopped) {
  return {{"max_ratio", json_number(rc.max_ratio())},
          {"max_stat_ratio", json_number(rc.max_stat_ratio())},
          {"bound", bound_name(gate)},
          {"verdict", !rc.pass()               ? "FAILED"
                      : !rc.pass_statistical() ? "SUSPECT"
                                               : "OK"},
          {"false_alarm", json_number(statistical_false_alarm(rc))},
          {"interrupted", stopped},
          {"pass", passes(gate, rc) && !stopped}};
}

// One request's part of the report: the claim, every part, the verdict.
json request_report(props::BoundTier gate, const CheckRequest& q) {
  json parts = json::array();
  for (const oracle::PartCheck& p : q.rc.parts) {
    const oracle::Comparison& c = p.cmp;
    parts.push_back(
        {{"part", part_name(p.rank)},
         {"rank", p.rank ? json(*p.rank) : json(nullptr)},
         {"pass", c.pass()},
         {"pass_statistical", c.pass_statistical()},
         {"max_ratio", json_number(c.max_ratio())},
         {"max_stat_ratio", json_number(c.max_stat_ratio())},
         {"kappa", p.kappa},
         {"o", worst_json(c.o_worst, c.o_elements, c.o_violations, &p.worst_terms.o)},
         {"lse", worst_json(c.lse_worst, c.lse_elements, c.lse_violations, &p.worst_terms.lse)},
         {"o_stat", worst_json(c.o_worst_stat, c.o_elements, c.o_suspects)},
         {"lse_stat", worst_json(c.lse_worst_stat, c.lse_elements, c.lse_suspects)}});
  }
  json report = {
      {"claim", claim_json(q.r)}, {"parts", parts}, {"failing_ranks", q.rc.failing_ranks()}};
  report.update(verdict_fields(gate, q.rc, static_cast<int64_t>(q.rc.parts.size()) < q.planned));
  return report;
}

// "request 3: " before a batch's part names; empty for one request.
std::string request_prefix(size_t requests, size_t b) {
  return requests > 1 ? "request " + std::to_string(b) + ": " : "";
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
  os << "accum " << (a.tf32 ? "tf32" : oracle::format_text(a.accum))
     << (a.truncating_mma ? "" : " (round to nearest)") << (a.ftz ? ", ftz" : "") << ", P cast "
     << (a.p_cast ? oracle::format_text(*a.p_cast) : "none") << ", o " << oracle::format_text(a.out)
     << ", lse " << oracle::format_text(a.lse_out)
     << (a.kv_dequant ? ", kv dequantized to " + oracle::format_text(*a.kv_dequant) : "")
     << ", dcp_size " << r.dcp_size
     << (r.owner.empty() ? ", interleave " + std::to_string(r.interleave) : ", owner map")
     << ", splits " << r.splits << ", partials " << oracle::format_text(a.partial_o) << "/"
     << oracle::format_text(a.partial_lse) << " (" << r.partial_format_from << "), merge "
     << oracle::format_text(a.merge_accum)
     << (a.merge_lse_accum ? ", merge lse " + oracle::format_text(*a.merge_lse_accum) : "")
     << (a.merge_depth > 0 ? ", pairwise merges " + std::to_string(a.merge_depth) + " deep" : "")
     << (a.merge_scaled ? ", merge sums exp(L_r - L) O_r" : "") << ", sink "
     << (r.sink_rank ? "on rank " + std::to_string(*r.sink_rank) : std::string("at the merge"))
     << ", tile " << a.tile << (a.tile == 1 ? " (any)" : "")
     << (a.dot_lanes == 1  ? std::string(", dots left to right")
         : a.dot_lanes > 1 ? ", dots in " + std::to_string(a.dot_lanes) + " lanes"
                           : std::string())
     << ", exp " << (a.exp_rel_err ? "rel err " + exact_text(*a.exp_rel_err) : "2 ulp")
     << (a.exp_bias ? " (bias " + exact_text(*a.exp_bias) + ")" : "")
     << (a.merge_exp_rel_err ? " (merge's rel err " + exact_text(*a.merge_exp_rel_err) + ")" : "")
     << (a.rescale_exp_rel_err ? " (rescales' rel err " + exact_text(*a.rescale_exp_rel_err) + ")"
                               : "")
     << ", log " << (a.log_rel_err ? "rel err " + exact_text(*a.log_rel_err) : "2^-21 / 3 ulp");
  return os.str();
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

// The header: the command, the case (its first request's shapes and, for a batch, the totals),
// the claim (the same for every request: the metadata is the batch's) and the table's header.
void print_check_header(std::ostream& out, const CheckPlan& plan, const Table& t) {
  const std::vector<CheckRequest>& reqs = plan.reqs;
  const oracle::Case& c = reqs.front().c;
  out << "# dcp-verify check  case=" << oracle::printable(plan.params.case_path)
      << "  result=" << oracle::printable(plan.params.result_path)
      << "  tier=" << tier_name(plan.params.tier) << "\n";
  if (reqs.size() > 1) {
    int64_t tokens = 0, keys = 0;
    for (const CheckRequest& q : reqs) {
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
  out << (c.shared_latent() ? " (shared latent)" : "") << "  q " << oracle::format_text(c.q_dtype)
      << ", kv " << oracle::format_text(c.kv_dtype) << scales_text(c) << "  lse base "
      << oracle::lse_base_name(c.lse_base) << "\n"
      << "# claim: " << claim_text(reqs.front().r) << "\n"
      << "#  worst (t, h, d): the element with the largest error/bound; err/stat: the largest "
         "error over the statistical bound (SUSPECT above 1); rank rows: that rank's partial vs "
         "the oracle on its shard\n";
  t.print_header(out);
}

// One row per part and tensor (all of them, or the failing ones with --quiet); in a batch the
// part names the request and t its token within the request.
void print_check_rows(std::ostream& out, bool failing_only, const Table& t,
                      const std::string& prefix, const oracle::ResultCheck& rc) {
  for (const oracle::PartCheck& p : rc.parts) {
    const bool fine = p.cmp.pass_statistical();
    if (failing_only && fine) continue;
    const std::string name = prefix + part_name(p.rank);
    print_row(out, t, name, "o", p.cmp.o_worst, p.cmp.o_worst_stat, p.cmp.o_elements,
              p.cmp.o_violations, p.cmp.o_suspects);
    print_row(out, t, name, "lse", p.cmp.lse_worst, p.cmp.lse_worst_stat, p.cmp.lse_elements,
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

}  // namespace

json check_report(const CheckPlan& plan, const oracle::ResultCheck& all, double seconds) {
  const CheckParams& p = plan.params;
  json report = {{"schema", "dcp-verify/check/2"},
                 {"case", p.case_path},
                 {"result", p.result_path},
                 {"tier", tier_name(p.tier)}};
  const bool stopped = static_cast<int64_t>(all.parts.size()) < plan.planned;
  if (all.parts.empty()) {  // interrupted before the first part
    report.update({{"parts", json::array()}, {"interrupted", true}, {"pass", false}});
    return report;
  }
  if (plan.reqs.size() == 1) {
    report.update(request_report(p.gate, plan.reqs.front()));
  } else {
    json requests = json::array();
    for (size_t b = 0; b < plan.reqs.size(); ++b) {
      if (plan.reqs[b].rc.parts.empty()) break;  // not reached before an interrupt
      json one = request_report(p.gate, plan.reqs[b]);
      one["request"] = b;
      requests.push_back(std::move(one));
    }
    report["requests"] = requests;
    report.update(verdict_fields(p.gate, all, stopped));
  }
  report["seconds"] = seconds;
  return report;
}

std::string check_text(const CheckPlan& plan, const oracle::ResultCheck& all,
                       const CheckTextOptions& how) {
  std::ostringstream out;
  if (all.parts.empty()) {
    out << "# check: INTERRUPTED (no part was judged)\n";
    return out.str();
  }
  const std::vector<CheckRequest>& reqs = plan.reqs;
  const size_t B = reqs.size();
  const bool stopped = static_cast<int64_t>(all.parts.size()) < plan.planned;
  Table t = check_table();
  for (size_t b = 0; b < B; ++b) {
    for (const oracle::PartCheck& p : reqs[b].rc.parts)
      t.fit(0, request_prefix(B, b) + part_name(p.rank));
  }
  print_check_header(out, plan, t);
  std::string verdict;
  if (B == 1) {
    print_check_rows(out, how.failing_only, t, "", all);
    verdict = check_verdict(all, plan.planned, out);
  } else {
    // Each request's rows and verdict; the batch's worst element is the worst request's.
    std::string worst_line;
    double worst_ratio = -1.0;
    std::vector<std::string> failed, suspect;
    for (size_t b = 0; b < B && !reqs[b].rc.parts.empty(); ++b) {
      const CheckRequest& q = reqs[b];
      print_check_rows(out, how.failing_only, t, request_prefix(B, b), q.rc);
      std::ostringstream line;
      const std::string v = check_verdict(q.rc, q.planned, line);
      out << "# request " << b << ": T=" << q.c.tokens() << " S=" << q.c.seq() << ": " << v << "\n";
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
    out << worst_line;
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
      verdict = "INTERRUPTED (" +
                std::to_string(plan.planned - static_cast<int64_t>(all.parts.size())) +
                " parts not judged; so far: " + verdict + ")";
  }
  out << "# parts: " << all.parts.size() << "  max err/bound: " << cell("%.4f", all.max_ratio())
      << "  max err/stat: " << cell("%.4f", all.max_stat_ratio())
      << "  time: " << cell("%.1f", how.seconds) << " s"
      << (how.processes > 1 ? "  processes: " + std::to_string(how.processes) : std::string())
      << "\n"
      << "# bound: " << bound_name(plan.params.gate)
      << " gates the exit; statistical tier's false-alarm "
      << "probability <= " << cell("%.1e", statistical_false_alarm(all)) << "\n"
      << "# check: " << verdict << "\n";
  return out.str();
}

}  // namespace dcp::harness
