// pinned.hpp — pinned counterexamples: shrunk cases that once failed, kept in a JSON file
// (fixtures/dcp/pinned.json) and replayed before the random properties.
//
// The file is a non-empty JSON array of {"why": text, "setup": to_json(setup)} entries. It is
// input like any other: a malformed file or entry is an error naming the file, the entry and
// the field, never a failed property.
//
//   Expected<std::vector<PinnedEntry>> pins = load_pinned("fixtures/dcp/pinned.json");
//   PinnedReplay r = replay_pinned(*pins, backend);   // r.failures: one line each
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/status.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"

namespace dcp::props {

struct PinnedEntry {
  std::string why;  // what the case once caught
  DcpSetup setup;
};

// The largest pinned file read (a few hundred entries take kilobytes; this is a guard against
// reading an unrelated huge file, not a size any real list approaches).
inline constexpr uintmax_t kMaxPinnedFileBytes = uintmax_t{64} << 20;

// Parses a pinned file's text; `source` names it in messages.
oracle::Expected<std::vector<PinnedEntry>> parse_pinned(std::string_view text,
                                                        const std::string& source);
// Reads and parses a pinned file: a folder, an unreadable or oversized file is an error too.
oracle::Expected<std::vector<PinnedEntry>> load_pinned(const std::string& path);

// How many entries ran, and one line per entry that failed on the backend.
struct PinnedReplay {
  int64_t count = 0;
  std::vector<std::string> failures;
};
PinnedReplay replay_pinned(const std::vector<PinnedEntry>& entries, const DcpBackend& backend);

// load_pinned and replay_pinned.
oracle::Expected<PinnedReplay> replay_pinned(const std::string& path, const DcpBackend& backend);

}  // namespace dcp::props
