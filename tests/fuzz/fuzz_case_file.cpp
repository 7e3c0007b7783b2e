// libFuzzer target for case files: any input must either fail with a Status or give a case that
// passes validation; nothing may crash, leak or hit undefined behaviour.
//
//   build-asan/bin/fuzz_case_file /tmp/corpus fixtures/cases -max_total_time=30
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "oracle/batch.hpp"
#include "oracle/case_file.hpp"

// Both ways a case is read: decoded, and with K and V in place (as the CLI reads case files),
// where a loaded case's attention also runs (every stored row widened). A batch (cu_seqlens_q,
// cu_seqlens_k) is split into its requests first, as `check` reads it.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const bool in_place : {false, true}) {
    const auto file = dcp::oracle::parse_safetensors(
        data, size, "fuzz",
        in_place ? dcp::oracle::kCaseReadOptions : dcp::oracle::StReadOptions{});
    if (!file) return 0;
    const auto requests = dcp::oracle::split_case_file(*file, "fuzz");
    if (!requests) continue;
    for (const dcp::oracle::StFile& one : *requests) {
      const auto c = dcp::oracle::case_from_file(one, "fuzz");
      if (c && !dcp::oracle::validate(*c).ok()) std::abort();  // loaded means valid
      if (c && in_place && c->seq() * c->kv_heads() * c->head_dim() <= (1 << 16) &&
          c->tokens() * c->q_heads() <= 64)
        (void)dcp::oracle::reference(*c);
    }
  }
  return 0;
}
