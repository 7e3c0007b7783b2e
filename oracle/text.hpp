// text.hpp — user text made safe for a one-line message.
//
// Error messages quote what the user gave (a file name, a tensor name, a flag's value, a JSON
// key); quoted raw, a newline in it would break the promise of exactly one line on stderr, and a
// megabyte-long value would drown the message. printable() escapes backslashes and control
// characters (\n, \t, \xNN) and shortens long text at a UTF-8 character boundary.
//
//   return DCP_ERROR("tensor ", printable(name), ": expected 3 dimensions");
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dcp::oracle {

// A quoted piece of text longer than this is cut, with its full length said; a whole message
// longer than kMaxLineChars too.
inline constexpr size_t kMaxShownChars = 200;
inline constexpr size_t kMaxLineChars = 2000;

std::string printable(std::string_view s);

// A whole message for one line of stderr: the same escapes, a longer cut. The last guard of the
// one-line promise, applied where a command prints its error.
std::string one_line(std::string_view message);

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at s[i], or 0 where none does
// (Unicode 15, table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i);
// Whether s is well-formed UTF-8 throughout.
bool is_utf8(std::string_view s);

// Text for a JSON or XML report, which hold UTF-8 only, while a Linux file name is any bytes:
// each byte that is not part of a well-formed UTF-8 sequence written as the text \xNN, the rest
// unchanged (nothing cut, no control character touched: the report's own encoder escapes those).
std::string utf8_escaped(std::string_view s);

// The accepted choices of a refusal or a help text, in order: "a", "a or b", "a, b or c".
inline std::string choices_text(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return out;
}

}  // namespace dcp::oracle
