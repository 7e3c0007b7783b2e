// status.hpp — errors as values for the oracle and the tools that read cases.
//
// A Status is either ok or carries a one-line message plus the file and line that produced it.
// Expected<T> holds a T or a failed Status. Library code never throws for bad input and never
// calls exit(); it returns these, and tools/ turns them into exit codes.
//
//   Expected<Case> c = load_case(path);
//   if (!c) { std::cerr << c.status().message() << "\n"; return 2; }
//   DCP_TRY(validate(*c));                       // propagate a failed Status
//   return DCP_ERROR("tensor 'k': expected ", 3, " dimensions");
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace dcp::oracle {

class Status {
 public:
  Status() = default;  // ok
  static Status error(std::string message, const char* file, int line) {
    Status s;
    s.ok_ = false;
    s.message_ = std::move(message);
    s.file_ = file;
    s.line_ = line;
    return s;
  }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  // The user-facing one-line message (what is wrong and what was expected).
  const std::string& message() const { return message_; }
  // Where it was raised, for developers: "oracle/case.cpp:42".
  std::string where() const { return std::string(file_) + ":" + std::to_string(line_); }
  // A refusal to judge, not of the input: the claimed arithmetic is too coarse for any useful
  // bound on this case (derive_bound's kappa > 0.1), whatever the result. A suite may draw
  // another case rather than fail this one.
  bool unjudgeable() const { return unjudgeable_; }
  Status& mark_unjudgeable() {
    unjudgeable_ = true;
    return *this;
  }

 private:
  bool ok_ = true;
  bool unjudgeable_ = false;
  std::string message_;
  const char* file_ = "";
  int line_ = 0;
};

template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {}  // NOLINT: must be a failed Status
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& operator*() { return std::get<T>(v_); }
  const T& operator*() const { return std::get<T>(v_); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  os.precision(17);
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace dcp::oracle

// A failed Status whose message is the concatenation of the arguments.
#define DCP_ERROR(...) \
  ::dcp::oracle::Status::error(::dcp::oracle::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

// Evaluates a Status expression and returns it from the enclosing function if it failed.
#define DCP_TRY(expr)                                  \
  do {                                                 \
    ::dcp::oracle::Status dcp_try_status_ = (expr);    \
    if (!dcp_try_status_.ok()) return dcp_try_status_; \
  } while (0)
