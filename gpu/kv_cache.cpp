#include "gpu/kv_cache.hpp"

namespace dcp::gpu {

RankKvCache::RankKvCache(const KvCacheSpec& spec)
    : spec_(spec),
      k_(static_cast<size_t>(spec.physical_rows * spec.kv_heads * spec.head_dim), 0.0f),
      v_(spec.shared_latent ? 0
                            : static_cast<size_t>(spec.physical_rows * spec.kv_heads * spec.v_dim),
         0.0f),
      written_(static_cast<size_t>(spec.physical_rows), false) {}

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
  return {};
}

Result<RankKvCache> RankKvCache::create(const KvCacheSpec& s) {
  DCP_GPU_TRY(validate_cache_spec(s));
  return RankKvCache(s);
}

GpuStatus RankKvCache::write_chunk(int64_t pos0, int64_t len, const float* k, const float* v) {
  const DcpLayout& lay = spec_.layout;
  if (pos0 < 0 || len < 0)
    return DCP_GPU_ERROR("kv write: chunk [", pos0, ", ", pos0 + len, ") is invalid");
  if (len > 0 && (k == nullptr || (!spec_.shared_latent && v == nullptr)))
    return DCP_GPU_ERROR("kv write: chunk [", pos0, ", ", pos0 + len, ") has no k/v data");
  const int64_t first = lay.count(spec_.rank, pos0);
  const int64_t need = first + lay.chunk_share(spec_.rank, pos0, len);
  if (need > spec_.physical_rows) {
    return DCP_GPU_ERROR("kv write: position ", pos0 + len - 1, " needs ", need, " rows on rank ",
                         spec_.rank, " but the cache holds ", spec_.physical_rows,
                         " rows (logical capacity ", lay.logical_capacity(spec_.physical_rows),
                         " tokens)");
  }
  const int64_t H = spec_.kv_heads, dk = spec_.head_dim, dv = spec_.v_dim;
  // Visit only owned positions: the chunk_share(rank, pos0, len) rows from count(rank, pos0).
  for (int64_t row = first; row < need; ++row) {
    const int64_t pos = lay.position(spec_.rank, row);
    const int64_t i = pos - pos0;  // index inside the chunk
    if (i < 0 || i >= len)
      return DCP_GPU_ERROR("kv write: rank ", spec_.rank, " row ", row, " maps to position ", pos,
                           ", outside the chunk [", pos0, ", ", pos0 + len, ")");
    for (int64_t x = 0; x < H * dk; ++x)
      k_[static_cast<size_t>(row * H * dk + x)] = round_to(spec_.dtype, k[i * H * dk + x]);
    if (!spec_.shared_latent) {
      for (int64_t x = 0; x < H * dv; ++x)
        v_[static_cast<size_t>(row * H * dv + x)] = round_to(spec_.dtype, v[i * H * dv + x]);
    }
    written_[static_cast<size_t>(row)] = true;
  }
  return {};
}

int64_t RankKvCache::contiguous_rows() const {
  int64_t n = 0;
  while (n < spec_.physical_rows && written_[static_cast<size_t>(n)]) ++n;
  return n;
}

}  // namespace dcp::gpu
