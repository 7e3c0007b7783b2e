// libFuzzer target for result files (docs/format.md): the claim metadata, owner maps, LSE layouts
// and partials of an implementation's output, read against a fixed case and judged. Any input must
// either fail with a Status or be judged; nothing may crash, leak or hit undefined behaviour.
//
//   build-asan/bin/fuzz_result_file /tmp/corpus SEEDS -max_total_time=30
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "oracle/case_file.hpp"
#include "oracle/check.hpp"

#ifndef DCP_FIXTURES_DIR
#error "DCP_FIXTURES_DIR must point at fixtures/"
#endif

namespace {

// The case every input is read against: small, so that a loaded result is judged whole.
const dcp::oracle::Case& the_case() {
  static const dcp::oracle::Case c = [] {
    auto loaded = dcp::oracle::load_case(DCP_FIXTURES_DIR "/cases/gqa_causal_bf16.safetensors");
    if (!loaded) __builtin_trap();
    return std::move(*loaded);
  }();
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = dcp::oracle::parse_safetensors(data, size, "fuzz");
  if (!file) return 0;
  const auto r = dcp::oracle::result_from_file(*file, the_case(), "fuzz");
  if (!r) return 0;
  // A claimed N can be large: judge the output and at most the first few partials.
  const int64_t parts = std::min<int64_t>(dcp::oracle::part_count(*r), 4);
  for (int64_t part = 0; part < parts; ++part)
    (void)dcp::oracle::check_part(the_case(), *r,
                                  part == 0 ? std::nullopt : std::optional<int64_t>(part - 1),
                                  dcp::oracle::Tier::fast, {});
  return 0;
}
