// parallel.hpp — a blocking parallel loop over [0, n) on the threads this process may run on.
//
//   parallel_for(rows, [&](int64_t r) { out[r] = work(r); });   // r is visited exactly once
// Rows are handed out dynamically (an atomic counter), so uneven rows balance across threads.
// `on_thread_exit` runs on each worker thread after its last row (to free thread-local caches).
#pragma once

#ifdef __linux__
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace dcp::oracle {

// The CPUs this process may run on: its affinity mask (what mpirun's binding, taskset or a
// cgroup's cpuset leave it), else the machine's hardware threads. Processes of an MPI job bound
// one to a core then each run one thread, not every one of the node's.
inline int64_t hardware_threads() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

struct NoThreadExit {
  void operator()() const {}
};

// An exception thrown by fn on any thread (std::bad_alloc) stops the loop and is rethrown on the
// calling thread once every worker has finished, never left to end the process from a worker.
// If no further thread can be started, the threads there are do all the rows.
template <class Fn, class OnExit = NoThreadExit>
void parallel_for(int64_t n, Fn&& fn, OnExit on_thread_exit = {}) {
  const int64_t threads = std::min<int64_t>(n, hardware_threads());
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::exception_ptr first_error;
  auto worker = [&] {
    try {
      for (int64_t i = next++; i < n; i = next++) fn(i);
    } catch (...) {
      next = n;  // the others stop at their next row
      std::lock_guard<std::mutex> lock(mu);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < threads; ++w) {
    try {
      pool.emplace_back([&] {
        worker();
        on_thread_exit();
      });
    } catch (const std::system_error&) {
      break;
    }
  }
  worker();
  for (auto& th : pool) th.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace dcp::oracle
