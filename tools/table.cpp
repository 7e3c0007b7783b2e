#include "tools/table.hpp"

#include <algorithm>
#include <ostream>
#include <utility>

namespace dcp::tools {

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

}  // namespace dcp::tools
