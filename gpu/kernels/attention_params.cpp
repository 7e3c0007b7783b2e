#include "gpu/kernels/attention_params.hpp"

namespace dcp::gpu {

GpuStatus validate_partial_attention(const PartialAttentionParams& p) {
  DCP_GPU_TRY(validate_layout(p.layout));
  if (p.tokens < 1 || p.heads < 1 || p.head_dim < 1 || p.v_dim < 1)
    return DCP_GPU_ERROR("partial attention: tokens, heads, head_dim, v_dim must be >= 1");
  if (p.q_heads_total < 1 || p.kv_heads_total < 1 || p.q_heads_total % p.kv_heads_total != 0)
    return DCP_GPU_ERROR("partial attention: q_heads_total ", p.q_heads_total,
                         " is not a multiple of kv_heads_total ", p.kv_heads_total);
  if (p.head0 < 0 || p.head0 + p.heads > p.q_heads_total)
    return DCP_GPU_ERROR("partial attention: heads [", p.head0, ", ", p.head0 + p.heads,
                         ") outside the model's ", p.q_heads_total, " query heads");
  const int64_t group = p.q_heads_total / p.kv_heads_total;
  const int64_t g_first = p.head0 / group, g_last = (p.head0 + p.heads - 1) / group;
  if (g_first < p.kv_head0 || g_last >= p.kv_head0 + p.kv.kv_heads)
    return DCP_GPU_ERROR("partial attention: heads [", p.head0, ", ", p.head0 + p.heads,
                         ") read KV heads [", g_first, ", ", g_last + 1, "] but the cache holds [",
                         p.kv_head0, ", ", p.kv_head0 + p.kv.kv_heads, ")");
  if (p.rows != p.layout.count(p.rank, p.seq))
    return DCP_GPU_ERROR("partial attention: rank ", p.rank, " has ", p.rows,
                         " rows for a context of ", p.seq, " tokens; expected ",
                         p.layout.count(p.rank, p.seq));
  if (p.tile < 1) return DCP_GPU_ERROR("partial attention: tile ", p.tile, " must be >= 1");
  if (p.splits < 1) return DCP_GPU_ERROR("partial attention: splits ", p.splits, " must be >= 1");
  if (p.q == nullptr || p.q_pos == nullptr || p.o == nullptr || p.lse == nullptr ||
      (p.rows > 0 && (p.kv.k == nullptr || p.kv.v == nullptr)))
    return DCP_GPU_ERROR("partial attention: a required tensor pointer is null");
  if (p.req != nullptr &&
      (p.req_seq == nullptr || p.kv.page < 1 ||
       (p.rows > 0 && (p.req_tables == nullptr || p.table_stride * p.kv.page < p.rows))))
    return DCP_GPU_ERROR("partial attention: a batch needs req_seq, req_tables and table_stride ",
                         p.table_stride, " pages of ", p.kv.page, " rows covering the rank's ",
                         p.rows, " rows");
  if (p.topk != nullptr && p.topk_k < 0)
    return DCP_GPU_ERROR("partial attention: topk_k ", p.topk_k, " must be >= 0");
  return {};
}

}  // namespace dcp::gpu
