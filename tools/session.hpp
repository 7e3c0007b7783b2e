// session.hpp — what every long dcp-verify command shares: Ctrl-C, the progress line, and the
// JSON report file.
//
// Ctrl-C: the first SIGINT only sets a flag; loops poll interrupted() between rows, print the
// summary of what finished, and exit kExitInterrupted. A second SIGINT terminates at once.
// Progress: one line on stderr, rewritten in place, only when stderr is a terminal and the run
// has taken longer than kProgressAfterSeconds; erased before the summary.
//
//   InterruptGuard guard;                       // installs the handler for this command
//   Progress progress("run", rows.size());
//   for (i ...) { if (interrupted()) break; progress.update(i); ...; progress.clear(); print; }
//   progress.clear();
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dcp::tools {

// A run shorter than this needs no progress line (the table appears soon enough).
inline constexpr double kProgressAfterSeconds = 2.0;

class InterruptGuard {
 public:
  InterruptGuard();   // installs the SIGINT handler and clears the flag
  ~InterruptGuard();  // restores the previous handler
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  void (*previous_)(int);
};

// True once SIGINT arrived while an InterruptGuard was alive.
bool interrupted();

class Progress {
 public:
  Progress(std::string what, int64_t total);
  void update(int64_t done);  // `done` units finished; redraws the line when due
  void clear();               // erases the line (if one is drawn), before writing to stdout

 private:
  std::string what_;
  int64_t total_;
  bool tty_, drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

// A one-line error when a --json path cannot be written, checked before a command runs so that a
// bad path never costs the run (nullopt for an empty path, meaning no report).
std::optional<std::string> json_path_error(const std::string& path);

// Writes a report to path; on failure prints "dcp-verify COMMAND: --json: ..." (one line) on
// stderr and returns false.
bool write_json(std::string_view command, const std::string& path, const nlohmann::json& report);

// A double as typed on a command line, exactly (shortest text that reads back as the same value),
// for reproduce lines.
std::string exact_text(double x);

// A double for a JSON report: non-finite values become null (JSON has no inf or NaN).
nlohmann::json json_number(double x);

}  // namespace dcp::tools
