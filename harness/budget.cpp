#include "harness/budget.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dcp::harness {
namespace {

constexpr double kKiB = 1024.0;

// A number from the first word of a file ("max" or absent: nothing).
std::optional<double> read_number(const std::string& path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word.empty() || word.find_first_not_of("0123456789") != std::string::npos)
    return {};
  return std::strtod(word.c_str(), nullptr);
}

// MemAvailable from /proc/meminfo, in bytes ("MemAvailable:   21504420 kB").
std::optional<double> mem_available() {
  std::ifstream f("/proc/meminfo");
  for (std::string line; std::getline(f, line);) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1)
      return static_cast<double>(kb) * kKiB;
  }
  return {};
}

// What this process's cgroup, and each cgroup above it, lets it add to its current use: the
// smallest room of them (cgroup v2: the "0::/path" line of /proc/self/cgroup; v1: the memory
// controller's line).
std::optional<double> cgroup_room() {
  std::ifstream f("/proc/self/cgroup");
  std::optional<double> room;
  for (std::string line; std::getline(f, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const bool v2 = line.compare(0, a, "0") == 0 && controllers.empty();
    const bool v1 = controllers.find("memory") != std::string::npos;
    if (!v2 && !v1) continue;
    const std::string base = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const char* max_file = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    const char* used_file = v2 ? "/memory.current" : "/memory.usage_in_bytes";
    for (std::filesystem::path g = line.substr(b + 1);; g = g.parent_path()) {
      const std::string dir = base + (g == "/" ? std::string() : g.string());
      if (const auto max = read_number(dir + max_file)) {
        const double used = read_number(dir + used_file).value_or(0.0);
        const double here = std::max(0.0, *max - used);
        room = room ? std::min(*room, here) : here;
      }
      if (g == g.parent_path() || g.empty()) break;
    }
  }
  return room;
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

double file_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<double>(st.st_size)
                                                               : 0.0;
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

}  // namespace dcp::harness
