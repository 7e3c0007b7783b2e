// kv_cache.hpp — one rank's slice of the KV cache, written by decode appends and prefill chunks.
//
// A rank stores only the tokens it owns (layout.hpp), at their rank-local rows, for the KV heads
// its DCP group reads. Writers pass whole chunks in global positions; the cache keeps the tokens
// it owns and skips the rest, so the same call runs unchanged on every rank. Values are rounded
// to the cache's storage format on write. For a shared latent (MLA) there is no V: V is the
// first v_dim components of K.
//
//   KvCacheSpec spec{lay, /*rank=*/1, /*physical_rows=*/64, /*kv_heads=*/1, /*kv_head0=*/0,
//                    /*head_dim=*/576, /*v_dim=*/512, /*shared_latent=*/true, Dtype::bf16};
//   Result<RankKvCache> cache = RankKvCache::create(spec);
//   DCP_GPU_TRY(cache->write_chunk(/*pos0=*/100, /*len=*/1, k_new, nullptr));  // decode append
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/dtype.hpp"
#include "gpu/layout.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

struct KvCacheSpec {
  DcpLayout layout;
  int64_t rank = 0;           // dcp rank in [0, N)
  int64_t physical_rows = 0;  // rows per rank; a multiple of I (logical capacity rows * N)
  int64_t kv_heads = 1;       // KV heads stored (rank-local count)
  int64_t kv_head0 = 0;       // global index of the first stored KV head
  int64_t head_dim = 0;       // Dk
  int64_t v_dim = 0;          // Dv (<= Dk for a shared latent)
  bool shared_latent = false;
  Dtype dtype = Dtype::f32;
};

// Checks a spec (layout, rank, rows a multiple of I, shapes); one-line errors. Every backend's
// cache is created through it.
GpuStatus validate_cache_spec(const KvCacheSpec& spec);

class RankKvCache {
 public:
  static Result<RankKvCache> create(const KvCacheSpec& spec);

  // Stores the tokens of the chunk [pos0, pos0 + len) that this rank owns. k [len, kv_heads, Dk]
  // and v [len, kv_heads, Dv] (nullptr for a shared latent) hold the chunk's rows in fp32.
  GpuStatus write_chunk(int64_t pos0, int64_t len, const float* k, const float* v);

  const KvCacheSpec& spec() const { return spec_; }
  // Rows written so far, counted from row 0 without gaps.
  int64_t contiguous_rows() const;
  // Whether a row holds a token; rows outside the cache never do.
  bool written(int64_t row) const {
    return row >= 0 && row < spec_.physical_rows && written_[static_cast<size_t>(row)];
  }
  // [physical_rows, kv_heads, Dk] and [physical_rows, kv_heads, Dv] (v: k for a shared latent).
  const float* k() const { return k_.data(); }
  const float* v() const { return spec_.shared_latent ? k_.data() : v_.data(); }
  int64_t v_row_stride() const { return spec_.kv_heads * v_head_stride(); }
  int64_t v_head_stride() const { return spec_.shared_latent ? spec_.head_dim : spec_.v_dim; }

 private:
  explicit RankKvCache(const KvCacheSpec& spec);
  KvCacheSpec spec_;
  std::vector<float> k_, v_;
  std::vector<bool> written_;
};

}  // namespace dcp::gpu
