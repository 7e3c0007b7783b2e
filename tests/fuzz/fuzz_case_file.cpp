// libFuzzer target for case files: any input must either fail with a Status or give a case that
// passes validation; nothing may crash, leak or hit undefined behaviour.
//
//   build-asan/bin/fuzz_case_file /tmp/corpus fixtures/cases -max_total_time=30
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "oracle/case_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = dcp::oracle::parse_safetensors(data, size, "fuzz");
  if (!file) return 0;
  const auto c = dcp::oracle::case_from_file(*file, "fuzz");
  if (c && !dcp::oracle::validate(*c).ok()) std::abort();  // loaded means valid
  return 0;
}
