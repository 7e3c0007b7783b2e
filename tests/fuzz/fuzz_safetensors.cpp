// libFuzzer target for oracle/safetensors: any input must parse or fail cleanly, and whatever
// parses must survive serialize -> parse unchanged (names, dtypes, shapes, values, metadata),
// with the second serialization byte-identical to the first.
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I.
//       tests/fuzz/fuzz_safetensors.cpp oracle/safetensors.cpp -o /tmp/fz
//   /tmp/fz /tmp/corpus fixtures/fuzz/safetensors     # new inputs go to the scratch corpus
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "oracle/safetensors.hpp"

namespace {

using dcp::oracle::StFile;
using dcp::oracle::StTensor;

bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (!(std::isnan(a[i]) && std::isnan(b[i]))) return false;
    } else if (a[i] != b[i] || std::signbit(a[i]) != std::signbit(b[i])) {
      return false;
    }
  }
  return true;
}

bool same_file(const StFile& a, const StFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (auto ia = a.tensors.begin(), ib = b.tensors.begin(); ia != a.tensors.end(); ++ia, ++ib) {
    const StTensor& x = ia->second;
    const StTensor& y = ib->second;
    if (ia->first != ib->first || x.dtype != y.dtype || x.shape != y.shape || x.ints != y.ints ||
        !same_values(x.values, y.values)) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const dcp::oracle::Expected<StFile> first =
      dcp::oracle::parse_safetensors(data, size, "fuzz.safetensors");
  if (!first.ok()) {
    if (first.status().message().empty()) std::abort();  // every failure says why
    return 0;
  }
  const std::vector<uint8_t> bytes = dcp::oracle::serialize_safetensors(*first);
  if (bytes.empty()) std::abort();  // whatever was read can be written
  const dcp::oracle::Expected<StFile> second =
      dcp::oracle::parse_safetensors(bytes.data(), bytes.size(), "reserialized");
  if (!second.ok() || !same_file(*first, *second)) std::abort();
  if (dcp::oracle::serialize_safetensors(*second) != bytes) std::abort();
  return 0;
}
