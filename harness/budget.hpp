// budget.hpp — what a command may spend, checked before it allocates anything large.
//
// Each command that allocates in proportion to its flags or its input files computes the
// footprint of what it is about to do (properties/footprint.hpp: peak bytes and work, from shapes
// alone) and refuses, with exit 2 and one line, what does not fit the machine:
//   dcp-verify run: --seq 9999999999999: needs about 1.7 PiB of memory (largest part: the
//   oracle's copy of q, K and V (doubles)); 21.4 GiB are available
//
//   const Limits lim = machine_limits();
//   if (const auto why = over_limits(props::dcp_check_footprint(setup), lim)) refuse(*why);
#pragma once

#include <limits>
#include <optional>
#include <string>

#include "properties/footprint.hpp"

namespace dcp::harness {

struct Limits {
  // Heap bytes this process may use: the memory the kernel reports available (MemAvailable), or
  // what the process's cgroup allows beyond its current use, whichever is smaller.
  double memory_bytes = 0.0;
  // Work (footprint.hpp's units) one command may plan; unlimited, except where the command-line
  // fuzzer (tests/fuzz) caps it to keep each run short.
  double work = std::numeric_limits<double>::infinity();
};

Limits machine_limits();

// The refusal for a footprint beyond the limits: "needs about 1.7 PiB of memory (largest part:
// ...); 21.4 GiB are available", or nothing when it fits.
std::optional<std::string> over_limits(const props::Footprint& f, const Limits& lim);

// The size of a file to be read (0 when it cannot be read: the reader then says why).
double file_bytes(const std::string& path);

// Bytes for people: "512 B", "3.2 MiB", "1.7 PiB".
std::string bytes_text(double bytes);

}  // namespace dcp::harness
