// attention.hpp — the oracle's full attention over the case model, in extended precision.
//
// Every (token t, query head h) row is computed as a MergeState over its visible keys (and the
// sink), in the fast tier (double-double) or the certify tier (MPFR, 266 bits). Restricting the
// keys to a shard gives that shard's exact partial; merging shards' states reproduces the full
// row (properties/test_merge_properties.cpp).
//
//   Expected<Attention> ref = reference(c);            // o [T, Hq, Dv], lse [T, Hq] (c.lse_base)
//   auto shard0 = attend_rows<dd>(c, [](int64_t pos) { return pos % 2 == 0; },
//   /*with_sink=*/false);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "oracle/case.hpp"
#include "oracle/dd.hpp"
#include "oracle/merge.hpp"
#include "oracle/status.hpp"
#include "oracle/tensor.hpp"

namespace dcp::oracle {

enum class Tier { fast, certify };

struct Attention {
  Tensor<double> o;    // [T, Hq, Dv]; 0 for rows with nothing visible and no sink
  Tensor<double> lse;  // [T, Hq] in `base`; -inf for rows with nothing visible and no sink
  LseBase base = LseBase::e;
};

// Which global key positions a computation may attend to, on top of the case's own mask.
using KeyFilter = std::function<bool(int64_t pos)>;

// One row's state (natural-log base) over `keys` (global positions, already visible to query t),
// with the sink of head h when `with_sink`. Real is dd, certify_real or double.
template <class Real>
MergeState<Real> attend_row(const Case& c, int64_t t, int64_t h, std::span<const int64_t> keys,
                            bool with_sink);

// All rows, row-major over (t, h), restricted to keys passing `filter` (nullptr: all keys).
// The case must be valid.
template <class Real>
std::vector<MergeState<Real>> attend_rows(const Case& c, const KeyFilter& filter, bool with_sink);
// The fast tier's own: blocks of keys per (token, KV head), each key row read once for the query
// heads that share it, vectorized, on all threads, merged in key order (attention.cpp).
template <>
std::vector<MergeState<dd>> attend_rows<dd>(const Case& c, const KeyFilter& filter, bool with_sink);

// Output tensors from row states (converted to the case's LSE base, rounded to double).
template <class Real>
Attention to_attention(const Case& c, const std::vector<MergeState<Real>>& rows);

// How a long computation is watched: `progress(done, total)` counts (row, key) pairs finished,
// called after each block of keys and never concurrently; `stop()` is polled before each block,
// and once it returns true the computation ends early with an error saying how far it got.
// Either may be empty. (The fast tier honours both; the certify tier, for small cases, neither.)
struct Watch {
  std::function<void(int64_t done, int64_t total)> progress;
  std::function<bool()> stop;
};

// A Watch shared by the threads of a parallel_for: each unit of work asks `stop()` before it and
// reports `finished(n)` after it; the hooks are called one at a time, and once stop() has said
// true it says so to every thread without asking again.
class WatchGate {
 public:
  WatchGate(const Watch& w, int64_t total) : w_(w), total_(total) {}
  bool stop();
  void finished(int64_t n);
  bool stopped() const { return stopped_; }
  // "d of total <what>": how far an interrupted computation got, for its error.
  std::string so_far(const char* what) const;

 private:
  const Watch& w_;
  const int64_t total_;
  int64_t done_ = 0;
  std::mutex mu_;
  std::atomic<bool> stopped_{false};
};

// The fast tier's rows as attend_rows<dd>, watched.
Expected<std::vector<MergeState<dd>>> attend_rows_watched(const Case& c, const KeyFilter& filter,
                                                          bool with_sink, const Watch& watch);

// Validates the case and computes its full attention in the given tier; refuses a case whose
// attention is not finite (finite_attention).
Expected<Attention> reference(const Case& c, Tier tier = Tier::fast, const Watch& watch = {});

// A row's attention is a finite LSE and output, or -inf and 0 where it sees nothing; NaN or +inf
// means its logits overflowed double (scale times q.k beyond 1.8e308), and no kernel can be
// judged against that: an error naming the first such row.
Status finite_attention(const Case& c, const Attention& a);

}  // namespace dcp::oracle
