#include "tools/junit.hpp"

#include <cstdio>
#include <iostream>
#include <span>
#include <sstream>
#include <vector>

#include "harness/tiers.hpp"
#include "oracle/file_write.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

using nlohmann::json;

struct TestCase {
  std::string name;
  double seconds = 0.0;
  std::optional<std::string> failure;  // the failure's message; its text follows in `text`
  std::optional<std::string> skipped;  // why it did not run
  std::string text;                    // the failure's body
  std::string out;                     // <system-out>: what passed with a remark (SUSPECT)
};

// Text as XML character data or an attribute value: the five special characters escaped, and
// control characters other than tab and newline (which XML 1.0 cannot hold) dropped.
std::string escaped(std::string_view s) {
  std::string r;
  r.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        r += "&amp;";
        break;
      case '<':
        r += "&lt;";
        break;
      case '>':
        r += "&gt;";
        break;
      case '"':
        r += "&quot;";
        break;
      case '\'':
        r += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') r += c;
    }
  }
  return r;
}

// A report's number, or its "inf"/"nan" text, or "-" for null.
std::string number(const json& x) {
  if (x.is_number()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", x.get<double>());
    return buf;
  }
  return x.is_string() ? x.get<std::string>() : "-";
}

std::string text_of(const json& x) { return x.is_string() ? x.get<std::string>() : ""; }

std::string document(const std::string& suite, const std::vector<TestCase>& cases, double seconds) {
  int64_t failures = 0, skipped = 0;
  for (const TestCase& c : cases) {
    failures += c.failure ? 1 : 0;
    skipped += c.skipped ? 1 : 0;
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f", seconds);
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<testsuites name=\"" << escaped(suite) << "\" tests=\"" << cases.size() << "\" failures=\""
     << failures << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << secs << "\">\n"
     << "  <testsuite name=\"" << escaped(suite) << "\" tests=\"" << cases.size()
     << "\" failures=\"" << failures << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\""
     << secs << "\">\n";
  for (const TestCase& c : cases) {
    std::snprintf(secs, sizeof secs, "%.3f", c.seconds);
    os << "    <testcase classname=\"" << escaped(suite) << "\" name=\"" << escaped(c.name)
       << "\" time=\"" << secs << "\">\n";
    if (c.failure)
      os << "      <failure message=\"" << escaped(*c.failure) << "\" type=\""
         << "FAILED"
         << "\">" << escaped(c.text) << "</failure>\n";
    if (c.skipped) os << "      <skipped message=\"" << escaped(*c.skipped) << "\"/>\n";
    if (!c.out.empty()) os << "      <system-out>" << escaped(c.out) << "</system-out>\n";
    os << "    </testcase>\n";
  }
  os << "  </testsuite>\n</testsuites>\n";
  return os.str();
}

std::vector<TestCase> run_cases(const json& r) {
  std::vector<TestCase> cases;
  const bool statistical =
      harness::parse_bound(r.value("bound", "sound")) == props::BoundTier::statistical;
  for (const json& row : r.at("rows")) {
    TestCase c;
    c.name = "row " + std::to_string(row.at("row").get<int64_t>()) + ": " +
             text_of(row.at("variant")) +
             " S=" + std::to_string(row.at("shape").at("seq").get<int64_t>()) +
             " tp=" + std::to_string(row.at("tp").get<int64_t>()) +
             " N=" + std::to_string(row.at("dcp").get<int64_t>()) +
             " I=" + std::to_string(row.at("interleave").get<int64_t>()) + " " +
             text_of(row.at("comm_backend")) + " " + text_of(row.at("q"));
    const std::string verdict = text_of(row.at("verdict"));
    const std::string ratios =
        "err/bound " + number(row.at("ratio")) + ", err/stat " + number(row.at("stat_ratio"));
    if (verdict == "ERROR") {  // a plug-in level ended the run inside this row
      c.failure = "ERROR: the implementation ended the run in this row";
      c.text = text_of(row.at("report")) + "reproduce: " + text_of(r.at("reproduce"));
    } else if (verdict == "FAILED" || (verdict == "SUSPECT" && statistical)) {
      c.failure = verdict + ": " + ratios;
      c.text = text_of(row.at("report")) + "case: " + text_of(row.at("case")) +
               "\nreproduce: " + text_of(r.at("reproduce"));
    } else if (verdict == "SUSPECT") {
      c.out =
          "SUSPECT (over the statistical bound only): " + ratios + "\n" + text_of(row.at("report"));
    }
    cases.push_back(std::move(c));
  }
  const int64_t missing = r.value("rows_planned", int64_t{0}) - static_cast<int64_t>(cases.size());
  if (r.value("interrupted", false) && missing > 0) {
    TestCase c;
    c.name = std::to_string(missing) + " rows not run";
    c.skipped = "interrupted by Ctrl-C";
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<TestCase> properties_cases(const json& r) {
  std::vector<TestCase> cases;
  for (const json& p : r.at("properties")) {
    TestCase c;
    c.name = text_of(p.at("name")) + ": " + text_of(p.at("what"));
    c.seconds = p.value("seconds", 0.0);
    const std::string result = text_of(p.at("result"));
    if (result == "INTERRUPTED") {
      c.skipped = "interrupted by Ctrl-C";
    } else if (result != "OK") {
      c.failure = result + " after " + std::to_string(p.at("cases").get<int64_t>()) + " cases";
      c.text = text_of(p.at("message"));
      if (p.at("reproduce").is_string()) c.text += "\nreproduce: " + text_of(p.at("reproduce"));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<TestCase> mutants_cases(const json& r) {
  std::vector<TestCase> cases;
  if (r.value("false_alarms", int64_t{0}) > 0) {
    TestCase c;
    c.name = "the correct path";
    c.failure = std::to_string(r.at("false_alarms").get<int64_t>()) +
                " false alarms: properties not OK on the correct path";
    cases.push_back(std::move(c));
  }
  for (const json& m : r.at("rows")) {
    TestCase c;
    c.name = text_of(m.at("mutant")) + " (" + text_of(m.at("family")) + ")";
    c.seconds = m.value("seconds", 0.0);
    const std::string after = " after " + std::to_string(m.at("cases").get<int64_t>()) + " cases";
    if (m.value("killed", false)) {
      c.out = "KILLED by " + text_of(m.at("killed_by")) + after + ": " +
              text_of(m.at("counterexample"));
    } else if (m.value("interrupted", false)) {
      c.skipped = "interrupted by Ctrl-C";
    } else {
      c.failure = "SURVIVED" + after;
      c.text = "no property failed on the planted bug";
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// One request's parts (`prefix` names the request in a batch).
void check_parts(const json& req, const std::string& prefix, bool statistical,
                 std::vector<TestCase>& cases) {
  for (const json& p : req.at("parts")) {
    TestCase c;
    c.name = prefix + text_of(p.at("part"));
    const bool pass = p.value("pass", false), pass_stat = p.value("pass_statistical", false);
    const std::string ratios =
        "err/bound " + number(p.at("max_ratio")) + ", err/stat " + number(p.at("max_stat_ratio"));
    std::ostringstream worst;
    for (const char* t : {"o", "lse"}) {
      const json& w = p.at(t);
      worst << t << ": " << w.value("violations", int64_t{0}) << " of "
            << w.value("elements", int64_t{0}) << " over the bound; worst at "
            << w.at("worst_index").dump() << ": got " << number(w.at("got")) << ", expected "
            << number(w.at("expected")) << ", error " << number(w.at("error")) << ", bound "
            << number(w.at("bound")) << "\n";
    }
    if (!pass || (!pass_stat && statistical)) {
      c.failure = std::string(pass ? "SUSPECT" : "FAILED") + ": " + ratios;
      c.text = worst.str();
    } else if (!pass_stat) {
      c.out = "SUSPECT (over the statistical bound only): " + ratios + "\n" + worst.str();
    }
    cases.push_back(std::move(c));
  }
}

std::vector<TestCase> check_cases(const json& r) {
  std::vector<TestCase> cases;
  const bool statistical =
      harness::parse_bound(r.value("bound", "sound")) == props::BoundTier::statistical;
  if (r.contains("requests")) {
    for (const json& q : r.at("requests"))
      check_parts(q, "request " + std::to_string(q.at("request").get<int64_t>()) + ": ",
                  statistical, cases);
  } else {
    check_parts(r, "", statistical, cases);
  }
  if (r.value("interrupted", false)) {
    TestCase c;
    c.name = "parts not judged";
    c.skipped = "interrupted by Ctrl-C";
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

std::string junit_xml(const json& report) {
  const std::string schema = text_of(report.at("schema"));
  const double secs = report.value("seconds", 0.0);
  if (schema == "dcp-verify/run/2") return document("dcp-verify run", run_cases(report), secs);
  if (schema == "dcp-verify/properties/1")
    return document("dcp-verify properties", properties_cases(report), secs);
  if (schema == "dcp-verify/mutants/1")
    return document("dcp-verify mutants", mutants_cases(report), secs);
  return document("dcp-verify check", check_cases(report), secs);
}

bool write_reports(std::string_view command, const std::optional<std::string>& json_path,
                   const std::optional<std::string>& junit_path, const json& report) {
  if (json_path && !write_json(command, *json_path, report)) return false;
  if (!junit_path) return true;
  const std::string xml = junit_xml(utf8_json(report));
  const oracle::Status st = oracle::write_whole_file(
      *junit_path, std::span(reinterpret_cast<const uint8_t*>(xml.data()), xml.size()));
  if (!st) refuse(command, "--junit: " + st.message(), std::cerr);
  return st.ok();
}

}  // namespace dcp::tools
