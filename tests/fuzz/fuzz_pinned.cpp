// libFuzzer target for pinned-counterexample files: any text must parse into validated entries
// or fail with a Status (never throw, never crash), and every entry that parses, when it is
// small, must replay on the host path without a crash or a backend error: what validation lets
// through, the production path must run.
//
//   build-asan/bin/fuzz_pinned /tmp/corpus fixtures/dcp -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "properties/footprint.hpp"
#include "properties/pinned.hpp"

namespace {

// Entries larger than this are parsed and validated but not replayed (fuzzing speed).
constexpr double kMaxReplayWork = 1e6;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto entries = dcp::props::parse_pinned(text, "fuzz");
  if (!entries) return 0;
  for (const dcp::props::PinnedEntry& e : *entries) {
    if (dcp::props::dcp_check_footprint(e.setup).work > kMaxReplayWork) continue;
    const dcp::props::DcpCheck chk = dcp::props::check_dcp_setup(e.setup);
    if (chk.backend_error) {
      std::fprintf(stderr, "fuzz_pinned: a validated entry failed on the backend: %s\n",
                   chk.report.c_str());
      std::abort();
    }
  }
  return 0;
}
