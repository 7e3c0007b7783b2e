#include "gpu/partial_attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu/merge.hpp"

namespace dcp::gpu {
namespace {

GpuStatus check(const PartialAttentionParams& p) {
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
  if (g_first < p.kv_head0 || g_last >= p.kv_head0 + p.kv_heads)
    return DCP_GPU_ERROR("partial attention: heads [", p.head0, ", ", p.head0 + p.heads,
                         ") read KV heads [", g_first, ", ", g_last + 1, "] but the cache holds [",
                         p.kv_head0, ", ", p.kv_head0 + p.kv_heads, ")");
  if (p.rows != p.layout.count(p.rank, p.seq))
    return DCP_GPU_ERROR("partial attention: rank ", p.rank, " has ", p.rows,
                         " rows for a context of ", p.seq, " tokens; expected ",
                         p.layout.count(p.rank, p.seq));
  if (p.tile < 1) return DCP_GPU_ERROR("partial attention: tile ", p.tile, " must be >= 1");
  if (p.splits < 1) return DCP_GPU_ERROR("partial attention: splits ", p.splits, " must be >= 1");
  if (p.q == nullptr || p.q_pos == nullptr || p.o == nullptr || p.lse == nullptr ||
      (p.rows > 0 && (p.k == nullptr || p.v == nullptr)))
    return DCP_GPU_ERROR("partial attention: a required tensor pointer is null");
  if (p.topk != nullptr && p.topk_k < 0)
    return DCP_GPU_ERROR("partial attention: topk_k ", p.topk_k, " must be >= 0");
  return {};
}

// The rank-local rows query t attends to, in increasing position order.
void visible_rows(const PartialAttentionParams& p, int64_t t, std::vector<int64_t>& rows) {
  rows.clear();
  const int64_t qp = p.q_pos[t];
  // Global key range [lo, hi) allowed by causal and window masks, and the context.
  int64_t hi = p.causal ? std::min(p.seq, qp + 1) : p.seq;
  int64_t lo = p.window > 0 ? std::max<int64_t>(0, qp - p.window + 1) : 0;
  if (hi <= lo) return;
  if (p.topk != nullptr) {
    for (int64_t x = 0; x < p.topk_k; ++x) {
      const int64_t pos = p.topk[t * p.topk_k + x];
      if (pos < lo || pos >= hi || p.layout.owner(pos) != p.rank) continue;  // -1 pads too
      rows.push_back(p.layout.row(pos));
    }
    std::sort(rows.begin(), rows.end());
    return;
  }
  // Rows are stored in position order, so the owned positions of [lo, hi) are a row range.
  for (int64_t r = p.layout.count(p.rank, lo); r < p.layout.count(p.rank, hi); ++r)
    rows.push_back(r);
}

}  // namespace

GpuStatus partial_attention(const PartialAttentionParams& p) {
  DCP_GPU_TRY(check(p));
  const int64_t T = p.tokens, H = p.heads, dk = p.head_dim, dv = p.v_dim;
  const int64_t group = p.q_heads_total / p.kv_heads_total;
  const LseBase base = p.base;
  std::vector<int64_t> rows;
  std::vector<float> s(static_cast<size_t>(p.tile));
  // One numerator per split, merged locally at the end.
  std::vector<float> n(static_cast<size_t>(p.splits * dv));
  std::vector<MergeAcc> acc(static_cast<size_t>(p.splits));
  std::vector<float> l_split(static_cast<size_t>(p.splits));

  for (int64_t t = 0; t < T; ++t) {
    visible_rows(p, t, rows);
    const int64_t nk = static_cast<int64_t>(rows.size());
    for (int64_t h = 0; h < H; ++h) {
      const float* q = p.q + (t * H + h) * dk;
      const int64_t g_local = (p.head0 + h) / group - p.kv_head0;  // global map, then local
      std::fill(n.begin(), n.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), MergeAcc{});
      for (int64_t sp = 0; sp < p.splits; ++sp) {
        // Split sp covers keys [nk sp / splits, nk (sp+1) / splits).
        const int64_t k0 = nk * sp / p.splits, k1 = nk * (sp + 1) / p.splits;
        MergeAcc& a = acc[static_cast<size_t>(sp)];
        float* num = &n[static_cast<size_t>(sp * dv)];
        for (int64_t t0 = k0; t0 < k1; t0 += p.tile) {
          const int64_t t1 = std::min(k1, t0 + p.tile);
          float m_tile = kEmptyLseF;
          for (int64_t x = t0; x < t1; ++x) {
            const float* kr = p.k + (rows[static_cast<size_t>(x)] * p.kv_heads + g_local) * dk;
            float dot = 0.0f;
            for (int64_t i = 0; i < dk; ++i) dot += q[i] * kr[i];
            float sc = dot * p.scale;
            if (p.softcap > 0.0f) sc = p.softcap * std::tanh(sc / p.softcap);
            sc = to_base_units(base, sc);
            s[static_cast<size_t>(x - t0)] = sc;
            m_tile = std::max(m_tile, sc);
          }
          const float m_new = std::max(a.m, m_tile);
          const float alpha = is_empty_lse(a.m) ? 0.0f : pow_base(base, a.m - m_new);
          a.z *= alpha;
          for (int64_t i = 0; i < dv; ++i) num[i] *= alpha;
          for (int64_t x = t0; x < t1; ++x) {
            const float w = pow_base(base, s[static_cast<size_t>(x - t0)] - m_new);
            a.z += w;
            const float* vr =
                p.v + rows[static_cast<size_t>(x)] * p.v_row_stride + g_local * p.v_head_stride;
            for (int64_t i = 0; i < dv; ++i) num[i] += w * vr[i];
          }
          a.m = m_new;
        }
      }
      if (p.sink != nullptr) {  // the sink joins split 0's denominator, nothing to the numerator
        MergeAcc& a = acc[0];
        const float sg = to_base_units(base, p.sink[h]);
        const float m_new = std::max(a.m, sg);
        const float alpha = is_empty_lse(a.m) ? 0.0f : pow_base(base, a.m - m_new);
        a.z = a.z * alpha + pow_base(base, sg - m_new);
        for (int64_t i = 0; i < dv; ++i) n[static_cast<size_t>(i)] *= alpha;
        a.m = m_new;
      }
      // Each split's state is turned into its partial (O_s, L_s) as a split-KV kernel writes
      // them, then the partials are merged left to right (the local combine).
      for (int64_t sp = 0; sp < p.splits; ++sp)
        l_split[static_cast<size_t>(sp)] =
            finish(base, acc[static_cast<size_t>(sp)], &n[static_cast<size_t>(sp * dv)], dv);
      MergeAcc total = MergeAcc::from_partial(l_split[0]);
      for (int64_t sp = 1; sp < p.splits; ++sp)
        merge_into(base, total, n.data(), MergeAcc::from_partial(l_split[static_cast<size_t>(sp)]),
                   &n[static_cast<size_t>(sp * dv)], dv);
      float* o = p.o + (t * H + h) * dv;
      for (int64_t i = 0; i < dv; ++i) o[i] = n[static_cast<size_t>(i)];
      p.lse[t * H + h] = finish(base, total, o, dv);
    }
  }
  return {};
}

}  // namespace dcp::gpu
