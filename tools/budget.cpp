#include "tools/budget.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace dcp::tools {
namespace {

constexpr double kKiB = 1024.0;

// A number from the first line of a file ("max" or absent: nothing).
std::optional<double> read_number(const char* path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word.find_first_not_of("0123456789") != std::string::npos) return {};
  return std::stod(word);
}

// MemAvailable from /proc/meminfo, in bytes.
std::optional<double> mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * kKiB;
  return {};
}

// What the cgroup (v2, else v1) lets this process add to its current use.
std::optional<double> cgroup_room() {
  if (const auto max = read_number("/sys/fs/cgroup/memory.max")) {
    const double used = read_number("/sys/fs/cgroup/memory.current").value_or(0.0);
    return std::max(0.0, *max - used);
  }
  if (const auto max = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
    const double used = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes").value_or(0.0);
    return std::max(0.0, *max - used);
  }
  return {};
}

}  // namespace

Limits machine_limits() {
  Limits lim;
  const double physical =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  lim.memory_bytes = mem_available().value_or(physical);
  if (const auto room = cgroup_room()) lim.memory_bytes = std::min(lim.memory_bytes, *room);
  return lim;
}

std::string bytes_text(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (!std::isfinite(bytes)) return "more than can be counted";
  int u = 0;
  while (bytes >= kKiB && u < 6) bytes /= kKiB, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, kUnits[u]);
  return buf;
}

std::optional<std::string> over_limits(const props::Footprint& f, const Limits& lim) {
  if (!(f.bytes <= lim.memory_bytes)) {
    std::ostringstream os;
    os << "needs about " << bytes_text(f.bytes) << " of memory (largest part: " << f.largest
       << "); " << bytes_text(lim.memory_bytes) << " are available";
    return os.str();
  }
  if (!(f.work <= lim.work)) {
    std::ostringstream os;
    os << "plans about " << f.work << " multiply-adds, more than the " << lim.work
       << " this run allows";
    return os.str();
  }
  return std::nullopt;
}

}  // namespace dcp::tools
