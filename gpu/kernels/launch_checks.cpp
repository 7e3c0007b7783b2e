#include "gpu/kernels/launch_checks.hpp"

namespace dcp::gpu {

GpuStatus check_merge_ranks(const char* what, int64_t ranks, int64_t capacity) {
  if (ranks < 1 || ranks > capacity)
    return DCP_GPU_ERROR(what, ": ", ranks, " ranks; this device supports 1 .. ", capacity);
  return {};
}

Result<body::KvWrite> kv_write_args(const KvCacheSpec& spec, const KvView& cache,
                                    const KvChunk& chunk) {
  DCP_GPU_TRY(validate_layout(spec.layout));
  const int64_t pos0 = chunk.pos0, len = chunk.len;
  if (pos0 < 0 || len < 0)
    return DCP_GPU_ERROR("kv write: chunk [", pos0, ", ", pos0 + len, ") is not a valid range");
  const int64_t need = spec.layout.count(spec.rank, pos0 + len);
  if (need > spec.physical_rows)
    return DCP_GPU_ERROR("kv write: rank ", spec.rank, " needs row ", need - 1, " for chunk [",
                         pos0, ", ", pos0 + len, ") but holds ", spec.physical_rows,
                         " rows (logical capacity ",
                         spec.layout.logical_capacity(spec.physical_rows), " tokens)");
  if (len > 0 && (chunk.k == nullptr || (!spec.shared_latent && chunk.v == nullptr)))
    return DCP_GPU_ERROR("kv write: a chunk tensor pointer is null");
  if (spec.page_size > 0 && spec.physical_rows > 0 && cache.block_table == nullptr)
    return DCP_GPU_ERROR("kv write: the cache is paged (page_size ", spec.page_size,
                         ") but its view has no block table");
  const bool by_token = cache.scales_written();  // by token or page
  if (len > 0 && by_token &&
      ((cache.k_scale != nullptr) != (chunk.k_scale != nullptr) ||
       (!spec.shared_latent && (cache.v_scale != nullptr) != (chunk.v_scale != nullptr))))
    return DCP_GPU_ERROR(
        "kv write: the cache's scales are by token or page; the chunk must carry its "
        "rows' k_scale and v_scale exactly where the cache has them");
  if (!by_token && (chunk.k_scale != nullptr || chunk.v_scale != nullptr))
    return DCP_GPU_ERROR("kv write: the chunk carries scales by token; the cache's are by head");
  if (cache.dtype != spec.dtype)
    return DCP_GPU_ERROR("kv write: the cache view holds ", format_name(cache.dtype),
                         "; the cache is ", format_name(spec.dtype));
  body::KvWrite a;
  a.layout = spec.layout;
  a.rank = spec.rank;
  a.pos0 = pos0;
  a.len = len;
  a.latent = spec.shared_latent;
  a.src = chunk.dtype;
  a.quantize = chunk.quantize;
  a.k = chunk.k;
  a.v = chunk.v;
  a.k_scale = chunk.k_scale;
  a.v_scale = spec.shared_latent ? chunk.k_scale : chunk.v_scale;
  a.cache = cache;
  return a;
}

int64_t attention_smem_bytes(const PartialAttentionParams& p) {
  return (p.head_dim + p.tile) * static_cast<int64_t>(sizeof(float));
}

GpuStatus check_attention_launch(const PartialAttentionParams& p) {
  DCP_GPU_TRY(validate_partial_attention(p));
  if (p.v_dim > kMaxAttentionVDim)
    return DCP_GPU_ERROR("partial attention: v_dim ", p.v_dim, " exceeds the CUDA kernel's ",
                         kMaxAttentionVDim);
  if (attention_smem_bytes(p) + kAttentionStaticSmemBytes > kMaxAttentionSmemBytes)
    return DCP_GPU_ERROR("partial attention: head_dim ", p.head_dim, " + tile ", p.tile,
                         " floats exceed the kernel's ", kMaxAttentionSmemBytes,
                         " bytes of shared memory");
  if (p.splits > kMaxGridY)
    return DCP_GPU_ERROR("partial attention: splits ", p.splits, " exceeds the grid's ", kMaxGridY);
  return {};
}

}  // namespace dcp::gpu
