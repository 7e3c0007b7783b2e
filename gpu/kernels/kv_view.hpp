// kv_view.hpp — one rank's slice of the KV cache: what it holds (KvCacheSpec) and how its
// elements are addressed (KvView), for every reader and writer on every device.
//
// A rank stores only the tokens it owns (layout.hpp), at their rank-local rows, for the KV heads
// its DCP group reads. Writers pass whole chunks in global positions; the write keeps the tokens
// the rank owns and skips the rest, so the same call runs unchanged on every rank. Values are
// rounded to the cache's storage format on write. For a shared latent (MLA) there is no V: V is
// the first v_dim components of K. The cache holds its storage format's elements (1 byte an fp8
// component, 2 a bf16 or f16 one, 4 an f32 one): a rank's cache costs what the engine's would.
// An fp8 cache (or any other) may carry dequantization scales, as engines keep k_scale and
// v_scale, of an explicit grain (ScaleGrain): by KV head, [kv_heads] (a per-tensor scale is the
// same for every head); by token, [pool rows, scale_heads], one per token (scale_heads 1) or
// per token and KV head, as LMDeploy and TensorRT-LLM keep quantized caches: the KV write stores
// each token's scale in its slot beside its elements; or by page, [pool pages, scale_heads], one
// per page of a paged pool (and KV head), as a cache quantized page by page keeps them: the KV
// write stores a token's scale in its page's entry, the same for every token of the page. The key
// the attention means is the stored value times k_scale_of(row, g). Readers fold the scales in as
// engines do (by head: the K scale into the logit scale and the V scale into the output; by token
// or page: the K scale into each key's logit scale and the V scale into each value: bodies.hpp);
// writers store the stored elements they are handed, or quantize values to round(x / scale).
//
// KvView is the only place that turns (rank-local row, KV head) into an element address; the
// kernel bodies (bodies.hpp) read and write the cache through it alone. A paged cache keeps its
// rows in a pool of pages of page_size rows, as engines' block pools do: the block table maps
// the row's page (row / page_size) to a page of the pool, so row r lives in pool row
// block_table[r / P] * P + r mod P (`slot`), and the pool may hold pages in any order, with free
// pages between them (a fragmented pool).
//
//   KvCacheSpec spec{.layout = lay, .rank = 1, .physical_rows = 64, .kv_heads = 1,
//                    .head_dim = 576, .v_dim = 512, .shared_latent = true};
//   KvView view = kv_view(spec, k.data(), v.data(), written.data());   // bytes of spec.dtype
//   float x = view.key(row, g, i);                // stored component i, widened to fp32
//   float k = x * view.k_scale_of(row, g);        // the key it stands for (scale 1 without one)
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/kernels/hd.hpp"
#include "gpu/kernels/layout.hpp"
#include "gpu/kernels/storage_format.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

// The grain of a cache's dequantization scales: by KV head (per tensor too), by token, or by page
// of a paged pool (the KV write stores the last two with each token).
enum class ScaleGrain { head, token, page };

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
  int64_t page_size = 0;   // > 0: rows in pages of this many, placed through a block table
  int64_t pool_pages = 0;  // pages in the pool (at least the ceil(physical_rows / page_size) used)
  ScaleGrain scale_grain = ScaleGrain::head;  // of the scales, when the cache has them
  int64_t scale_heads = 1;  // by token or page: 1 (one a token or page) or kv_heads (and head)
  // The rows of the pool: pool_pages * page_size when paged, else physical_rows.
  int64_t pool_rows() const { return page_size > 0 ? pool_pages * page_size : physical_rows; }
  // The pages the rows use: ceil(physical_rows / page_size), 0 when not paged.
  int64_t table_pages() const {
    return page_size > 0 ? (physical_rows + page_size - 1) / page_size : 0;
  }
};

// Checks a spec (layout, rank, rows a multiple of I, shapes); one-line errors naming the field.
// Every device's cache is created through it.
GpuStatus validate_cache_spec(const KvCacheSpec& spec);

// The dequantization scales of a cache, k and v (empty: none; v empty for a shared latent, whose
// V is scaled by k): by head [kv_heads] each, finite and > 0; by token [pool rows, scale_heads]
// or by page [pool pages, scale_heads] each, the values the KV write will store (0 until then).
struct KvScales {
  std::vector<float> k, v;
};
// The entries of each of a spec's scale arrays (KvView::scale_entries).
int64_t scale_entries(const KvCacheSpec& s);
GpuStatus validate_cache_scales(const KvCacheSpec& spec, const KvScales& scales);

// Checks a paged cache's block tables [requests, spec.table_pages()] (empty when the cache is not
// paged): each row a request's pool pages, then -1; the first shared_pages entries request 0's in
// every row (a shared prefix's pages); every other page in one place only among the first
// `retired` rows (requests that finished and freed their pages) and in one place only among the
// rest (a freed page may be held again by a live request, never a shared one).
GpuStatus validate_block_tables(const KvCacheSpec& spec, const std::vector<int32_t>& tables,
                                int64_t shared_pages = 0, int64_t retired = 0);

// Element addressing of one rank's cache in some device's memory: k [rows, kv_heads, head_dim],
// v [rows, kv_heads, v_head_stride] of which the first v_dim are V (v == k, v_head_stride ==
// head_dim for a shared latent), elements of `dtype` as storage_format.hpp holds them (2 bytes a
// bf16 component), written [pool rows] 1 where a token was stored; k_scale, v_scale the
// dequantization scales of scale_grain (scale_entries; nullptr: 1; v_scale == k_scale for a
// latent), by token indexed by pool row like k and v, by page by pool page;
// block_table [ceil(rows / page)] the pool page of each page of rows (nullptr: k and v hold the
// rows in order). k, v and `written` are indexed by pool row.
struct KvView {
  void* k = nullptr;
  void* v = nullptr;
  uint8_t* written = nullptr;
  float* k_scale = nullptr;  // written by the KV write when by token or page
  float* v_scale = nullptr;
  const int32_t* block_table = nullptr;
  int64_t rows = 0, kv_heads = 1, head_dim = 1, v_dim = 1, v_head_stride = 1, page = 1;
  int64_t pool_rows = 0;  // rows of the pool k and v index (pool pages * page when paged)
  StorageFormat dtype = StorageFormat::f32;
  ScaleGrain scale_grain = ScaleGrain::head;
  int64_t scale_heads = 1;  // by token or page: entries per slot or page (1, or kv_heads)
  // A shared latent (v == k): said apart, since a rank that owns no tokens may hold no arrays.
  bool shared_latent = false;

  // The pool row holding rank-local row `row`.
  DCP_HD int64_t slot(int64_t row) const {
    return block_table != nullptr ? block_table[row / page] * page + row % page : row;
  }

  // The pool page holding rank-local row `row` (a paged cache's).
  DCP_HD int64_t pool_page(int64_t row) const {
    return block_table != nullptr ? block_table[row / page] : row / page;
  }
  // The entry of rank-local row `row`, local KV head g in a scale array.
  DCP_HD int64_t scale_index(int64_t row, int64_t g) const {
    if (scale_grain == ScaleGrain::head) return g;
    const int64_t at = scale_grain == ScaleGrain::token ? slot(row) : pool_page(row);
    return at * scale_heads + (scale_heads == 1 ? 0 : g);
  }
  // The scales of that row's key and value at local KV head g.
  DCP_HD float k_scale_of(int64_t row, int64_t g) const {
    return k_scale != nullptr ? k_scale[scale_index(row, g)] : 1.0f;
  }
  DCP_HD float v_scale_of(int64_t row, int64_t g) const {
    return v_scale != nullptr ? v_scale[scale_index(row, g)] : 1.0f;
  }
  // The entries of each scale array: kv_heads by head, pool rows x scale_heads by token, pool
  // pages x scale_heads by page.
  DCP_HD int64_t scale_entries() const {
    return scale_grain == ScaleGrain::head    ? kv_heads
           : scale_grain == ScaleGrain::token ? pool_rows * scale_heads
                                              : pool_rows / page * scale_heads;
  }
  // Whether the KV write stores the scales with each token (by token or page).
  DCP_HD bool scales_written() const { return scale_grain != ScaleGrain::head; }
  // Whether the scales differ from row to row.
  DCP_HD bool scales_by_row() const {
    return scales_written() && (k_scale != nullptr || v_scale != nullptr);
  }

  // Component i of the stored key (i < head_dim) and value (i < v_dim) of rank-local row `row`,
  // local KV head g, as floats (exact; before the scale). The _as forms take the format at
  // compile time (F must be dtype): the attention body's inner loops use them.
  DCP_HD float key(int64_t row, int64_t g, int64_t i) const {
    return load_element(dtype, k, (slot(row) * kv_heads + g) * head_dim + i);
  }
  DCP_HD float value(int64_t row, int64_t g, int64_t i) const {
    return load_element(dtype, v, (slot(row) * kv_heads + g) * v_head_stride + i);
  }
  template <StorageFormat F>
  DCP_HD float key_as(int64_t row, int64_t g, int64_t i) const {
    return load_as<F>(k, (slot(row) * kv_heads + g) * head_dim + i);
  }
  template <StorageFormat F>
  DCP_HD float value_as(int64_t row, int64_t g, int64_t i) const {
    return load_as<F>(v, (slot(row) * kv_heads + g) * v_head_stride + i);
  }
  // Stores the stored value x (a writer's element of dtype already: exact), rounded to dtype.
  DCP_HD void set_stored_key(int64_t row, int64_t g, int64_t i, float x) const {
    store_element(dtype, k, (slot(row) * kv_heads + g) * head_dim + i, x);
  }
  DCP_HD void set_stored_value(int64_t row, int64_t g, int64_t i, float x) const {
    store_element(dtype, v, (slot(row) * kv_heads + g) * v_head_stride + i, x);
  }
};

// The view of a spec's cache over its three arrays (v ignored for a shared latent), its scales
// (scale_entries(s) each, nullptr: none; v_scale ignored for a shared latent, whose V is scaled
// by k_scale) and, paged, its block table.
inline KvView kv_view(const KvCacheSpec& s, void* k, void* v, uint8_t* written,
                      float* k_scale = nullptr, float* v_scale = nullptr,
                      const int32_t* block_table = nullptr) {
  KvView view;
  view.k = k;
  view.v = s.shared_latent ? k : v;
  view.written = written;
  view.k_scale = k_scale;
  view.v_scale = s.shared_latent ? k_scale : v_scale;
  view.block_table = s.page_size > 0 ? block_table : nullptr;
  view.page = s.page_size > 0 ? s.page_size : 1;
  view.rows = s.physical_rows;
  view.pool_rows = s.pool_rows();
  view.kv_heads = s.kv_heads;
  view.head_dim = s.head_dim;
  view.v_dim = s.v_dim;
  view.v_head_stride = s.shared_latent ? s.head_dim : s.v_dim;
  view.dtype = s.dtype;
  view.scale_grain = s.scale_grain;
  view.scale_heads = s.scale_heads;
  view.shared_latent = s.shared_latent;
  return view;
}

// Bytes of each of the cache's arrays: k, v (0 for a shared latent) over the pool, written.
struct KvCacheSizes {
  int64_t k = 0, v = 0, written = 0;
};
inline KvCacheSizes kv_cache_bytes(const KvCacheSpec& s) {
  const int64_t e = format_bytes(s.dtype), pool = s.pool_rows();
  return {pool * s.kv_heads * s.head_dim * e, s.shared_latent ? 0 : pool * s.kv_heads * s.v_dim * e,
          s.pool_rows()};
}

inline int64_t scale_entries(const KvCacheSpec& s) {
  return kv_view(s, nullptr, nullptr, nullptr).scale_entries();
}

}  // namespace dcp::gpu
