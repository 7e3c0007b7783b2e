// report.hpp — how reports are written, by the commands and the Python package alike: tables
// whose one list of columns owns every title, width and alignment (so a header and its rows
// cannot drift apart), and numbers as a cell, as exact text and as JSON.
//
//   Table t(3, {{"row", 3, Align::left, 0}, {"S", 5}, {"verdict", 0, Align::left, 2}});
//   t.fit(1, "1048576");                  // widen a column to hold a cell
//   t.print_header(out);                  // "#  row     S  verdict"
//   t.print_row(out, {"0", "1024", "OK"}); // "   0    1024  OK"
#pragma once

#include <cmath>
#include <cstdio>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dcp::harness {

enum class Align { left, right };

struct Column {
  std::string title;
  size_t width = 0;  // a cell is padded to it; a longer cell pushes the next column right
  Align align = Align::right;
  size_t gap = 1;  // spaces before the column
};

class Table {
 public:
  // lead: the characters before the first column; the header's first of them is '#'.
  Table(size_t lead, std::vector<Column> columns);
  void fit(size_t column, std::string_view cell);
  void print_header(std::ostream& out) const;
  // One cell per column, in order.
  void print_row(std::ostream& out, const std::vector<std::string>& cells) const;

 private:
  void print_line(std::ostream& out, std::string_view lead,
                  const std::vector<std::string>& cells) const;
  size_t lead_;
  std::vector<Column> columns_;
};

// A number as printf would write it, for a cell ("%.3e"). A NaN prints as "nan" whatever its
// sign bit, which depends on the instruction that produced it, so the same run reads the same.
template <class T>
std::string cell(const char* format, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x)) x = std::fabs(x);
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// A double as typed on a command line, exactly (shortest text that reads back as the same value),
// for reproduce lines and claims.
std::string exact_text(double x);

// A double for a JSON report. JSON has no inf or NaN: they are written as the strings "inf",
// "-inf" and "nan", so that an infinite err/bound stays distinct from null (not applicable).
nlohmann::json json_number(double x);

// The report with every string and key valid UTF-8 (oracle::utf8_escaped: a file name's other bytes
// as the text \xNN), which a JSON or XML report must hold.
nlohmann::json utf8_json(const nlohmann::json& report);

}  // namespace dcp::harness
