#include "oracle/text.hpp"

#include <string>

namespace dcp::oracle {

namespace {

std::string escaped(std::string_view s, size_t most) {
  size_t n = s.size();
  bool cut = false;
  if (n > most) {
    n = most;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
    cut = true;
  }
  std::string out;
  out.reserve(n + 8);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace

std::string printable(std::string_view s) { return escaped(s, kMaxShownChars); }

std::string one_line(std::string_view message) { return escaped(message, kMaxLineChars); }

}  // namespace dcp::oracle
