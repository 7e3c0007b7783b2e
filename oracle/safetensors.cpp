// safetensors.cpp — the safetensors reader and writer (see safetensors.hpp).
#include "oracle/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "oracle/file_write.hpp"
#include "oracle/kv_tensor.hpp"
#include "oracle/text.hpp"

namespace dcp::oracle {

namespace {

using json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";
// Every dtype of dtype.hpp's table, "F64, F32, ... or I8".
std::string accepted_dtypes() {
  return dtype_names([](DType) { return true; });
}
// A valid header nests 3 deep (object, tensor entry, shape); deeper input is rejected early so
// a hostile header cannot make the parser build an arbitrarily deep tree.
constexpr int kMaxHeaderDepth = 16;
std::string in_quotes(std::string_view s) { return "'" + printable(s) + "'"; }

// "a string", "a number", ... for messages about mistyped JSON values.
std::string kind(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    default:
      return "not a JSON value";
  }
}

// How a JSON value reads in a message: numbers verbatim, other values by kind.
std::string shown(const json& j) {
  if (j.is_number()) return j.dump();
  return kind(j);
}

uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(std::vector<uint8_t>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Element count and byte size of `shape` in dtype `t`, with overflow-safe multiplication.
// `where` prefixes the message ("case.safetensors: tensor 'k'").
Status shape_size(const Shape& shape, DType t, const std::string& where, int64_t* numel,
                  int64_t* nbytes) {
  bool any_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return DCP_ERROR(where, ": shape[", i, "] is ", shape[i], ", expected a non-negative dim");
    }
    if (shape[i] == 0) any_zero = true;
  }
  int64_t n = 1;
  if (any_zero) {
    n = 0;
  } else {
    for (int64_t d : shape) {
      if (__builtin_mul_overflow(n, d, &n)) {
        return DCP_ERROR(where, ": shape ", shape_string(shape),
                         " has more elements than int64 can count");
      }
    }
  }
  int64_t b = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_bytes(t)), &b)) {
    return DCP_ERROR(where, ": shape ", shape_string(shape), " of ", dtype_name(t),
                     " needs more bytes than int64 can count");
  }
  *numel = n;
  *nbytes = b;
  return {};
}

// Thrown from the JSON parser's callback to stop at the first structural problem; caught below.
struct HeaderReject {
  std::string message;
};

Status parse_header(const uint8_t* p, size_t n, const std::string& src, json* out) {
  if (n == 0) return DCP_ERROR(src, ": header length is 0, expected a JSON object");
  // The JSON library stops at a NUL byte as if the input ended there, so check for one first:
  // JSON allows none (inside strings it must be written \u0000); padding must be spaces.
  if (const void* nul = std::memchr(p, 0, n)) {
    return DCP_ERROR(src, ": header is not valid JSON: NUL byte at header offset ",
                     static_cast<const uint8_t*>(nul) - p, " (pad the header with spaces)");
  }
  // One set of seen keys per open object, to reject duplicate keys (the JSON library would keep
  // the last silently); `entry` is the top-level key being read, for context.
  std::vector<std::set<std::string>> seen;
  std::string entry;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxHeaderDepth) {
          throw HeaderReject{"header nests deeper than " + std::to_string(kMaxHeaderDepth) +
                             " levels; a safetensors header needs 3"};
        }
        if (event == json::parse_event_t::object_start) seen.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        break;
      case json::parse_event_t::key: {
        if (seen.empty() || !parsed.is_string()) break;
        const std::string& key = parsed.get_ref<const std::string&>();
        if (seen.size() == 1) entry = key;
        if (!seen.back().insert(key).second) {
          if (seen.size() == 1) {
            throw HeaderReject{key == kMetadataKey
                                   ? "header has two '__metadata__' objects"
                                   : "header lists tensor " + in_quotes(key) + " twice"};
          }
          const std::string ctx =
              entry == kMetadataKey ? std::string(kMetadataKey) : "tensor " + in_quotes(entry);
          throw HeaderReject{ctx + ": duplicate key " + in_quotes(key)};
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    *out = json::parse(p, p + n, callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const HeaderReject& r) {
    return DCP_ERROR(src, ": ", r.message);
  } catch (const json::exception& e) {
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at ..."
    if (what.rfind("[json.exception.", 0) == 0) {
      const size_t close = what.find("] ");
      if (close != std::string::npos) what.erase(0, close + 2);
    }
    return DCP_ERROR(src, ": header is not valid JSON: ", printable(what));
  } catch (const std::exception& e) {
    return DCP_ERROR(src, ": cannot parse the header: ", printable(e.what()));
  }
  return {};
}

// A non-negative JSON integer, or nullopt (negative, fractional or not a number).
std::optional<uint64_t> as_unsigned(const json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer()) {
    const auto v = j.get<int64_t>();
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

struct Entry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  int64_t numel = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Status parse_entry(const std::string& src, const std::string& name, const json& v,
                   uint64_t data_size, Entry* e) {
  const std::string where = src + ": tensor " + in_quotes(name);
  e->name = name;
  if (!v.is_object()) {
    return DCP_ERROR(where, ": entry is ", kind(v),
                     ", expected an object with dtype, shape and data_offsets");
  }
  for (const auto& item : v.items()) {
    const std::string& k = item.key();
    if (k != "dtype" && k != "shape" && k != "data_offsets") {
      return DCP_ERROR(where, ": unexpected field ", in_quotes(k),
                       " (expected dtype, shape and data_offsets)");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(field)) return DCP_ERROR(where, ": missing field '", field, "'");
  }

  const json& dt = v.at("dtype");
  if (!dt.is_string()) {
    return DCP_ERROR(where, ": field 'dtype' is ", kind(dt), ", expected a string (one of ",
                     accepted_dtypes(), ")");
  }
  const std::string& dt_name = dt.get_ref<const std::string&>();
  const std::optional<DType> dtype = parse_dtype(dt_name);
  if (!dtype) {
    return DCP_ERROR(where, ": unknown dtype ", in_quotes(dt_name),
                     " (accepted: ", accepted_dtypes(), ")");
  }
  e->dtype = *dtype;

  const json& sh = v.at("shape");
  if (!sh.is_array()) {
    return DCP_ERROR(where, ": field 'shape' is ", kind(sh),
                     ", expected an array of non-negative integers");
  }
  e->shape.clear();
  e->shape.reserve(sh.size());
  for (size_t i = 0; i < sh.size(); ++i) {
    const std::optional<uint64_t> d = as_unsigned(sh[i]);
    if (!d) {
      return DCP_ERROR(where, ": shape[", i, "] is ", shown(sh[i]),
                       ", expected a non-negative integer");
    }
    if (*d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DCP_ERROR(where, ": shape[", i, "] is ", *d, ", larger than int64 allows");
    }
    e->shape.push_back(static_cast<int64_t>(*d));
  }

  const json& off = v.at("data_offsets");
  if (!off.is_array()) {
    return DCP_ERROR(where, ": field 'data_offsets' is ", kind(off),
                     ", expected [begin, end] of non-negative integers");
  }
  if (off.size() != 2) {
    return DCP_ERROR(where, ": field 'data_offsets' has ", off.size(),
                     " elements, expected 2 ([begin, end])");
  }
  uint64_t be[2];
  for (size_t i = 0; i < 2; ++i) {
    const std::optional<uint64_t> o = as_unsigned(off[i]);
    if (!o) {
      return DCP_ERROR(where, ": data_offsets[", i, "] is ", shown(off[i]),
                       ", expected a non-negative integer");
    }
    be[i] = *o;
  }
  e->begin = be[0];
  e->end = be[1];

  int64_t nbytes = 0;
  DCP_TRY(shape_size(e->shape, e->dtype, where, &e->numel, &nbytes));
  if (e->begin > e->end) {
    return DCP_ERROR(where, ": data_offsets [", e->begin, ", ", e->end,
                     ") are reversed, expected begin <= end");
  }
  if (e->end > data_size) {
    return DCP_ERROR(where, ": data_offsets [", e->begin, ", ", e->end,
                     ") reach past the end of the data buffer (", data_size, " bytes)");
  }
  if (e->end - e->begin != static_cast<uint64_t>(nbytes)) {
    return DCP_ERROR(where, ": data_offsets [", e->begin, ", ", e->end, ") hold ",
                     e->end - e->begin, " bytes but shape ", shape_string(e->shape), " of ",
                     dtype_name(e->dtype), " needs ", nbytes);
  }
  return {};
}

// The tensors must cover the data buffer exactly: no overlap, no gap, nothing after the last.
// Empty tensors hold no bytes and may sit anywhere inside the buffer.
Status check_coverage(const std::string& src, const std::vector<Entry>& entries,
                      uint64_t data_size) {
  std::vector<const Entry*> order;
  order.reserve(entries.size());
  for (const Entry& e : entries) {
    if (e.end > e.begin) order.push_back(&e);
  }
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  uint64_t covered = 0;
  const Entry* last = nullptr;
  for (const Entry* e : order) {
    if (e->begin < covered) {
      return DCP_ERROR(src, ": tensor ", in_quotes(e->name), ": data_offsets [", e->begin, ", ",
                       e->end, ") overlap tensor ", in_quotes(last->name), " at [", last->begin,
                       ", ", last->end, ")");
    }
    if (e->begin > covered) {
      return DCP_ERROR(src, ": data buffer bytes [", covered, ", ", e->begin,
                       ") are not covered by any tensor (next is ", in_quotes(e->name), ")");
    }
    covered = e->end;
    last = e;
  }
  if (covered != data_size) {
    return DCP_ERROR(src, ": data buffer bytes [", covered, ", ", data_size,
                     ") are not covered by any tensor (the buffer must end with the last tensor)");
  }
  return {};
}

void decode(const Entry& e, const uint8_t* data, StTensor* t) {
  t->dtype = e.dtype;
  t->shape = e.shape;
  const auto n = static_cast<size_t>(e.numel);
  const uint8_t* p = data + e.begin;
  if (e.dtype == DType::i64) {
    t->ints.resize(n);
    for (size_t i = 0; i < n; ++i) {
      t->ints[i] = std::bit_cast<int64_t>(load_le(p + i * 8, 8));
    }
    return;
  }
  t->values.resize(n);
  // One loop per format (the conversion chosen once, not per element: a large case's tensors
  // hold hundreds of millions of elements).
  const auto each = [&](auto width, auto convert) {  // width: the element's bytes, a constant
    constexpr int kw = decltype(width)::value;
    for (size_t i = 0; i < n; ++i) t->values[i] = convert(load_le(p + i * kw, kw));
  };
  using W8 = std::integral_constant<int, 8>;
  using W4 = std::integral_constant<int, 4>;
  using W2 = std::integral_constant<int, 2>;
  using W1 = std::integral_constant<int, 1>;
  switch (e.dtype) {
    case DType::f64:
      each(W8{}, [](uint64_t b) { return std::bit_cast<double>(b); });
      break;
    case DType::f32:
      each(W4{}, [](uint64_t b) {
        return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(b)));
      });
      break;
    case DType::f16:
      each(W2{}, [](uint64_t b) { return f16_bits_to_double(static_cast<uint16_t>(b)); });
      break;
    case DType::bf16:
      each(W2{}, [](uint64_t b) { return bf16_bits_to_double(static_cast<uint16_t>(b)); });
      break;
    case DType::i8:
      each(W1{}, [](uint64_t b) { return static_cast<double>(static_cast<int8_t>(b)); });
      break;
    default:  // fp8: every byte's value from its row (dtype.hpp)
      if (is_fp8(e.dtype))
        each(W1{},
             [&e](uint64_t b) { return fp8_bits_to_double(e.dtype, static_cast<uint8_t>(b)); });
      break;
  }
}

void encode(const StTensor& t, std::vector<uint8_t>& out) {
  if (t.bytes != nullptr) {  // as stored: the bytes are already the file's
    out.insert(out.end(), t.bytes, t.bytes + numel_of(t.shape) * dtype_bytes(t.dtype));
    return;
  }
  if (t.dtype == DType::i64) {
    for (int64_t x : t.ints) store_le(out, std::bit_cast<uint64_t>(x), 8);
    return;
  }
  const size_t at = out.size();
  out.resize(at + t.values.size() * static_cast<size_t>(dtype_bytes(t.dtype)));
  narrow_to_stored(t.dtype, t.values.data(), static_cast<int64_t>(t.values.size()),
                   out.data() + at);
}

bool known_dtype(DType t) { return dtype_info(t) != nullptr; }

}  // namespace

Expected<StFile> parse_safetensors(const uint8_t* bytes, size_t size, std::string_view source,
                                   const StReadOptions& options, std::shared_ptr<const void> keep) {
  const std::string src = printable(source);
  if (size < 8) {
    return DCP_ERROR(src, ": file has ", size,
                     " bytes, expected at least 8 (the little-endian u64 header length)");
  }
  if (bytes == nullptr) return DCP_ERROR(src, ": no bytes given");
  const uint64_t n = load_le(bytes, 8);
  if (n > kMaxSafetensorsHeaderBytes) {
    return DCP_ERROR(src, ": header length ", n, " exceeds the limit of ",
                     kMaxSafetensorsHeaderBytes, " bytes (100 MiB)");
  }
  if (n > size - 8) {
    return DCP_ERROR(src, ": header length ", n, " but only ", size - 8,
                     " bytes follow the 8-byte length prefix");
  }
  const uint8_t* header_bytes = bytes + 8;
  const uint8_t* data = header_bytes + n;
  const uint64_t data_size = size - 8 - n;

  json header;
  DCP_TRY(parse_header(header_bytes, static_cast<size_t>(n), src, &header));
  if (!header.is_object()) {
    return DCP_ERROR(src, ": header is ", kind(header),
                     ", expected a JSON object mapping tensor names to entries");
  }

  StFile file;
  std::vector<Entry> entries;
  entries.reserve(header.size());
  for (const auto& item : header.items()) {
    const std::string& name = item.key();
    const json& value = item.value();
    if (name == kMetadataKey) {
      if (!value.is_object()) {
        return DCP_ERROR(src, ": '__metadata__' is ", kind(value),
                         ", expected an object mapping strings to strings");
      }
      for (const auto& m : value.items()) {
        if (!m.value().is_string()) {
          return DCP_ERROR(src, ": __metadata__ key ", in_quotes(m.key()), " is ", kind(m.value()),
                           ", expected a string");
        }
        file.metadata.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    Entry e;
    DCP_TRY(parse_entry(src, name, value, data_size, &e));
    entries.push_back(std::move(e));
  }
  DCP_TRY(check_coverage(src, entries, data_size));

  for (const Entry& e : entries) {
    StTensor& t = file.tensors[e.name];
    if (e.dtype != DType::i64 && options.in_place.count(e.name)) {
      t.dtype = e.dtype;
      t.shape = e.shape;
      t.bytes = data + e.begin;
      t.keep = keep;
    } else {
      decode(e, data, &t);
    }
  }
  return file;
}

namespace {

// The files mapped now, for mapped_file_at: a fixed table (a handler can read it), its slots
// claimed and freed with atomics. A file that finds no free slot is read as well, only not named.
constexpr size_t kMappedSlots = 64;
constexpr size_t kMappedPathBytes = 512;
struct MappedSlot {
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<uintptr_t> end{0};
  char path[kMappedPathBytes] = {};
};
MappedSlot g_mapped[kMappedSlots];

// Claims a slot for [p, p + size) of `path`; the slot's index, or kMappedSlots when none is free.
size_t register_mapping(const void* p, size_t size, const std::string& path) {
  for (size_t i = 0; i < kMappedSlots; ++i) {
    uintptr_t expected = 0;
    // Claimed with a begin of 1 (never a mapping's address) while the path is written.
    if (!g_mapped[i].begin.compare_exchange_strong(expected, 1)) continue;
    const std::string shown = printable(path);
    const size_t n = std::min(shown.size(), kMappedPathBytes - 1);
    std::memcpy(g_mapped[i].path, shown.data(), n);
    g_mapped[i].path[n] = '\0';
    g_mapped[i].end.store(reinterpret_cast<uintptr_t>(p) + size);
    g_mapped[i].begin.store(reinterpret_cast<uintptr_t>(p));
    return i;
  }
  return kMappedSlots;
}

}  // namespace

const char* mapped_file_at(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const MappedSlot& s : g_mapped) {
    const uintptr_t begin = s.begin.load();
    if (begin > 1 && a >= begin && a < s.end.load()) return s.path;
  }
  return nullptr;
}

Expected<StFile> read_safetensors(const std::string& path, const StReadOptions& options) {
  // A device or a pipe may never end (/dev/zero): only regular files are read.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return DCP_ERROR(printable(path), ": not a regular file (a folder, device or pipe)");
  errno = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return DCP_ERROR(printable(path), ": cannot open for reading: ", std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return DCP_ERROR(printable(path), ": not a regular file (a folder, device or pipe)");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return parse_safetensors(nullptr, 0, path);
  }
  // Mapped, not copied: pages are read as tensors are decoded or, in place, as they are used.
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED)
    return DCP_ERROR(printable(path), ": cannot map for reading: ", std::strerror(map_errno));
  const size_t slot = register_mapping(map, size, path);
  std::shared_ptr<const void> keep(map, [size, slot](const void* p) {
    if (slot < kMappedSlots) g_mapped[slot].begin.store(0);
    ::munmap(const_cast<void*>(p), size);
  });
  ::madvise(map, size, MADV_SEQUENTIAL);
  return parse_safetensors(static_cast<const uint8_t*>(map), size, path, options, std::move(keep));
}

Status check_st_file(const StFile& file, std::string_view source) {
  const std::string src = printable(source);
  for (const auto& [key, value] : file.metadata) {
    if (!is_utf8(key)) {
      return DCP_ERROR(src, ": __metadata__ key ", in_quotes(key), " is not valid UTF-8");
    }
    if (!is_utf8(value)) {
      return DCP_ERROR(src, ": __metadata__ key ", in_quotes(key), ": value is not valid UTF-8");
    }
  }
  for (const auto& [name, t] : file.tensors) {
    const std::string where = src + ": tensor " + in_quotes(name);
    if (name == kMetadataKey) {
      return DCP_ERROR(where, ": the name is reserved for the metadata object");
    }
    if (!is_utf8(name)) return DCP_ERROR(where, ": the name is not valid UTF-8");
    if (!known_dtype(t.dtype)) {
      return DCP_ERROR(where, ": dtype value ", static_cast<int>(t.dtype), " is not one of ",
                       accepted_dtypes());
    }
    int64_t numel = 0, nbytes = 0;
    DCP_TRY(shape_size(t.shape, t.dtype, where, &numel, &nbytes));
    const auto n = static_cast<uint64_t>(numel);
    if (t.dtype == DType::i64) {
      if (t.ints.size() != n || !t.values.empty()) {
        return DCP_ERROR(where, ": shape ", shape_string(t.shape), " of I64 needs ", numel,
                         " elements in ints (and none in values) but ints holds ", t.ints.size(),
                         " and values ", t.values.size());
      }
    } else if ((t.bytes == nullptr && t.values.size() != n) ||
               (t.bytes != nullptr && !t.values.empty()) || !t.ints.empty()) {
      return DCP_ERROR(where, ": shape ", shape_string(t.shape), " of ", dtype_name(t.dtype),
                       " needs ", numel,
                       " elements in values or in bytes (and none in ints) but values holds ",
                       t.values.size(), " and ints ", t.ints.size());
    }
  }
  return {};
}

std::vector<uint8_t> serialize_safetensors(const StFile& file) {
  if (!check_st_file(file, "serialize_safetensors").ok()) return {};
  using ojson = nlohmann::ordered_json;

  std::vector<const std::pair<const std::string, StTensor>*> order;
  order.reserve(file.tensors.size());
  for (const auto& item : file.tensors) order.push_back(&item);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return dtype_bytes(a->second.dtype) > dtype_bytes(b->second.dtype);
  });

  ojson header = ojson::object();
  if (!file.metadata.empty()) {
    ojson meta = ojson::object();
    for (const auto& [key, value] : file.metadata) meta[key] = value;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto* item : order) {
    const StTensor& t = item->second;
    const uint64_t nbytes = (t.dtype == DType::i64 ? t.ints.size()
                             : t.bytes != nullptr  ? static_cast<size_t>(numel_of(t.shape))
                                                   : t.values.size()) *
                            dtype_bytes(t.dtype);
    ojson entry = ojson::object();
    entry["dtype"] = std::string(dtype_name(t.dtype));
    entry["shape"] = t.shape;
    entry["data_offsets"] = ojson::array({offset, offset + nbytes});
    header[item->first] = std::move(entry);
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();  // strict UTF-8: check_st_file has already validated every string
  } catch (const std::exception&) {
    return {};
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  store_le(out, text.size(), 8);
  out.insert(out.end(), text.begin(), text.end());
  for (const auto* item : order) encode(item->second, out);
  return out;
}

Status write_safetensors(const std::string& path, const StFile& file) {
  DCP_TRY(check_st_file(file, path));
  const std::vector<uint8_t> bytes = serialize_safetensors(file);
  if (bytes.empty()) return DCP_ERROR(printable(path), ": cannot encode the header");
  return write_whole_file(path, bytes);
}

}  // namespace dcp::oracle
