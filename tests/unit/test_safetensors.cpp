// Tests for oracle/safetensors: round trips of every dtype and one test per malformed-input class.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "oracle/file_write.hpp"
#include "oracle/kv_tensor.hpp"
#include "oracle/safetensors.hpp"

namespace dcp::oracle {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kInf = std::numeric_limits<double>::infinity();

// A file made of a header (taken verbatim, so tests can write malformed JSON) and a data buffer.
std::vector<uint8_t> raw(const std::string& header, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Expected<StFile> parse(const std::vector<uint8_t>& bytes) {
  return parse_safetensors(bytes.data(), bytes.size(), "case.safetensors");
}

// The message of a parse that must fail; every message is a single line that names the file.
std::string error_of(const std::vector<uint8_t>& bytes) {
  const Expected<StFile> f = parse(bytes);
  EXPECT_FALSE(f.ok());
  if (f.ok()) return "";
  const std::string msg = f.status().message();
  EXPECT_THAT(msg, HasSubstr("case.safetensors: "));
  EXPECT_THAT(msg, Not(HasSubstr("\n")));
  return msg;
}

// A header with one tensor entry `k` whose body is given.
std::string one(const std::string& body) { return "{\"k\": " + body + "}"; }

StFile one_tensor(DType dtype, Shape shape, std::vector<double> values) {
  StFile f;
  f.tensors["t"] = StTensor{dtype, std::move(shape), std::move(values), {}};
  return f;
}

StFile round_trip(const StFile& in) {
  const std::vector<uint8_t> bytes = serialize_safetensors(in);
  EXPECT_FALSE(bytes.empty());
  Expected<StFile> out = parse(bytes);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : StFile{};
}

// The stored element bits of tensor `t` in a single-tensor file (the data buffer, little-endian).
std::vector<uint64_t> stored_bits(const StFile& f, int width) {
  const std::vector<uint8_t> bytes = serialize_safetensors(f);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  std::vector<uint64_t> bits;
  for (size_t p = 8 + n; p + static_cast<size_t>(width) <= bytes.size(); p += width) {
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | bytes[p + static_cast<size_t>(i)];
    bits.push_back(v);
  }
  return bits;
}

void expect_same_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    } else {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "element " << i;
    }
  }
}

// --- round trips ---------------------------------------------------------------------------------

TEST(SafetensorsRoundTrip, F64IsBitExact) {
  const double dmin_sub = std::numeric_limits<double>::denorm_min();
  const double dmax = std::numeric_limits<double>::max();
  const std::vector<double> v = {0.1, -0.0, 1.0 / 3.0, dmin_sub, dmax, kInf, -kInf, std::nan("")};
  const StFile out = round_trip(one_tensor(DType::f64, {2, 4}, v));
  const StTensor& t = out.tensors.at("t");
  EXPECT_EQ(t.dtype, DType::f64);
  EXPECT_EQ(t.shape, (Shape{2, 4}));
  EXPECT_TRUE(t.ints.empty());
  expect_same_values(t.values, v);
}

TEST(SafetensorsRoundTrip, F32ExactAndRounded) {
  const double fmin_sub = std::numeric_limits<float>::denorm_min();
  const double fmax = std::numeric_limits<float>::max();
  const StFile in = one_tensor(DType::f32, {7}, {1.5, -0.0, fmin_sub, fmax, -kInf, 0.1, 1e300});
  const StFile out = round_trip(in);
  expect_same_values(out.tensors.at("t").values,
                     {1.5, -0.0, fmin_sub, fmax, -kInf, static_cast<double>(0.1f), kInf});
  EXPECT_EQ(stored_bits(in, 4)[0], 0x3fc00000u);
}

TEST(SafetensorsRoundTrip, F16SubnormalsInfAndTiesToEven) {
  const double sub_min = std::ldexp(1.0, -24);                         // 0x0001
  const double sub_max = std::ldexp(1.0, -14) - std::ldexp(1.0, -24);  // 0x03ff
  const double norm_min = std::ldexp(1.0, -14);                        // 0x0400
  const std::vector<double> exact = {1.0, -2.0, 65504.0, sub_min, sub_max, norm_min, kInf, -0.0};
  const StFile in = one_tensor(DType::f16, {8}, exact);
  expect_same_values(round_trip(in).tensors.at("t").values, exact);
  EXPECT_EQ(stored_bits(in, 2), (std::vector<uint64_t>{0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff,
                                                       0x0400, 0x7c00, 0x8000}));

  // Ties go to even; 65520 rounds past the largest finite value to inf; half the smallest
  // subnormal ties to 0, three quarters of it rounds up.
  const std::vector<double> inexact = {1.0 + std::ldexp(1.0, -11), 1.0 + 3 * std::ldexp(1.0, -11),
                                       65520.0, std::ldexp(1.0, -25), 3 * std::ldexp(1.0, -26)};
  expect_same_values(round_trip(one_tensor(DType::f16, {5}, inexact)).tensors.at("t").values,
                     {1.0, 1.0 + std::ldexp(1.0, -9), kInf, 0.0, sub_min});
}

TEST(SafetensorsRoundTrip, Bf16SubnormalsInfAndTiesToEven) {
  const double sub_min = std::ldexp(1.0, -133);
  const double max = 3.3895313892515355e38;
  const std::vector<double> exact = {1.0, -2.0, sub_min, std::ldexp(1.0, -126), max, -kInf, -0.0};
  const StFile in = one_tensor(DType::bf16, {7}, exact);
  expect_same_values(round_trip(in).tensors.at("t").values, exact);
  EXPECT_EQ(stored_bits(in, 2),
            (std::vector<uint64_t>{0x3f80, 0xc000, 0x0001, 0x0080, 0x7f7f, 0xff80, 0x8000}));

  const std::vector<double> inexact = {1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8),
                                       1e39, std::ldexp(1.0, -134)};
  expect_same_values(round_trip(one_tensor(DType::bf16, {4}, inexact)).tensors.at("t").values,
                     {1.0, 1.0 + std::ldexp(1.0, -6), kInf, 0.0});
}

TEST(SafetensorsRoundTrip, F8E4M3SubnormalsSaturationAndTiesToEven) {
  // 448 is the largest value; 2^-9 the smallest subnormal, 2^-6 the smallest normal.
  const std::vector<double> exact = {
      1.0, -2.0, 448.0, std::ldexp(1.0, -9), std::ldexp(1.0, -6), 7 * std::ldexp(1.0, -9), -0.0};
  const StFile in = one_tensor(DType::f8e4m3, {7}, exact);
  expect_same_values(round_trip(in).tensors.at("t").values, exact);
  EXPECT_EQ(stored_bits(in, 1), (std::vector<uint64_t>{0x38, 0xc0, 0x7e, 0x01, 0x08, 0x07, 0x80}));
  // Ties go to even; 470 rounds past 448 (464 would tie to it) and E4M3 has no inf: NaN; half the
  // smallest subnormal
  // subnormal ties to 0.
  const std::vector<double> inexact = {1.0 + std::ldexp(1.0, -4), 1.0 + 3 * std::ldexp(1.0, -4),
                                       470.0, std::ldexp(1.0, -10)};
  const StFile out = round_trip(one_tensor(DType::f8e4m3, {4}, inexact));
  expect_same_values(out.tensors.at("t").values, {1.0, 1.25, std::nan(""), 0.0});
}

TEST(SafetensorsRoundTrip, F8E5M2SubnormalsInfAndTiesToEven) {
  const std::vector<double> exact = {
      1.0, -2.0, 57344.0, std::ldexp(1.0, -16), std::ldexp(1.0, -14), kInf, -0.0};
  const StFile in = one_tensor(DType::f8e5m2, {7}, exact);
  expect_same_values(round_trip(in).tensors.at("t").values, exact);
  EXPECT_EQ(stored_bits(in, 1), (std::vector<uint64_t>{0x3c, 0xc0, 0x7b, 0x01, 0x04, 0x7c, 0x80}));
  const std::vector<double> inexact = {1.0 + std::ldexp(1.0, -3), 1.0 + 3 * std::ldexp(1.0, -3),
                                       61440.0, std::ldexp(1.0, -17)};
  expect_same_values(round_trip(one_tensor(DType::f8e5m2, {4}, inexact)).tensors.at("t").values,
                     {1.0, 1.5, kInf, 0.0});
}

TEST(SafetensorsRoundTrip, F8E4M3FnuzOneZeroOneNanAndSaturation) {
  // Bias 8: 240 = 1.875 * 2^7 the largest (the all-ones exponent is a normal one), 2^-10 the
  // smallest subnormal, 2^-7 the smallest normal; no -0 (a negative zero stores as +0).
  const std::vector<double> exact = {1.0,    -2.0, 240.0, std::ldexp(1.0, -10), std::ldexp(1.0, -7),
                                     -240.0, 0.0};
  const StFile in = one_tensor(DType::f8e4m3fnuz, {7}, exact);
  expect_same_values(round_trip(in).tensors.at("t").values, exact);
  EXPECT_EQ(stored_bits(in, 1), (std::vector<uint64_t>{0x40, 0xc8, 0x7f, 0x01, 0x08, 0xff, 0x00}));
  EXPECT_EQ(max_finite(DType::f8e4m3fnuz), 240.0);
  EXPECT_EQ(min_normal(DType::f8e4m3fnuz), std::ldexp(1.0, -7));
  // -0 and a tie toward it store as 0x00; past 240 (248 ties away from it) and NaN: 0x80, the NaN.
  const StFile odd =
      one_tensor(DType::f8e4m3fnuz, {4}, {-0.0, -std::ldexp(1.0, -11), 250.0, std::nan("")});
  EXPECT_EQ(stored_bits(odd, 1), (std::vector<uint64_t>{0x00, 0x00, 0x80, 0x80}));
  EXPECT_TRUE(std::isnan(fp8_bits_to_double(DType::f8e4m3fnuz, 0x80)));
  EXPECT_EQ(first_nonfinite(DType::f8e4m3fnuz, std::vector<uint8_t>{0x7f, 0xff, 0x80}.data(), 3),
            2);
}

// Every fp8 byte decodes to a value the format represents, which encodes back to the same byte
// (NaNs to the all-ones NaN of their sign), and no two bytes but +0 and -0 share a value.
TEST(SafetensorsRoundTrip, EveryFp8ByteRoundTrips) {
  for (DType t : {DType::f8e4m3, DType::f8e5m2, DType::f8e4m3fnuz}) {
    std::vector<double> finite;
    for (int b = 0; b < 256; ++b) {
      const double v = fp8_bits_to_double(t, static_cast<uint8_t>(b));
      const uint8_t back = double_to_fp8_bits(t, v);
      if (std::isnan(v)) {
        EXPECT_EQ(back, t == DType::f8e4m3fnuz ? 0x80 : (b & 0x80) | 0x7f)
            << dtype_name(t) << " byte " << b;
        continue;
      }
      EXPECT_EQ(back, b) << dtype_name(t) << " byte " << b << " = " << v;
      EXPECT_TRUE(representable(t, v)) << dtype_name(t) << " byte " << b;
      if (std::isfinite(v) && v != 0.0) finite.push_back(v);
    }
    std::sort(finite.begin(), finite.end());
    EXPECT_EQ(std::adjacent_find(finite.begin(), finite.end()), finite.end()) << dtype_name(t);
    // E4M3: 2 x 126 nonzero finite values (the NaN takes one code per sign); E5M2: 2 x 123;
    // E4M3FNUZ: 2 x 127 (one zero, one NaN).
    EXPECT_EQ(finite.size(), t == DType::f8e4m3   ? 252u
                             : t == DType::f8e5m2 ? 246u
                                                  : 254u)
        << dtype_name(t);
    EXPECT_EQ(finite.back(), max_finite(t)) << dtype_name(t);
  }
}

TEST(SafetensorsRoundTrip, NanStaysNanInEveryFloatingDtype) {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2,
                  DType::f8e4m3fnuz}) {
    const StFile out = round_trip(one_tensor(t, {2}, {std::nan(""), -std::nan("")}));
    const std::vector<double>& v = out.tensors.at("t").values;
    ASSERT_EQ(v.size(), 2u) << dtype_name(t);
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1])) << dtype_name(t);
  }
}

TEST(SafetensorsRoundTrip, I64Extremes) {
  StFile in;
  const std::vector<int64_t> ints = {std::numeric_limits<int64_t>::min(), -1,           0, 1,
                                     std::numeric_limits<int64_t>::max(), 1234567890123};
  in.tensors["pos"] = StTensor{DType::i64, {3, 2}, {}, ints};
  const StFile out = round_trip(in);
  const StTensor& t = out.tensors.at("pos");
  EXPECT_EQ(t.dtype, DType::i64);
  EXPECT_EQ(t.shape, (Shape{3, 2}));
  EXPECT_EQ(t.ints, ints);
  EXPECT_TRUE(t.values.empty());
}

TEST(SafetensorsRoundTrip, MixedDtypesMetadataScalarsAndEmptyTensors) {
  StFile in;
  in.metadata = {{"format", "pt"}, {"note", "line\nbreak \"quoted\" \xc3\xa9"}, {"", ""}};
  in.tensors["a16"] = StTensor{DType::f16, {3}, {1, 2, 3}, {}};
  in.tensors["b64"] = StTensor{DType::f64, {}, {0.5}, {}};  // scalar
  in.tensors["c32"] = StTensor{DType::f32, {1, 1}, {-4}, {}};
  in.tensors["dbf"] = StTensor{DType::bf16, {0, 5}, {}, {}};  // no elements
  in.tensors["e64"] = StTensor{DType::i64, {1}, {}, {7}};
  in.tensors["\xce\xbb name with spaces"] = StTensor{DType::f32, {2}, {1, 2}, {}};
  const StFile out = round_trip(in);
  EXPECT_EQ(out.metadata, in.metadata);
  ASSERT_EQ(out.tensors.size(), in.tensors.size());
  for (const auto& [name, t] : in.tensors) {
    ASSERT_TRUE(out.tensors.count(name)) << name;
    const StTensor& o = out.tensors.at(name);
    EXPECT_EQ(o.dtype, t.dtype) << name;
    EXPECT_EQ(o.shape, t.shape) << name;
    EXPECT_EQ(o.values, t.values) << name;
    EXPECT_EQ(o.ints, t.ints) << name;
  }
}

TEST(SafetensorsRoundTrip, WriterPadsHeaderAndAlignsTensors) {
  StFile in;
  in.tensors["h"] = StTensor{DType::f16, {3}, {1, 2, 3}, {}};
  in.tensors["d"] = StTensor{DType::f64, {1}, {1}, {}};
  in.tensors["f"] = StTensor{DType::f32, {1}, {1}, {}};
  const std::vector<uint8_t> bytes = serialize_safetensors(in);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  EXPECT_EQ(n % 8, 0u);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n));
  EXPECT_THAT(header, HasSubstr("\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}"));
  EXPECT_THAT(header, HasSubstr("\"data_offsets\":[8,12]"));   // f: F32 after F64
  EXPECT_THAT(header, HasSubstr("\"data_offsets\":[12,18]"));  // h: F16 last
  EXPECT_EQ(bytes.size(), 8 + n + 18);
}

TEST(SafetensorsRoundTrip, ZeroTensorsIsAValidFile) {
  const std::vector<uint8_t> bytes = serialize_safetensors(StFile{});
  EXPECT_EQ(bytes.size(), 16u);  // length, then "{}" padded to 8 bytes
  const Expected<StFile> f = parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->tensors.empty());
  EXPECT_TRUE(f->metadata.empty());
  EXPECT_TRUE(parse(raw("{}")).ok());
}

TEST(SafetensorsRead, HandWrittenFileWithPaddedHeader) {
  // F32 [1.0, -2.5] and I64 [-2], header padded with spaces on both sides.
  const std::vector<uint8_t> data = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0,
                                     0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const Expected<StFile> f =
      parse(raw("  {\"x\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                "\"i\": {\"data_offsets\": [8, 16], \"shape\": [1], \"dtype\": \"I64\"}, "
                "\"__metadata__\": {\"k\": \"v\"}}      ",
                data));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tensors.at("x").values, (std::vector<double>{1.0, -2.5}));
  EXPECT_EQ(f->tensors.at("i").ints, (std::vector<int64_t>{-2}));
  EXPECT_EQ(f->metadata.at("k"), "v");
}

TEST(SafetensorsRead, WriteThenReadAFile) {
  const std::string path = ::testing::TempDir() + "/st_round_trip.safetensors";
  const StFile in = one_tensor(DType::bf16, {2}, {1.0, -0.5});
  ASSERT_TRUE(write_safetensors(path, in).ok());
  const Expected<StFile> out = read_safetensors(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->tensors.at("t").values, in.tensors.at("t").values);
  std::remove(path.c_str());
}

TEST(SafetensorsRead, MissingFileNamesThePath) {
  const Expected<StFile> f = read_safetensors("/nonexistent/dir/x.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("/nonexistent/dir/x.safetensors: cannot open"));
}

TEST(SafetensorsRead, WriteToAnUnwritablePathFails) {
  const Status s = write_safetensors("/nonexistent/dir/x.safetensors", StFile{});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/dir/x.safetensors: cannot open for writing"));
}

// Written whole or not at all (oracle/file_write.hpp): a file is replaced by the complete new one,
// and a write that fails leaves the target as it was and no temporary file beside it.
TEST(FileWrite, ReplacesWholeOrLeavesEverythingAsItWas) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dcp-file-write-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "a-folder");
  const std::string target = (dir / "out.bin").string();
  const std::vector<uint8_t> first(100, 1), second(3, 2);
  ASSERT_TRUE(write_whole_file(target, first).ok());
  ASSERT_TRUE(write_whole_file(target, second).ok());
  std::ifstream in(target, std::ios::binary);
  const std::vector<uint8_t> got((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
  EXPECT_EQ(got, second);
  // A folder cannot be replaced by a file: the error names the path, the folder stays, and the
  // temporary is gone.
  const Status s = write_whole_file((dir / "a-folder").string(), first);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("a-folder"));
  EXPECT_TRUE(fs::is_directory(dir / "a-folder"));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 2);  // out.bin and a-folder: no temporary left behind
  EXPECT_FALSE(write_whole_file("", first).ok());
  fs::remove_all(dir);
}

// --- malformed input: the file as a whole
// ---------------------------------------------------------

TEST(SafetensorsMalformed, ShorterThanTheLengthPrefix) {
  for (size_t n = 0; n < 8; ++n) {
    const std::vector<uint8_t> bytes(n, 0);
    EXPECT_THAT(error_of(bytes), HasSubstr("expected at least 8"));
  }
  EXPECT_FALSE(parse_safetensors(nullptr, 0, "case.safetensors").ok());
}

TEST(SafetensorsMalformed, EveryTruncationOfAValidFileFails) {
  StFile in;
  in.metadata["m"] = "x";
  in.tensors["a"] = StTensor{DType::f32, {2}, {1, 2}, {}};
  in.tensors["b"] = StTensor{DType::i64, {1}, {}, {3}};
  const std::vector<uint8_t> bytes = serialize_safetensors(in);
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<int64_t>(n));
    EXPECT_FALSE(parse(prefix).ok()) << "prefix of " << n << " bytes";
  }
}

TEST(SafetensorsMalformed, HeaderLengthBeyondTheFile) {
  std::vector<uint8_t> bytes = raw("{}");
  bytes[0] = 100;
  EXPECT_THAT(error_of(bytes), HasSubstr("header length 100 but only 2 bytes follow"));
}

TEST(SafetensorsMalformed, AbsurdHeaderLength) {
  std::vector<uint8_t> bytes = raw("{}");
  bytes[7] = 0xff;  // ~1.8e19
  EXPECT_THAT(error_of(bytes), HasSubstr("exceeds the limit of 104857600 bytes (100 MiB)"));
  std::vector<uint8_t> just_over = raw("{}");
  const uint64_t n = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i)
    just_over[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  EXPECT_THAT(error_of(just_over), HasSubstr("header length 104857601 exceeds"));
}

TEST(SafetensorsMalformed, EmptyHeader) {
  EXPECT_THAT(error_of(raw("")), HasSubstr("header length is 0, expected a JSON object"));
}

TEST(SafetensorsMalformed, HeaderNotJson) {
  EXPECT_THAT(error_of(raw("{\"k\": ")), HasSubstr("header is not valid JSON: parse error"));
  EXPECT_THAT(error_of(raw("{} trailing")), HasSubstr("header is not valid JSON"));
  EXPECT_THAT(error_of(raw(std::string("{}\0\0\0\0\0\0", 8))),  // padded with NULs
              HasSubstr("header is not valid JSON: NUL byte at header offset 2"));
  EXPECT_THAT(error_of(raw("{\"\xff\": 1}")), HasSubstr("header is not valid JSON"));  // not UTF-8
  EXPECT_THAT(error_of(raw("{\"a\": 1e999}")), HasSubstr("header is not valid JSON"));
}

TEST(SafetensorsMalformed, HeaderNotAnObject) {
  EXPECT_THAT(error_of(raw("[1, 2]")), HasSubstr("header is an array, expected a JSON object"));
  EXPECT_THAT(error_of(raw("\"x\"")), HasSubstr("header is a string, expected a JSON object"));
}

TEST(SafetensorsMalformed, HeaderNestedTooDeep) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(error_of(raw(one(deep))), HasSubstr("header nests deeper than 16 levels"));
}

TEST(SafetensorsMalformed, DuplicateKeys) {
  const std::string e = "{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]}";
  EXPECT_THAT(error_of(raw("{\"k\": " + e + ", \"k\": " + e + "}")),
              HasSubstr("header lists tensor 'k' twice"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"dtype\": \"F16\", \"shape\": [0], "
                               "\"data_offsets\": [0, 0]}"))),
              HasSubstr("tensor 'k': duplicate key 'dtype'"));
  EXPECT_THAT(error_of(raw("{\"__metadata__\": {\"a\": \"1\", \"a\": \"2\"}}")),
              HasSubstr("__metadata__: duplicate key 'a'"));
}

// --- malformed input: one tensor entry -----------------------------------------------------------

TEST(SafetensorsMalformed, EntryNotAnObject) {
  EXPECT_THAT(error_of(raw(one("5"))),
              HasSubstr("tensor 'k': entry is a number, expected an object with dtype, shape"));
  EXPECT_THAT(error_of(raw(one("[\"F32\"]"))), HasSubstr("tensor 'k': entry is an array"));
}

TEST(SafetensorsMalformed, MissingFields) {
  EXPECT_THAT(error_of(raw(one("{\"shape\": [1], \"data_offsets\": [0, 4]}"), {0, 0, 0, 0})),
              HasSubstr("tensor 'k': missing field 'dtype'"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"data_offsets\": [0, 4]}"), {0, 0, 0, 0})),
              HasSubstr("tensor 'k': missing field 'shape'"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [1]}"), {0, 0, 0, 0})),
              HasSubstr("tensor 'k': missing field 'data_offsets'"));
}

TEST(SafetensorsMalformed, UnexpectedField) {
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0], "
                               "\"data_offset\": 1}"))),
              HasSubstr("tensor 'k': unexpected field 'data_offset'"));
}

TEST(SafetensorsMalformed, MistypedFields) {
  EXPECT_THAT(error_of(raw(one("{\"dtype\": 32, \"shape\": [0], \"data_offsets\": [0, 0]}"))),
              HasSubstr("tensor 'k': field 'dtype' is a number, expected a string"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": \"2x3\", \"data_offsets\": "
                               "[0, 0]}"))),
              HasSubstr("tensor 'k': field 'shape' is a string, expected an array"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [2, \"3\"], \"data_offsets\": "
                               "[0, 24]}"))),
              HasSubstr("tensor 'k': shape[1] is a string, expected a non-negative integer"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": "
                               "[0, 0]}"))),
              HasSubstr("tensor 'k': shape[0] is 2.5, expected a non-negative integer"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": null}"))),
              HasSubstr("tensor 'k': field 'data_offsets' is null, expected [begin, end]"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": "
                               "[0, 0, 0]}"))),
              HasSubstr("tensor 'k': field 'data_offsets' has 3 elements, expected 2"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": "
                               "[0, -4]}"))),
              HasSubstr("tensor 'k': data_offsets[1] is -4, expected a non-negative integer"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": "
                               "[true, 0]}"))),
              HasSubstr("tensor 'k': data_offsets[0] is a boolean"));
}

TEST(SafetensorsMalformed, UnknownDtype) {
  const std::string msg =
      error_of(raw(one("{\"dtype\": \"F8_E3M4\", \"shape\": [1], \"data_offsets\": [0, 1]}"), {0}));
  EXPECT_THAT(msg, HasSubstr("tensor 'k': unknown dtype 'F8_E3M4'"));
  EXPECT_THAT(msg,
              HasSubstr("(accepted: " +
                        dcp::oracle::dtype_names([](dcp::oracle::DType) { return true; }) + ")"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"f32\", \"shape\": [0], \"data_offsets\": [0, 0]}"))),
              HasSubstr("unknown dtype 'f32'"));  // names are case-sensitive
}

TEST(SafetensorsMalformed, NegativeDim) {
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [2, -3], \"data_offsets\": "
                               "[0, 0]}"))),
              HasSubstr("tensor 'k': shape[1] is -3, expected a non-negative integer"));
}

TEST(SafetensorsMalformed, DimBeyondInt64) {
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [18446744073709551615], "
                               "\"data_offsets\": [0, 0]}"))),
              HasSubstr("tensor 'k': shape[0] is 18446744073709551615, larger than int64 allows"));
}

TEST(SafetensorsMalformed, ShapeProductOverflows) {
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], "
                               "\"data_offsets\": [0, 0]}"))),
              HasSubstr("tensor 'k': shape [4294967296, 4294967296] has more elements than int64"));
  // 2^62 elements fit, 2^65 bytes of F64 do not.
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F64\", \"shape\": [2147483648, 2147483648], "
                               "\"data_offsets\": [0, 0]}"))),
              HasSubstr("tensor 'k': shape [2147483648, 2147483648] of F64 needs more bytes"));
  // A zero dim makes the product 0 whatever the other dims are.
  EXPECT_TRUE(parse(raw(one("{\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 0], "
                            "\"data_offsets\": [0, 0]}")))
                  .ok());
}

TEST(SafetensorsMalformed, OffsetsReversed) {
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}"),
                           {0, 0, 0, 0})),
              HasSubstr("tensor 'k': data_offsets [4, 0) are reversed, expected begin <= end"));
}

TEST(SafetensorsMalformed, OffsetsBeyondTheBuffer) {
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}"),
                           {0, 0, 0, 0})),
              HasSubstr("tensor 'k': data_offsets [0, 8) reach past the end of the data buffer "
                        "(4 bytes)"));
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": "
                               "[18446744073709551615, 18446744073709551615]}"))),
              HasSubstr("tensor 'k': data_offsets [18446744073709551615, 18446744073709551615) "
                        "reach past the end"));
}

TEST(SafetensorsMalformed, OffsetsDisagreeWithShape) {
  EXPECT_THAT(
      error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [2, 3, 4], \"data_offsets\": [0, 64]}"),
                   std::vector<uint8_t>(64, 0))),
      HasSubstr("case.safetensors: tensor 'k': data_offsets [0, 64) hold 64 bytes but shape "
                "[2, 3, 4] of F32 needs 96"));
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  EXPECT_THAT(
      error_of(raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                   " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
                   std::vector<uint8_t>(12, 0))),
      HasSubstr("tensor 'b': data_offsets [4, 12) overlap tensor 'a' at [0, 8)"));
  // The same bytes twice.
  EXPECT_THAT(
      error_of(raw("{\"a\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]},"
                   " \"b\": {\"dtype\": \"F64\", \"shape\": [1], \"data_offsets\": [0, 8]}}",
                   std::vector<uint8_t>(8, 0))),
      HasSubstr("tensor 'b': data_offsets [0, 8) overlap tensor 'a' at [0, 8)"));
}

TEST(SafetensorsMalformed, BytesNotCoveredByAnyTensor) {
  // A gap between two tensors.
  EXPECT_THAT(
      error_of(raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                   " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
                   std::vector<uint8_t>(12, 0))),
      HasSubstr("data buffer bytes [4, 8) are not covered by any tensor (next is 'b')"));
  // Trailing bytes after the last tensor, and bytes in a file with no tensors at all.
  EXPECT_THAT(error_of(raw(one("{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}"),
                           std::vector<uint8_t>(6, 0))),
              HasSubstr("data buffer bytes [4, 6) are not covered by any tensor"));
  EXPECT_THAT(error_of(raw("{}", {1, 2, 3})),
              HasSubstr("data buffer bytes [0, 3) are not covered by any tensor"));
}

TEST(SafetensorsMalformed, EmptyTensorsMaySitAnywhereInTheBuffer) {
  EXPECT_TRUE(parse(raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                        " \"z\": {\"dtype\": \"F16\", \"shape\": [0], \"data_offsets\": [4, 4]}}",
                        std::vector<uint8_t>(8, 0)))
                  .ok());
}

TEST(SafetensorsMalformed, MetadataNotAnObjectOfStrings) {
  EXPECT_THAT(error_of(raw("{\"__metadata__\": [\"a\"]}")),
              HasSubstr("'__metadata__' is an array, expected an object mapping strings to "
                        "strings"));
  EXPECT_THAT(error_of(raw("{\"__metadata__\": {\"epoch\": 3}}")),
              HasSubstr("__metadata__ key 'epoch' is a number, expected a string"));
  EXPECT_THAT(error_of(raw("{\"__metadata__\": {\"nested\": {\"a\": \"b\"}}}")),
              HasSubstr("__metadata__ key 'nested' is an object, expected a string"));
  EXPECT_THAT(error_of(raw("{\"__metadata__\": {}, \"__metadata__\": {}}")),
              HasSubstr("header has two '__metadata__' objects"));
}

TEST(SafetensorsMalformed, NamesAreEscapedIntoOneLine) {
  const std::string msg = error_of(raw("{\"bad\\nname\\u0001\": 1}"));
  EXPECT_THAT(msg, HasSubstr("tensor 'bad\\nname\\x01': entry is a number"));
  const std::string long_name(5000, 'n');
  EXPECT_THAT(error_of(raw("{\"" + long_name + "\": 1}")), HasSubstr("...(5000 bytes)"));
}

// --- what the writer refuses ---------------------------------------------------------------------

TEST(SafetensorsWrite, RejectsInconsistentFiles) {
  StFile too_few = one_tensor(DType::f32, {2, 2}, {1, 2, 3});
  EXPECT_TRUE(serialize_safetensors(too_few).empty());
  Status s = write_safetensors(::testing::TempDir() + "/never.safetensors", too_few);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("tensor 't': shape [2, 2] of F32 needs 4 elements in values"));

  StFile i64_in_values = one_tensor(DType::i64, {1}, {1.0});
  EXPECT_THAT(check_st_file(i64_in_values, "x").message(),
              HasSubstr("x: tensor 't': shape [1] of I64 needs 1 elements in ints"));

  StFile negative = one_tensor(DType::f32, {-1}, {});
  EXPECT_THAT(check_st_file(negative, "x").message(), HasSubstr("tensor 't': shape[0] is -1"));

  StFile reserved;
  reserved.tensors["__metadata__"] = StTensor{DType::f32, {0}, {}, {}};
  EXPECT_THAT(check_st_file(reserved, "x").message(),
              HasSubstr("tensor '__metadata__': the name is reserved"));

  StFile bad_utf8 = one_tensor(DType::f32, {0}, {});
  bad_utf8.tensors["\xc0\xaf"] = StTensor{DType::f32, {0}, {}, {}};  // overlong '/'
  EXPECT_THAT(check_st_file(bad_utf8, "x").message(), HasSubstr("the name is not valid UTF-8"));
  EXPECT_TRUE(serialize_safetensors(bad_utf8).empty());

  StFile bad_meta;
  bad_meta.metadata["k"] = "\xed\xa0\x80";  // an encoded surrogate
  EXPECT_THAT(check_st_file(bad_meta, "x").message(),
              HasSubstr("__metadata__ key 'k': value is not valid UTF-8"));

  StFile bad_dtype = one_tensor(static_cast<DType>(42), {0}, {});
  EXPECT_THAT(check_st_file(bad_dtype, "x").message(), HasSubstr("dtype value 42 is not one of"));
}

}  // namespace
}  // namespace dcp::oracle
