// junit.hpp — a command's report as JUnit XML (--junit FILE), so that CI systems show dcp-verify's
// verdicts as test results: one <testcase> per run row, property, mutant, or check part (per
// request in a batch), built from the same report `--json` writes (docs/cli.md, "JSON reports").
// A failing case carries the report's text and the line that reproduces it; a SUSPECT case is a
// failure where the statistical tier gates the exit (--bound statistical) and otherwise says so
// in its <system-out>; an interrupted command adds a skipped case for what did not run.
//
//   nlohmann::json report = ...;                  // dcp-verify/run/2, as --json writes it
//   std::string xml = junit_xml(report);          // <testsuites ...><testsuite name="dcp-verify
//   run">
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dcp::tools {

// The XML of a report of schema dcp-verify/run/2, properties/1, mutants/1 or check/2.
std::string junit_xml(const nlohmann::json& report);

// Writes the report as JSON to json_path and as JUnit XML to junit_path, each when given, whole
// or not at all; on failure prints "dcp-verify COMMAND: --json: ..." or "... --junit: ..." (one
// line) on stderr and returns false.
bool write_reports(std::string_view command, const std::optional<std::string>& json_path,
                   const std::optional<std::string>& junit_path, const nlohmann::json& report);

}  // namespace dcp::tools
