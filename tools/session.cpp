#include "tools/session.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace dcp::tools {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) {
  g_interrupted = 1;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

}  // namespace

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

void Progress::update(int64_t done) {
  if (!tty_) return;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (secs < kProgressAfterSeconds) return;
  std::fprintf(stderr, "\r# %s: %lld/%lld done, %.0f s (Ctrl-C prints the summary so far) ",
               what_.c_str(), static_cast<long long>(done), static_cast<long long>(total_), secs);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

std::optional<std::string> json_path_error(const std::string& path) {
  if (path.empty()) return std::nullopt;
  // Without creating anything: an existing file must be writable, a new one's folder must be.
  std::error_code ec;
  const std::filesystem::path p(path);
  const bool exists = std::filesystem::exists(p, ec);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  if (exists ? ::access(path.c_str(), W_OK) != 0 : ::access(dir.c_str(), W_OK | X_OK) != 0)
    return "--json: cannot write '" + path + "': " + std::strerror(errno);
  if (exists && std::filesystem::is_directory(p, ec))
    return "--json: '" + path + "' is a directory";
  return std::nullopt;
}

bool write_json(std::string_view command, const std::string& path, const nlohmann::json& report) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::cerr << "dcp-verify " << command << ": --json: cannot write '" << path
              << "': " << std::strerror(errno) << "\n";
    return false;
  }
  const std::string text = report.dump(2) + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::cerr << "dcp-verify " << command << ": --json: writing '" << path
              << "' failed: " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

std::string exact_text(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

nlohmann::json json_number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nullptr; }

}  // namespace dcp::tools
