#include "harness/report.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ostream>
#include <utility>

#include "oracle/text.hpp"

namespace dcp::harness {

Table::Table(size_t lead, std::vector<Column> columns)
    : lead_(lead), columns_(std::move(columns)) {}

void Table::fit(size_t column, std::string_view cell) {
  size_t& w = columns_.at(column).width;
  w = std::max(w, cell.size());
}

void Table::print_header(std::ostream& out) const {
  std::vector<std::string> titles;
  for (const Column& c : columns_) titles.push_back(c.title);
  print_line(out, "#" + std::string(lead_ > 0 ? lead_ - 1 : 0, ' '), titles);
}

void Table::print_row(std::ostream& out, const std::vector<std::string>& cells) const {
  print_line(out, std::string(lead_, ' '), cells);
}

void Table::print_line(std::ostream& out, std::string_view lead,
                       const std::vector<std::string>& cells) const {
  std::string line(lead);
  for (size_t i = 0; i < columns_.size(); ++i) {
    const Column& c = columns_[i];
    const std::string& text = i < cells.size() ? cells[i] : std::string();
    const std::string pad(c.width > text.size() ? c.width - text.size() : 0, ' ');
    line += std::string(c.gap, ' ');
    line += c.align == Align::left ? text + pad : pad + text;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out << line << "\n";
}

std::string exact_text(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

nlohmann::json json_number(double x) {
  if (std::isfinite(x)) return x;
  if (std::isnan(x)) return "nan";
  return x > 0 ? "inf" : "-inf";
}

nlohmann::json utf8_json(const nlohmann::json& j) {
  if (j.is_string()) return oracle::utf8_escaped(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : j) out.push_back(utf8_json(x));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, x] : j.items()) out[oracle::utf8_escaped(key)] = utf8_json(x);
    return out;
  }
  return j;
}

}  // namespace dcp::harness
