// wire.hpp — judgements as bytes: the one format in which processes of a job send what they judged
// to the process that reports (`mpirun dcp-verify check`: judged parts; `run --comm mpi`: each
// rank's share of a step's judgement).
//
// A message is a sequence of fields, each written in the order the decoder reads it: flags as one
// byte, counts and indices as 8-byte integers, values as 8-byte doubles (bit patterns, so NaN and
// infinity travel exactly), texts as their length then their bytes. The processes of a job run one
// binary on one kind of machine, so the byte order is the machines'. A message that ends early,
// runs on, or holds a count or a name its fields cannot have is refused, naming the kind of
// message.
//
//   std::vector<uint8_t> m = encode_parts({{3, part}});          // process k: its judged parts
//   Expected<std::vector<IndexedPart>> back = decode_parts(m);    // process 0
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "oracle/check.hpp"
#include "oracle/status.hpp"
#include "properties/dcp_bridge.hpp"

namespace dcp::harness {

class WireWriter {
 public:
  void flag(bool b);
  void count(int64_t n);
  void value(double x);
  void text(std::string_view s);
  std::vector<uint8_t> bytes() && { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads the fields a WireWriter wrote, in the same order. A read past the end sets the error
// (the first one stays) and returns a zero; `finish` fails when an error was met or bytes remain.
class WireReader {
 public:
  WireReader(std::span<const uint8_t> bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}
  bool flag();
  int64_t count();
  double value();
  std::string text();
  bool whole() const { return !short_; }  // no read has run past the end
  oracle::Status finish() const;

 private:
  bool take(void* out, size_t n);
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
  std::string what_;
  bool short_ = false;
};

// A part judged by some process of a job: its index among the job's parts (every request's, in
// order) and its judgement.
struct IndexedPart {
  int64_t index = 0;
  oracle::PartCheck part;
};

std::vector<uint8_t> encode_parts(std::span<const IndexedPart> parts);
oracle::Expected<std::vector<IndexedPart>> decode_parts(std::span<const uint8_t> bytes);

// One process's judgement of its share of a step. The output's comparison (DcpCheck::full) is
// the reporting process's own and does not travel.
std::vector<uint8_t> encode_check(const props::DcpCheck& c);
oracle::Expected<props::DcpCheck> decode_check(std::span<const uint8_t> bytes);

}  // namespace dcp::harness
