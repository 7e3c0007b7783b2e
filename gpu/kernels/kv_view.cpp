#include "gpu/kernels/kv_view.hpp"

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
  return {};
}

}  // namespace dcp::gpu
