#include "tools/session.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <span>

#include "oracle/file_write.hpp"
#include "oracle/safetensors.hpp"
#include "oracle/text.hpp"
#include "tools/command.hpp"
#include "tools/flags.hpp"

namespace dcp::tools {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) {
  g_interrupted = 1;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

JobInputs g_job_inputs;  // set_job_inputs

}  // namespace

namespace {

void write_err(const char* s) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, s, std::strlen(s));
}

extern "C" void on_sigbus(int sig, siginfo_t* info, void*) {
  const char* file = info->si_code > 0 ? oracle::mapped_file_at(info->si_addr) : nullptr;
  if (file == nullptr) {  // not a mapped input's page: the signal as it is
    ::signal(sig, SIG_DFL);
    // A fault runs its access again when the handler returns; a signal that was sent is resent.
    if (info->si_code <= 0) ::raise(sig);
    return;
  }
  write_err("dcp-verify: ");
  write_err(file);
  write_err(
      ": the file changed while it was read (truncated or rewritten by another program); "
      "what it held can no longer be trusted\n");
  ::_exit(kExitBadInput);
}

}  // namespace

int stdout_written(int code) {
  std::cout.flush();
  if (std::cout && std::fflush(stdout) == 0 && !std::ferror(stdout)) return code;
  const int err = errno;
  std::cerr << "dcp-verify: standard output: write failed (" << std::strerror(err)
            << "); the report is incomplete\n";
  return code == kExitOk ? kExitBadInput : code;
}

void install_file_fault_line() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

InterruptGuard::InterruptGuard() {
  g_interrupted = 0;
  previous_ = std::signal(SIGINT, on_sigint);
}

InterruptGuard::~InterruptGuard() { std::signal(SIGINT, previous_); }

bool interrupted() { return g_interrupted != 0; }

Progress::Progress(std::string what, int64_t total)
    : what_(std::move(what)),
      total_(total),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(double done) {
  if (!tty_) return;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (secs < kProgressAfterSeconds) return;
  const double rate = done / secs;
  const double eta = rate > 0.0 ? (static_cast<double>(total_) - done) / rate : 0.0;
  // Whole units as integers; inside one (a long row), two decimals.
  const int decimals = done == std::floor(done) ? 0 : 2;
  std::fprintf(stderr,
               "\r# %s: %.*f/%lld done, %.3g/s, %.0f s, about %.0f s left (Ctrl-C prints the "
               "summary so far) ",
               what_.c_str(), decimals, done, static_cast<long long>(total_), rate, secs, eta);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

std::optional<std::string> output_error(const FileFlag& out,
                                        std::initializer_list<FileFlag> inputs) {
  const std::string& path = out.path;
  const std::string flag(out.flag), shown = oracle::printable(path);
  if (path.empty()) return flag + ": expected a file name, got ''";
  struct stat o {};
  const bool exists = ::stat(path.c_str(), &o) == 0;
  // A name the system cannot look up (too long, a loop of links, a file where a folder is
  // expected) cannot be created either.
  if (!exists && errno != ENOENT)
    return flag + ": cannot write '" + shown + "': " + std::strerror(errno);
  if (exists && S_ISDIR(o.st_mode)) return flag + ": '" + shown + "' is a folder";
  // Without creating anything. A file is replaced by a new one made in its folder
  // (oracle/file_write.hpp), so the folder must be writable whether or not the file exists; a
  // device or a pipe is written in place, so it must be writable itself.
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  const bool in_place = exists && oracle::written_in_place(o);
  if (in_place ? ::access(path.c_str(), W_OK) != 0 : ::access(dir.c_str(), W_OK | X_OK) != 0)
    return flag + ": cannot write '" + shown + "': " + std::strerror(errno);
  if (exists) {
    for (const FileFlag& in : inputs) {
      struct stat i {};
      if (!in.path.empty() && ::stat(in.path.c_str(), &i) == 0 && i.st_dev == o.st_dev &&
          i.st_ino == o.st_ino)
        return flag + ": '" + shown + "' is the " + std::string(in.flag) + " file '" +
               oracle::printable(in.path) + "'; writing it would destroy an input";
    }
  }
  return std::nullopt;
}

std::optional<std::string> output_error(std::string_view flag,
                                        const std::optional<std::string>& path,
                                        std::initializer_list<FileFlag> inputs) {
  if (!path) return std::nullopt;
  return output_error(FileFlag{flag, *path}, inputs);
}

std::optional<std::string> reports_error(const std::optional<std::string>& json,
                                         const std::optional<std::string>& junit,
                                         std::initializer_list<FileFlag> inputs) {
  if (const auto why = output_error("--json", json, inputs)) return why;
  if (const auto why = output_error("--junit", junit, inputs)) return why;
  if (!json || !junit) return std::nullopt;
  // One file named twice: the second report would replace the first. Compared as the files they
  // will be (an existing one by device and inode, a new one by its folder's and its own name);
  // a stream written in place takes both.
  struct stat a {};
  struct stat b {};
  const bool a_exists = ::stat(json->c_str(), &a) == 0, b_exists = ::stat(junit->c_str(), &b) == 0;
  bool same = false;
  if (a_exists && b_exists) {
    same = a.st_dev == b.st_dev && a.st_ino == b.st_ino && !oracle::written_in_place(a);
  } else if (!a_exists && !b_exists) {
    std::error_code ea, eb;
    const auto pa = std::filesystem::weakly_canonical(std::filesystem::absolute(*json), ea);
    const auto pb = std::filesystem::weakly_canonical(std::filesystem::absolute(*junit), eb);
    same = !ea && !eb && pa == pb;
  }
  if (same)
    return "--junit: '" + oracle::printable(*junit) + "' is the --json file '" +
           oracle::printable(*json) + "'; one report would replace the other";
  return std::nullopt;
}

void set_job_inputs(JobInputs inputs) { g_job_inputs = std::move(inputs); }
const JobInputs& job_inputs() { return g_job_inputs; }

std::string installed_data_file(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path base = ec ? std::filesystem::path(".") : exe.parent_path() / "..";
  return (base / "share" / "dcp-verify" / name).lexically_normal().string();
}

bool write_json(std::string_view command, const std::string& path, const nlohmann::json& report) {
  const std::string text = utf8_json(report).dump(2) + "\n";
  const oracle::Status st = oracle::write_whole_file(
      path, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  if (!st) refuse(command, "--json: " + st.message(), std::cerr);
  return st.ok();
}

int refuse(std::string_view command, const std::string& why, std::ostream& err) {
  // One write: the processes of an mpirun job share stderr, and pieces would interleave.
  const std::string line =
      "dcp-verify " + std::string(command) + ": " + oracle::one_line(in_flag_terms(why)) + "\n";
  err << line << std::flush;
  return kExitBadInput;
}

}  // namespace dcp::tools
