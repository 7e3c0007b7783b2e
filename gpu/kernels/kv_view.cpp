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
  if (s.page_size > 0 && s.pool_pages > INT32_MAX)
    return DCP_GPU_ERROR("kv cache: pool_pages ", s.pool_pages, " exceeds the block table's int32");
  return {};
}

GpuStatus validate_block_table(const KvCacheSpec& spec, const std::vector<int32_t>& table) {
  if (table.size() != static_cast<size_t>(spec.table_pages()))
    return DCP_GPU_ERROR("kv cache: block table holds ", table.size(), " pages; expected ",
                         spec.table_pages(), " (ceil(", spec.physical_rows, " rows / page_size ",
                         spec.page_size, "))");
  std::vector<char> used(static_cast<size_t>(spec.pool_pages), 0);
  for (size_t i = 0; i < table.size(); ++i) {
    const int64_t p = table[i];
    if (p < 0 || p >= spec.pool_pages)
      return DCP_GPU_ERROR("kv cache: block table [", i, "] = ", p, "; expected a page in [0, ",
                           spec.pool_pages, ")");
    if (used[static_cast<size_t>(p)]++)
      return DCP_GPU_ERROR("kv cache: block table [", i, "] = ", p,
                           ", a page already holding other rows");
  }
  return {};
}

GpuStatus validate_cache_scales(const KvCacheSpec& spec, const KvScales& scales) {
  const auto check = [&](const std::vector<float>& s, const char* name) -> GpuStatus {
    if (!s.empty() && s.size() != static_cast<size_t>(spec.kv_heads))
      return DCP_GPU_ERROR("kv cache: ", name, " holds ", s.size(), " scales; expected none or ",
                           spec.kv_heads, " (one per stored KV head)");
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
