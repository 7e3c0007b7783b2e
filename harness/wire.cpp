#include "harness/wire.hpp"

#include <array>
#include <cstring>

namespace dcp::harness {

void WireWriter::flag(bool b) { bytes_.push_back(b ? 1 : 0); }

void WireWriter::count(int64_t n) {
  const size_t at = bytes_.size();
  bytes_.resize(at + sizeof n);
  std::memcpy(bytes_.data() + at, &n, sizeof n);
}

void WireWriter::value(double x) {
  const size_t at = bytes_.size();
  bytes_.resize(at + sizeof x);
  std::memcpy(bytes_.data() + at, &x, sizeof x);
}

void WireWriter::text(std::string_view s) {
  count(static_cast<int64_t>(s.size()));
  bytes_.insert(bytes_.end(), s.begin(), s.end());
}

bool WireReader::take(void* out, size_t n) {
  if (short_ || bytes_.size() - at_ < n) {
    short_ = true;
    std::memset(out, 0, n);
    return false;
  }
  std::memcpy(out, bytes_.data() + at_, n);
  at_ += n;
  return true;
}

bool WireReader::flag() {
  uint8_t b = 0;
  take(&b, 1);
  return b != 0;
}

int64_t WireReader::count() {
  int64_t n = 0;
  take(&n, sizeof n);
  return n;
}

double WireReader::value() {
  double x = 0.0;
  take(&x, sizeof x);
  return x;
}

std::string WireReader::text() {
  const int64_t n = count();
  if (short_ || n < 0 || static_cast<uint64_t>(n) > bytes_.size() - at_) {
    short_ = true;
    return {};
  }
  std::string s(reinterpret_cast<const char*>(bytes_.data()) + at_, static_cast<size_t>(n));
  at_ += static_cast<size_t>(n);
  return s;
}

oracle::Status WireReader::finish() const {
  if (short_)
    return DCP_ERROR(what_, ": a message of ", bytes_.size(), " bytes ends before its fields do");
  if (at_ != bytes_.size())
    return DCP_ERROR(what_, ": a message of ", bytes_.size(), " bytes holds ", bytes_.size() - at_,
                     " bytes after its fields");
  return {};
}

namespace {

using oracle::Worst;

void put(WireWriter& w, const Worst& x) {
  for (const int64_t i : x.index) w.count(i);
  for (const double v : {x.got, x.expected, x.error, x.bound, x.ratio}) w.value(v);
}

Worst get_worst(WireReader& r) {
  Worst x;
  for (int64_t& i : x.index) i = r.count();
  for (double* v : {&x.got, &x.expected, &x.error, &x.bound, &x.ratio}) *v = r.value();
  return x;
}

// A bound term travels as its name's place in the table of its tensor's terms (the oracle names
// its terms from these tables only; a name outside them would travel as the table's size, which
// the decoder refuses).
void put(WireWriter& w, const std::vector<oracle::BoundTerm>& terms,
         const std::array<const char*, 8>& names) {
  w.count(static_cast<int64_t>(terms.size()));
  for (const oracle::BoundTerm& t : terms) {
    int64_t at = 0;
    while (at < static_cast<int64_t>(names.size()) &&
           std::strcmp(names[static_cast<size_t>(at)], t.name) != 0)
      ++at;
    w.count(at);
    w.value(t.value);
  }
}

std::vector<oracle::BoundTerm> get_terms(WireReader& r, const std::array<const char*, 8>& names,
                                         oracle::Status& bad) {
  std::vector<oracle::BoundTerm> terms;
  const int64_t n = r.count();
  if (n < 0 || n > static_cast<int64_t>(names.size())) {
    bad = DCP_ERROR(n, " bound terms, expected at most ", names.size());
    return terms;
  }
  for (int64_t i = 0; i < n && bad.ok() && r.whole(); ++i) {
    const int64_t at = r.count();
    const double value = r.value();
    if (at < 0 || at >= static_cast<int64_t>(names.size())) {
      bad = DCP_ERROR("a bound term numbered ", at, ", expected 0 to ", names.size() - 1);
      break;
    }
    terms.push_back({names[static_cast<size_t>(at)], value});
  }
  return terms;
}

void put(WireWriter& w, const oracle::PartCheck& p) {
  w.flag(p.rank.has_value());
  w.count(p.rank.value_or(-1));
  w.value(p.kappa);
  const oracle::Comparison& c = p.cmp;
  for (const int64_t n : {c.o_elements, c.o_violations, c.lse_elements, c.lse_violations,
                          c.o_suspects, c.lse_suspects})
    w.count(n);
  for (const Worst* x : {&c.o_worst, &c.lse_worst, &c.o_worst_stat, &c.lse_worst_stat}) put(w, *x);
  put(w, p.worst_terms.o, oracle::kOBoundTermNames);
  put(w, p.worst_terms.lse, oracle::kLseBoundTermNames);
}

oracle::PartCheck get_part(WireReader& r, oracle::Status& bad) {
  oracle::PartCheck p;
  const bool ranked = r.flag();
  const int64_t rank = r.count();
  if (ranked) p.rank = rank;
  p.kappa = r.value();
  oracle::Comparison& c = p.cmp;
  for (int64_t* n : {&c.o_elements, &c.o_violations, &c.lse_elements, &c.lse_violations,
                     &c.o_suspects, &c.lse_suspects})
    *n = r.count();
  for (Worst* x : {&c.o_worst, &c.lse_worst, &c.o_worst_stat, &c.lse_worst_stat}) *x = get_worst(r);
  p.worst_terms.o = get_terms(r, oracle::kOBoundTermNames, bad);
  p.worst_terms.lse = get_terms(r, oracle::kLseBoundTermNames, bad);
  return p;
}

}  // namespace

std::vector<uint8_t> encode_parts(std::span<const IndexedPart> parts) {
  WireWriter w;
  w.count(static_cast<int64_t>(parts.size()));
  for (const IndexedPart& p : parts) {
    w.count(p.index);
    put(w, p.part);
  }
  return std::move(w).bytes();
}

oracle::Expected<std::vector<IndexedPart>> decode_parts(std::span<const uint8_t> bytes) {
  WireReader r(bytes, "judged parts");
  oracle::Status bad;
  std::vector<IndexedPart> parts;
  const int64_t n = r.count();
  if (n < 0) return DCP_ERROR("judged parts: ", n, " parts");
  for (int64_t i = 0; i < n && bad.ok() && r.whole(); ++i) {
    IndexedPart p;
    p.index = r.count();
    p.part = get_part(r, bad);
    parts.push_back(std::move(p));
  }
  if (!bad) return DCP_ERROR("judged parts: ", bad.message());
  DCP_TRY(r.finish());
  return parts;
}

std::vector<uint8_t> encode_check(const props::DcpCheck& c) {
  WireWriter w;
  for (const bool b : {c.pass, c.pass_statistical, c.backend_error, c.oracle_error, c.unjudgeable,
                       c.judged_pass, c.judged_pass_statistical, c.interrupted})
    w.flag(b);
  w.value(c.max_ratio);
  w.value(c.max_stat_ratio);
  w.count(c.comparisons);
  w.text(c.report);
  return std::move(w).bytes();
}

oracle::Expected<props::DcpCheck> decode_check(std::span<const uint8_t> bytes) {
  WireReader r(bytes, "a rank's judgement");
  props::DcpCheck c;
  for (bool* b : {&c.pass, &c.pass_statistical, &c.backend_error, &c.oracle_error, &c.unjudgeable,
                  &c.judged_pass, &c.judged_pass_statistical, &c.interrupted})
    *b = r.flag();
  c.max_ratio = r.value();
  c.max_stat_ratio = r.value();
  c.comparisons = r.count();
  c.report = r.text();
  DCP_TRY(r.finish());
  return c;
}

}  // namespace dcp::harness
