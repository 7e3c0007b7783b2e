// status.hpp — errors as values for the production path (gpu/).
//
// gpu/ shares no code with oracle/, so it carries its own error type. A GpuStatus is ok or holds
// a one-line message and the file:line that raised it; Result<T> holds a T or a failed status.
// Nothing in gpu/ throws for bad input or calls exit().
//
//   Result<HostKvCache> cache = build_rank_cache(in, cfg, tp_rank);
//   if (!cache) return cache.status();
//   DCP_GPU_TRY(write_device_chunk(dev, *cache, chunk));
//   DCP_GPU_ASSIGN(spec, rank_cache_spec(in, cfg, tp_rank));   // spec: the value, or return
//   return DCP_GPU_ERROR("dcp_size ", n, " must divide tp_size ", tp);
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace dcp::gpu {

class GpuStatus {
 public:
  GpuStatus() = default;  // ok
  GpuStatus(std::string message, const char* file, int line)
      : ok_(false), message_(std::move(message)), file_(file), line_(line) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& message() const { return message_; }
  std::string where() const { return std::string(file_) + ":" + std::to_string(line_); }

 private:
  bool ok_ = true;
  std::string message_;
  const char* file_ = "";
  int line_ = 0;
};

template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(GpuStatus status) : v_(std::move(status)) {}  // NOLINT: a failed status
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  GpuStatus status() const { return ok() ? GpuStatus() : std::get<1>(v_); }

 private:
  std::variant<T, GpuStatus> v_;
};

template <class... Args>
std::string gpu_message(const Args&... args) {
  std::ostringstream os;
  os.precision(9);
  (os << ... << args);
  return os.str();
}

}  // namespace dcp::gpu

#define DCP_GPU_ERROR(...) \
  ::dcp::gpu::GpuStatus(::dcp::gpu::gpu_message(__VA_ARGS__), __FILE__, __LINE__)

#define DCP_GPU_TRY(expr)                       \
  do {                                          \
    ::dcp::gpu::GpuStatus dcp_gpu_st_ = (expr); \
    if (!dcp_gpu_st_.ok()) return dcp_gpu_st_;  \
  } while (0)

// Declares `var` from a Result's value, or returns its failure from the enclosing function.
#define DCP_GPU_ASSIGN(var, expr)        \
  auto var##_r = (expr);                 \
  if (!var##_r) return var##_r.status(); \
  auto var = std::move(*var##_r)
