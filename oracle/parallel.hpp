// parallel.hpp — a blocking parallel loop over [0, n) on all hardware threads.
//
//   parallel_for(rows, [&](int64_t r) { out[r] = work(r); });   // r is visited exactly once
// Rows are handed out dynamically (an atomic counter), so uneven rows balance across threads.
// `on_thread_exit` runs on each worker thread after its last row (to free thread-local caches).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace dcp::oracle {

struct NoThreadExit {
  void operator()() const {}
};

template <class Fn, class OnExit = NoThreadExit>
void parallel_for(int64_t n, Fn&& fn, OnExit on_thread_exit = {}) {
  const int64_t threads = std::min<int64_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < threads; ++w) {
    pool.emplace_back([&] {
      worker();
      on_thread_exit();
    });
  }
  worker();
  for (auto& th : pool) th.join();
}

}  // namespace dcp::oracle
