// safetensors.hpp — reads and writes tensor files in the safetensors format.
//
// A file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON header (padded with
// spaces), then the data buffer, which the tensors must cover exactly, without gaps or overlap:
//   {"__metadata__": {"a": "b"}, "k": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
//
//   Expected<StFile> f = read_safetensors("case.safetensors");
//   if (!f) return f.status();                // one line: the file, the tensor, what was expected
//   const StTensor& k = f->tensors.at("k");   // k.dtype == DType::f32, k.values.size() == 6
//   DCP_TRY(write_safetensors("out.safetensors", *f));
//
// Accepted dtypes: those of dtype.hpp's table, the floating ones and I8 codes (into values,
// exactly) and I64 (into ints), little-endian. A file is memory-mapped; tensors named in
// StReadOptions::in_place stay there as stored (a long case's K and V: its file's bytes, not eight
// per element):
//   auto f = read_safetensors(path, {.in_place = {"k", "v"}});   // f->tensors["k"].bytes
// A mapped file that another process truncates while it is read raises SIGBUS on the next read of
// a page it lost; mapped_file_at names the file for the handler that ends the process with a line
// saying so (tools/session.hpp, install_fault_lines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/dtype.hpp"
#include "oracle/status.hpp"
#include "oracle/tensor.hpp"

namespace dcp::oracle {

// The largest header the reader accepts, as the reference implementation does.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

struct StTensor {
  StTensor() = default;
  StTensor(DType d, Shape s, std::vector<double> vals, std::vector<int64_t> is)
      : dtype(d), shape(std::move(s)), values(std::move(vals)), ints(std::move(is)) {}
  // A floating tensor left in its stored bytes (see `bytes` below).
  static StTensor in_place(DType d, Shape s, const uint8_t* b, std::shared_ptr<const void> k) {
    StTensor t;
    t.dtype = d;
    t.shape = std::move(s);
    t.bytes = b;
    t.keep = std::move(k);
    return t;
  }

  DType dtype = DType::f32;
  Shape shape;                 // row-major; [] is a scalar (one element)
  std::vector<double> values;  // floating elements (F64 to F8), converted exactly to double
  std::vector<int64_t> ints;   // I64 elements
  // Read in place (StReadOptions::in_place) or built so: numel floating elements as the file
  // stores them (little-endian, the dtype's width), kept alive by `keep`; values stays empty.
  const uint8_t* bytes = nullptr;
  std::shared_ptr<const void> keep;
};

struct StReadOptions {
  std::set<std::string> in_place;  // floating tensors to leave in the file's bytes, undecoded
};

struct StFile {
  std::map<std::string, StTensor> tensors;
  std::map<std::string, std::string> metadata;  // the header's "__metadata__" object
};

// Parses a whole file held in memory; `source` names it in error messages. Never throws. Tensors
// read in place point into `bytes`, which `keep` (when given) keeps alive.
Expected<StFile> parse_safetensors(const uint8_t* bytes, size_t size, std::string_view source,
                                   const StReadOptions& options = {},
                                   std::shared_ptr<const void> keep = {});
Expected<StFile> read_safetensors(const std::string& path, const StReadOptions& options = {});

// The path of the file read_safetensors mapped at the address p (while its mapping lives), or
// nullptr. Safe in a signal handler: no lock, no allocation.
const char* mapped_file_at(const void* p);

// Checks that `file` can be written: names and metadata are valid UTF-8 and no tensor is called
// "__metadata__"; dims are non-negative and their product fits int64; floating dtypes hold
// exactly numel elements in values or in bytes (ints empty), I64 exactly numel in ints (values
// empty).
Status check_st_file(const StFile& file, std::string_view source);

// The file's bytes. Each tensor is stored in its own dtype (F32 to F8 rounded to nearest even,
// NaN kept as a NaN, of the same sign where the format has one of each; past the largest finite
// value of a format without inf, NaN); the header is padded with spaces to a multiple of 8 bytes
// and tensors are laid out widest dtype first, then by name, so every tensor is aligned to its
// element size. Returns an empty vector when check_st_file fails.
std::vector<uint8_t> serialize_safetensors(const StFile& file);
// Writes the file whole or not at all (file_write.hpp).
Status write_safetensors(const std::string& path, const StFile& file);

}  // namespace dcp::oracle
