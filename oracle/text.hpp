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

namespace dcp::oracle {

// A quoted piece of text longer than this is cut, with its full length said; a whole message
// longer than kMaxLineChars too.
inline constexpr size_t kMaxShownChars = 200;
inline constexpr size_t kMaxLineChars = 2000;

std::string printable(std::string_view s);

// A whole message for one line of stderr: the same escapes, a longer cut. The last guard of the
// one-line promise, applied where a command prints its error.
std::string one_line(std::string_view message);

}  // namespace dcp::oracle
