// kv_view.hpp — one rank's slice of the KV cache: what it holds (KvCacheSpec) and how its
// elements are addressed (KvView), for every reader and writer on every device.
//
// A rank stores only the tokens it owns (layout.hpp), at their rank-local rows, for the KV heads
// its DCP group reads. Writers pass whole chunks in global positions; the write keeps the tokens
// the rank owns and skips the rest, so the same call runs unchanged on every rank. Values are
// rounded to the cache's storage format on write. For a shared latent (MLA) there is no V: V is
// the first v_dim components of K.
//
// KvView is the only place that turns (rank-local row, KV head) into an element address; the
// kernel bodies (bodies.hpp) read and write the cache through it alone, so another cache
// organization (pages, block tables) changes this type and nothing that calls it.
//
//   KvCacheSpec spec{.layout = lay, .rank = 1, .physical_rows = 64, .kv_heads = 1,
//                    .head_dim = 576, .v_dim = 512, .shared_latent = true};
//   KvView view = kv_view(spec, k.data(), v.data(), written.data());
//   const float* key = view.key(row, g);          // head_dim floats
#pragma once

#include <cstdint>

#include "gpu/kernels/hd.hpp"
#include "gpu/kernels/layout.hpp"
#include "gpu/kernels/storage_format.hpp"
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
  StorageFormat dtype = StorageFormat::f32;
};

// Checks a spec (layout, rank, rows a multiple of I, shapes); one-line errors naming the field.
// Every device's cache is created through it.
GpuStatus validate_cache_spec(const KvCacheSpec& spec);

// Element addressing of one rank's cache in some device's memory: k [rows, kv_heads, head_dim],
// v [rows, kv_heads, v_head_stride] of which the first v_dim are V (v == k, v_head_stride ==
// head_dim for a shared latent), written [rows] 1 where a token was stored.
struct KvView {
  float* k = nullptr;
  float* v = nullptr;
  uint8_t* written = nullptr;
  int64_t rows = 0, kv_heads = 1, head_dim = 1, v_dim = 1, v_head_stride = 1;

  // The key (head_dim floats) and value (v_dim floats) of rank-local row `row`, local KV head g.
  DCP_HD float* key(int64_t row, int64_t g) const { return k + (row * kv_heads + g) * head_dim; }
  DCP_HD float* value(int64_t row, int64_t g) const {
    return v + (row * kv_heads + g) * v_head_stride;
  }
};

// The view of a spec's cache over its three arrays (v ignored for a shared latent).
inline KvView kv_view(const KvCacheSpec& s, float* k, float* v, uint8_t* written) {
  KvView view;
  view.k = k;
  view.v = s.shared_latent ? k : v;
  view.written = written;
  view.rows = s.physical_rows;
  view.kv_heads = s.kv_heads;
  view.head_dim = s.head_dim;
  view.v_dim = s.v_dim;
  view.v_head_stride = s.shared_latent ? s.head_dim : s.v_dim;
  return view;
}

// Elements of each of the cache's arrays: k, v (0 for a shared latent), written.
struct KvCacheSizes {
  int64_t k = 0, v = 0, written = 0;
};
inline KvCacheSizes kv_cache_sizes(const KvCacheSpec& s) {
  return {s.physical_rows * s.kv_heads * s.head_dim,
          s.shared_latent ? 0 : s.physical_rows * s.kv_heads * s.v_dim, s.physical_rows};
}

}  // namespace dcp::gpu
