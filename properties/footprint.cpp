#include "properties/footprint.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "gpu/kernels/storage_format.hpp"
#include "oracle/parallel.hpp"
#include "properties/dcp_bridge.hpp"

namespace dcp::props {
namespace {

// Bytes of the element types the code holds: the oracle keeps values and positions as 8-byte
// doubles and int64s, a double-double as 16 bytes; the production path computes in fp32 (its KV
// caches hold their storage format: gpu::format_bytes).
constexpr double kF64 = 8.0, kDd = 16.0, kF32 = 4.0, kI64 = 8.0, kI32 = 4.0;
// A certify-tier number (MPFR at 266 bits through Boost.Multiprecision): the 32-byte mpfr_t, its
// 5 limbs of 8 bytes on the heap and the allocator's 16-byte header make 88; rounded up.
constexpr double kCertifyReal = 128.0;
// A std::vector filled by push_back holds up to twice its size.
constexpr double kGrowth = 2.0;
// What the process holds before any case exists (code, libraries, thread stacks touched) and a
// margin for the allocator's own fragmentation across threads: both measured on this project's
// runs (tests/footprint/test_footprint.cpp), rounded up.
constexpr double kBaseBytes = 64.0 * (1 << 20);
constexpr double kAllocatorSlack = 1.25;
// Per oracle row (t, h): a merge state of Dv double-doubles plus its max and sum, and the vector's
// own bookkeeping.
constexpr double kRowStateBytes = 64.0;
// The oracle's per-row work vectors over a row's visible keys: the attention pass keeps one of
// double-doubles; the bound keeps 18 of 8 bytes (oracle/tolerance.cpp: RowLogits' seven, the
// scaled products before and after the softcap, |q|.|k|, the dot's node sums and squares, a
// variant's bias and its charge; KeyErrors' seven weights, error bounds and statistical parts, and
// its groups; the grouping's three scratch vectors).
constexpr double kBoundVectors = 18.0;
// Step buffers a rank holds at once, in units of its partial [T, Hg, Dv + 1] in fp32: the
// partial, the packed or scaled copy, the received blocks, the merged slice and the copy kept
// for inspection.
constexpr double kStepCopies = 5.0;
// Attention passes over every visible (query head, key) pair: the oracle's reference and its
// bound on the full case, the same over the N shards together, and the backend's step.
constexpr double kAttentionPasses = 5.0;

double d(int64_t x) { return static_cast<double>(x); }

// The terms of one phase, in a fixed array: suite_case_footprint evaluates hundreds of thousands
// of setups, and a figure must cost no allocation.
struct Terms {
  static constexpr int kMax = 8;
  std::array<std::pair<double, const char*>, kMax> list{};
  int n = 0;
  void add(double bytes, const char* what) { list[static_cast<size_t>(n++)] = {bytes, what}; }
  double sum() const {
    double s = 0;
    for (int i = 0; i < n; ++i) s += list[static_cast<size_t>(i)].first;
    return s;
  }
};

// The largest term of the phases that make the peak, for messages.
const char* largest(std::initializer_list<const Terms*> phases) {
  double best = -1;
  const char* what = "";
  for (const Terms* t : phases)
    for (int i = 0; i < t->n; ++i)
      if (t->list[static_cast<size_t>(i)].first > best)
        best = t->list[static_cast<size_t>(i)].first, what = t->list[static_cast<size_t>(i)].second;
  return what;
}

double ceil_div(double a, double b) { return std::ceil(a / b); }

// Rows a rank's cache holds (rank_cache_spec, page_counts): a contiguous cache the longest
// request's rows, whole cycles of I; a paged pool its used pages and one free page for every two,
// where a batch's request uses its keys in whole virtual pages of P N slots and the pages of the
// shared prefix's whole virtual pages once.
double cache_rows(const DcpSetup& s) {
  const double N = d(std::max<int64_t>(1, s.cfg.layout.ranks));
  const double I = d(std::max<int64_t>(1, s.cfg.layout.interleave));
  const double P = d(s.cfg.page_size);
  double longest = d(s.spec.seq);
  for (const int64_t x : s.batch) longest = std::max(longest, d(x));
  const double rows = ceil_div(longest, I * N) * I;
  if (P <= 0) return rows;
  double used = ceil_div(rows, P);
  if (!s.batch.empty()) {
    const double shared = std::floor(d(s.shared_prefix) / (P * N));
    used = shared;
    for (const int64_t x : s.batch) used += ceil_div(d(x), P * N) - shared;
  }
  return (used + ceil_div(used, 2.0)) * P;
}

// q, K, V, the top-k lists, the positions and the sinks of a case, in elements.
double case_elements(double T, double Hq, double Hkv, double Dk, double Dv, double S, double K,
                     bool latent) {
  return T * Hq * Dk + S * Hkv * (Dk + (latent ? 0.0 : Dv)) + T * K + T + Hq;
}

// The oracle judging one part of a case (a reference and its bound, or a shard's), while the
// case stays in memory; `real` is the bytes of one number of the tier (kDd or kCertifyReal).
Terms judge_terms(double T, double Hq, double Dv, double S, double case_bytes, double real) {
  const double threads = static_cast<double>(oracle::hardware_threads());
  Terms t;
  // shard_case copies the whole case and adds its own top-k list [T, keys of the shard].
  t.add(case_bytes + T * S * kI64, "the oracle's copy of the case for a rank's shard");
  // Visible-key lists of every query: the shard's owned lists, the reference's, the bound's.
  t.add(3.0 * kGrowth * T * S * kI64, "the oracle's lists of visible keys (T x S positions)");
  t.add(T * Hq * (Dv * real + kRowStateBytes), "the oracle's merge states (T x Hq x Dv)");
  // The reference, the bound, the slices compared and the result in doubles: T Hq (Dv + 1) each.
  t.add(8.0 * T * Hq * (Dv + 1.0) * kF64, "the oracle's outputs and bounds (T x Hq x Dv)");
  t.add(threads * S * (real + kBoundVectors * kF64), "the oracle's per-thread key vectors");
  return t;
}

Footprint finish(double bytes, double work, const char* what) {
  return {kBaseBytes + kAllocatorSlack * bytes, work, what};
}

}  // namespace

Footprint dcp_check_footprint(const DcpSetup& s, KvHolding holding) {
  // A batch holds every request at once: counted as one request with all of their keys and
  // queries (each request's case, the concatenated inputs; its oracle lists and work count every
  // query against every key, more than the batch's), the batch's pool (cache_rows), and its
  // largest KV write, the longest request's (write_chunks: each request writes its own keys).
  const CaseSpec& c = s.spec;
  const bool batch = !s.batch.empty();
  double keys = d(c.seq), max_chunk = keys;
  if (batch) {
    keys = 0.0;
    for (const int64_t x : s.batch) keys += d(x);
  } else if (!s.chunks.empty()) {
    max_chunk = d(*std::max_element(s.chunks.begin(), s.chunks.end()));
  }
  const double requests = batch ? d(static_cast<int64_t>(s.batch.size())) : 1.0;
  const double T = d(c.tokens) * requests, Hq = d(c.q_heads), Hkv = d(c.kv_heads),
               Dk = d(c.head_dim), Dv = d(c.v_dim), S = keys, K = d(c.topk);
  const double kv_width = Dk + (c.shared_latent ? 0.0 : Dv);  // stored values per key and head
  const double elements = case_elements(T, Hq, Hkv, Dk, Dv, S, K, c.shared_latent);
  const double kv = S * Hkv * kv_width, other = elements - kv;
  // K and V as make_case holds them, and whether the production path borrows those bytes
  // (dcp_bridge's kv_source) or encodes its own copy in the caches' format.
  const bool rewritten = c.values == ValueStyle::ties || c.values == ValueStyle::extreme ||
                         c.kv_scale != KvScale::none;
  const gpu::StorageFormat cache_format = to_storage_format(c.kv_dtype);
  const double cache_bytes = d(gpu::format_bytes(cache_format));
  const bool stored = holding == KvHolding::stored;
  const bool borrowed =
      stored && c.kv_scale == KvScale::none && to_oracle_dtype(cache_format) == c.kv_dtype;
  Terms keep;  // alive from start to end
  keep.add(other * kF64, "the oracle's copy of q, positions and top-k lists (doubles)");
  if (stored) {
    keep.add(kv * d(oracle::dtype_bytes(c.kv_dtype)), "the case's K and V (stored format)");
    // Values the generator rewrites are drawn as doubles and stored at the end.
    if (rewritten) keep.add(kv * kF64, "the generator's K and V (doubles)");
  } else {
    keep.add(kv * kF64, "the oracle's copy of K and V (doubles)");
  }
  keep.add(T * Hq * Dk * kF32 +
               (d(static_cast<int64_t>(s.chunks.size() + s.batch.size())) + T * K + T) * kI64 +
               Hq * kF32,
           "the production path's queries, chunk list, top-k lists, positions and sinks");
  if (!borrowed) keep.add(kv * cache_bytes, "the production path's copy of K and V");
  // The oracle's shard cases copy K and V held as doubles; stored bytes are shared.
  const double case_bytes = (other + (stored ? 0.0 : kv)) * kF64;

  // The geometry with plain arithmetic (create() may refuse it, but the figure comes first).
  const double N = d(std::max<int64_t>(1, s.cfg.layout.ranks));
  const double tp = std::max(N, d(s.cfg.tp_size));
  const double hg = std::max(1.0, N * Hq / tp);  // heads a rank attends with
  // KV heads a rank stores: its hg heads span at most ceil(hg / (Hq / Hkv)) + 1 of them.
  const double kvh = std::min(Hkv, std::ceil(hg * Hkv / Hq) + 1.0);
  const double rows = cache_rows(s);
  const double P = d(s.cfg.page_size), pages = P > 0 ? rows / P : 0.0;
  const double partial = T * hg * (Dv + 1.0) * kF32;
  Terms step;  // every TP rank's thread at once
  step.add(tp * (rows * kvh * kv_width * cache_bytes + pages * kI32),
           "the KV caches of every rank (rows, or a paged pool's, x KV heads; block tables)");
  step.add(tp * max_chunk * kvh * kv_width * cache_bytes,
           "each rank's copy of the largest KV write");
  step.add(tp * (kStepCopies * partial + T * hg * Dk * kF32 + N * T * hg * kF32),
           "every rank's queries, partials and collective buffers");
  step.add(tp * (d(s.cfg.tile) + d(s.cfg.splits) * (Dv + 3.0)) * kF32,
           "every rank's tile and split-KV scratch (--tile, --splits)");
  const double group_run = T * Hq * (Dv + 1.0) * kF32 + tp * partial;
  step.add(group_run, "the assembled output and partials");

  Terms judge = judge_terms(T, Hq, Dv, S, case_bytes, kDd);
  judge.add(group_run + T * Hq * (Dv + 1.0) * kF64, "the assembled output and partials");

  const bool step_peak = step.sum() > judge.sum();
  const double bytes = keep.sum() + std::max(step.sum(), judge.sum());
  // Each request's queries against its own keys.
  const double work = kAttentionPasses * d(c.tokens) * Hq * S * (Dk + Dv) +
                      d(c.tokens) * S * (N + 4.0) + tp * S * kvh * kv_width;
  return finish(bytes, work, largest({&keep, step_peak ? &step : &judge}));
}

Footprint judge_footprint(const oracle::Case& c, int64_t parts, oracle::Tier tier) {
  const double T = d(c.tokens()), Hq = d(c.q_heads()), S = d(c.seq()), Dv = d(c.v_dim);
  const double Dk = d(c.head_dim());
  const double K = c.has_topk() ? d(c.topk.dim(1)) : 0.0;
  // K and V as held: 8 bytes an element as doubles, the file's width read in place (and then
  // shared, not copied, by the shard's case).
  const double kv_held = d(c.k.bytes_held() + (c.shared_latent() ? 0 : c.v.bytes_held()));
  const double kv_copied = c.k.is_stored() ? 0.0 : kv_held;
  const double rest = (case_elements(T, Hq, d(c.kv_heads()), Dk, Dv, S, K, c.shared_latent()) -
                       d(c.k.numel() + (c.shared_latent() ? 0 : c.v.numel()))) *
                      kF64;
  Terms judge = judge_terms(T, Hq, Dv, S, rest + kv_copied,
                            tier == oracle::Tier::certify ? kCertifyReal : kDd);
  // A case read in place holds its file's K and V bytes (the mapping, counted by file_footprint).
  if (!c.k.is_stored()) judge.add(kv_held, "the case's K and V (doubles)");
  // The reference and its bound on the full case, and as much again over the shards together.
  const double passes = parts > 1 ? 4.0 : 2.0;
  const double work = passes * T * Hq * S * (Dk + Dv) + d(parts) * T * S;
  return finish(judge.sum() + rest, work, largest({&judge}));
}

Footprint file_footprint(double file_bytes, FileRead read) {
  if (read == FileRead::case_in_place) {
    // The file mapped and, as the oracle reads K and V, paged in: its bytes once. Its other
    // tensors (q, positions, sinks, top-k lists) are decoded to doubles, counted by
    // judge_footprint with the case.
    return finish(file_bytes, file_bytes, "the case file, mapped (K and V read in place)");
  }
  // Mapped while decoded: every tensor element takes at least 2 bytes in the file (F16/BF16) and
  // 8 as a double, so the decoded tensors take at most 4x the file, and the case or result built
  // from them as much again while the tensors still exist.
  const double bytes = file_bytes + 2.0 * 4.0 * file_bytes;
  return finish(bytes, file_bytes, "the file's tensors decoded to doubles");
}

}  // namespace dcp::props
