// session.hpp — what every long dcp-verify command shares: Ctrl-C, the progress line, and the
// files it writes (never one of its inputs, never half written).
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
#include <initializer_list>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/report.hpp"

namespace dcp::tools {

// The reports' vocabulary (tables, cells, exact and JSON numbers), the harness's and every
// command's alike.
using harness::Align;
using harness::cell;
using harness::Column;
using harness::exact_text;
using harness::json_number;
using harness::Table;
using harness::utf8_json;

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

// For the process's life (main installs it): a read of a mapped input file that another program
// truncated meanwhile (SIGBUS inside a mapping of oracle::read_safetensors) ends the process with
// one line naming the file and kExitBadInput, not a bare "Bus error"; any other SIGBUS is left as
// it is.
void install_file_fault_line();

// The command's exit status once its standard output is flushed: unchanged when everything
// printed reached it, else kExitBadInput after one line naming the failure (a full disk lost the
// report, which exit 0 would have hidden).
int stdout_written(int code);

class Progress {
 public:
  Progress(std::string what, int64_t total);
  void update(double done);  // `done` units finished (a fraction inside one); redraws when due
  void update(int64_t done) { update(static_cast<double>(done)); }
  void clear();  // erases the line (if one is drawn), before writing to stdout

 private:
  std::string what_;
  int64_t total_;
  bool tty_, drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

// A file named on the command line: the flag that named it and its path.
struct FileFlag {
  std::string_view flag;  // "--json", "--case", ...
  std::string path;
};

// Why `out` cannot be written, checked before a command runs so that a bad path never costs the
// run (nothing is created): an empty name, a folder, a folder that is missing or not writable, an
// existing file that is not writable, or the same file (device and inode) as one of the
// command's inputs. One line, naming the flag.
std::optional<std::string> output_error(const FileFlag& out,
                                        std::initializer_list<FileFlag> inputs);

// The same for an optional output flag (--json): nothing to check when it was not given.
std::optional<std::string> output_error(std::string_view flag,
                                        const std::optional<std::string>& path,
                                        std::initializer_list<FileFlag> inputs);

// Both reports' paths (--json, --junit; either may be absent) checked as output_error does, and
// not one file named twice.
std::optional<std::string> reports_error(const std::optional<std::string>& json,
                                         const std::optional<std::string>& junit,
                                         std::initializer_list<FileFlag> inputs);

// What this process was asked to run, recorded by run_cli once the command line is parsed: the
// subcommand's flags as the command line writes them back ("name=value" lines: every flag given
// or with a default) and the input files they name (flag, path). Under mpirun the processes
// compare them before they run together (mpi_jobs.hpp, inputs_differ).
struct JobInputs {
  std::vector<std::string> flags;
  std::vector<std::pair<std::string, std::string>> files;
};
void set_job_inputs(JobInputs inputs);
const JobInputs& job_inputs();

// A data file installed with dcp-verify: <the executable's folder>/../share/dcp-verify/NAME (the
// build tree has the same layout as an installation).
std::string installed_data_file(const std::string& name);

// Writes a report whole or not at all (oracle/file_write.hpp); on failure prints
// "dcp-verify COMMAND: --json: ..." (one line) on stderr and returns false.
bool write_json(std::string_view command, const std::string& path, const nlohmann::json& report);

// Prints "dcp-verify COMMAND: WHY" as one line on err (oracle::one_line) and returns
// kExitBadInput: how every command refuses bad input.
int refuse(std::string_view command, const std::string& why, std::ostream& err);

}  // namespace dcp::tools
