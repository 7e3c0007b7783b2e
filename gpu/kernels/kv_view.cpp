#include "gpu/kernels/kv_view.hpp"

#include <climits>
#include <cmath>
#include <cstdint>

namespace dcp::gpu {

GpuStatus validate_cache_spec(const KvCacheSpec& s) {
  DCP_GPU_TRY(validate_layout(s.layout));
  if (s.rank < 0 || s.rank >= s.layout.ranks)
    return DCP_GPU_ERROR("kv cache: rank ", s.rank, " outside [0, ", s.layout.ranks, ")");
  if (s.physical_rows < 0 || s.physical_rows % s.layout.interleave != 0)
    return DCP_GPU_ERROR("kv cache: physical_rows ", s.physical_rows,
                         " must be a non-negative multiple of the interleave ",
                         s.layout.interleave);
  if (s.kv_heads < 1 || s.head_dim < 1 || s.v_dim < 1)
    return DCP_GPU_ERROR("kv cache: kv_heads, head_dim and v_dim must be >= 1 (got ", s.kv_heads,
                         ", ", s.head_dim, ", ", s.v_dim, ")");
  if (s.shared_latent && s.v_dim > s.head_dim)
    return DCP_GPU_ERROR("kv cache: shared latent v_dim ", s.v_dim, " exceeds head_dim ",
                         s.head_dim);
  if (s.page_size < 0)
    return DCP_GPU_ERROR("kv cache: page_size ", s.page_size, "; expected >= 0 (0: not paged)");
  if (s.page_size > 0 && s.pool_pages < s.table_pages())
    return DCP_GPU_ERROR("kv cache: pool_pages ", s.pool_pages, " cannot hold ", s.physical_rows,
                         " rows in pages of ", s.page_size, " (", s.table_pages(), " pages)");
  if (s.scale_grain == ScaleGrain::page && s.page_size <= 0)
    return DCP_GPU_ERROR("kv cache: scales by page in a cache that is not paged (page_size 0)");
  if (s.page_size > 0 && s.pool_pages > INT32_MAX)
    return DCP_GPU_ERROR("kv cache: pool_pages ", s.pool_pages, " exceeds the block table's int32");
  return {};
}

GpuStatus validate_block_tables(const KvCacheSpec& spec, const std::vector<int32_t>& tables,
                                int64_t shared_pages, int64_t retired) {
  const int64_t stride = spec.table_pages();
  if (spec.page_size <= 0 || stride == 0) {
    if (!tables.empty())
      return DCP_GPU_ERROR("kv cache: ", tables.size(), " block table entries for a cache that ",
                           spec.page_size <= 0 ? "is not paged" : "holds no rows");
    return {};
  }
  if (tables.empty() || tables.size() % static_cast<size_t>(stride) != 0)
    return DCP_GPU_ERROR("kv cache: block tables hold ", tables.size(),
                         " entries; expected a multiple of ", stride, " (ceil(", spec.physical_rows,
                         " rows / page_size ", spec.page_size, ")) per request");
  if (shared_pages < 0 || shared_pages > stride)
    return DCP_GPU_ERROR("kv cache: ", shared_pages, " shared pages outside [0, ", stride, "]");
  if (retired < 0 || (retired > 0 && retired >= static_cast<int64_t>(tables.size()) / stride))
    return DCP_GPU_ERROR("kv cache: ", retired, " retired requests; expected fewer than the ",
                         static_cast<int64_t>(tables.size()) / stride, " tables");
  // Who holds each page: kRetired, kLive (a retired request's page freed and reused by a live
  // one holds both), or both as a shared page.
  constexpr char kRetired = 1, kLive = 2;
  std::vector<char> used(static_cast<size_t>(spec.pool_pages), 0);
  for (size_t i = 0; i < tables.size(); ++i) {
    const int64_t b = static_cast<int64_t>(i) / stride, j = static_cast<int64_t>(i) % stride;
    const int64_t p = tables[i];
    if (p == -1) {
      if (j + 1 < stride && tables[i + 1] != -1)
        return DCP_GPU_ERROR("kv cache: block table [", b, ", ", j,
                             "] = -1 before a page; a request's pages come first");
      continue;
    }
    if (p < 0 || p >= spec.pool_pages)
      return DCP_GPU_ERROR("kv cache: block table [", b, ", ", j, "] = ", p,
                           "; expected a page in [0, ", spec.pool_pages, ") or -1");
    if (j < shared_pages) {
      if (b > 0 && p != tables[static_cast<size_t>(j)])
        return DCP_GPU_ERROR("kv cache: block table [", b, ", ", j, "] = ", p,
                             "; a shared page must be request 0's, ",
                             tables[static_cast<size_t>(j)]);
      if (b > 0) continue;
    }
    const char holder = j < shared_pages ? kRetired | kLive : b < retired ? kRetired : kLive;
    if (used[static_cast<size_t>(p)] & holder)
      return DCP_GPU_ERROR("kv cache: block table [", b, ", ", j, "] = ", p,
                           ", a page already holding other rows");
    used[static_cast<size_t>(p)] |= holder;
  }
  return {};
}

GpuStatus validate_cache_scales(const KvCacheSpec& spec, const KvScales& scales) {
  const bool by_token = spec.scale_grain != ScaleGrain::head;  // by token or page
  if (by_token && spec.scale_heads != 1 && spec.scale_heads != spec.kv_heads)
    return DCP_GPU_ERROR("kv cache: scale_heads ", spec.scale_heads, "; expected 1 or kv_heads ",
                         spec.kv_heads);
  const auto check = [&](const std::vector<float>& s, const char* name) -> GpuStatus {
    if (!s.empty() && s.size() != static_cast<size_t>(scale_entries(spec)))
      return DCP_GPU_ERROR("kv cache: ", name, " holds ", s.size(), " scales; expected none or ",
                           scale_entries(spec),
                           spec.scale_grain == ScaleGrain::head    ? " (one per stored KV head)"
                           : spec.scale_grain == ScaleGrain::token ? " (pool rows x scale_heads)"
                                                                   : " (pool pages x scale_heads)");
    if (by_token) return {};  // the KV write stores each token's
    for (size_t g = 0; g < s.size(); ++g)
      if (!std::isfinite(s[g]) || !(s[g] > 0.0f))
        return DCP_GPU_ERROR("kv cache: ", name, "[", g, "] is ", s[g],
                             "; expected a finite scale > 0");
    return {};
  };
  DCP_GPU_TRY(check(scales.k, "k_scale"));
  DCP_GPU_TRY(check(scales.v, "v_scale"));
  if (spec.shared_latent && !scales.v.empty())
    return DCP_GPU_ERROR(
        "kv cache: v_scale given for a shared latent, whose V is K (k_scale "
        "scales both)");
  return {};
}

}  // namespace dcp::gpu
