#include "gpu/partial_attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu/dtype.hpp"
#include "gpu/merge.hpp"
#include "gpu/mutants.hpp"

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

namespace {

// The rank-local rows query t attends to, in increasing position order.
void visible_rows(const PartialAttentionParams& p, int64_t t, std::vector<int64_t>& rows) {
  rows.clear();
  const int64_t qp = p.q_pos[t];
  // Global key range [lo, hi) allowed by causal and window masks, and the context.
  int64_t hi = p.causal ? std::min(p.seq, qp + 1) : p.seq;
  const int64_t first = DCP_MUTANT(window_off_by_one) ? qp - p.window : qp - p.window + 1;
  int64_t lo = p.window > 0 ? std::max<int64_t>(0, first) : 0;
  if (hi <= lo) return;
  if (p.topk != nullptr) {
    for (int64_t x = 0; x < p.topk_k; ++x) {
      const int64_t pos = p.topk[t * p.topk_k + x];
      if (pos == -1 && DCP_MUTANT(topk_pad_last_rank)) {
        if (p.rank == p.layout.ranks - 1 && p.rows > 0) rows.push_back(p.rows - 1);
        continue;
      }
      if (pos < lo || pos >= hi) continue;  // -1 pads too
      if (DCP_MUTANT(topk_as_local_rows)) {
        if (pos < p.rows) rows.push_back(pos);
        continue;
      }
      if (p.layout.owner(pos) != p.rank) continue;
      rows.push_back(p.layout.row(pos));
    }
    std::sort(rows.begin(), rows.end());
    return;
  }
  // Rows are stored in position order, so the owned positions of [lo, hi) are a row range.
  int64_t r_lo = p.layout.count(p.rank, lo), r_hi = p.layout.count(p.rank, hi);
  if (DCP_MUTANT(causal_on_local_rows) && p.causal) r_hi = std::min(p.rows, qp + 1);
  if (DCP_MUTANT(window_on_local_rows) && p.window > 0) r_lo = lo;
  for (int64_t r = r_lo; r < r_hi; ++r) rows.push_back(r);
}

}  // namespace

GpuStatus partial_attention(const PartialAttentionParams& p) {
  DCP_GPU_TRY(validate_partial_attention(p));
  const int64_t T = p.tokens, H = p.heads, dk = p.head_dim, dv = p.v_dim;
  const int64_t group = p.q_heads_total / p.kv_heads_total;
  const LseBase base = p.base;
  std::vector<int64_t> rows;
  std::vector<float> s(static_cast<size_t>(p.tile));
  // One numerator per split, merged locally at the end.
  std::vector<float> n(static_cast<size_t>(p.splits * dv));
  std::vector<MergeAcc> acc(static_cast<size_t>(p.splits));
  std::vector<float> l_split(static_cast<size_t>(p.splits));
  std::vector<char> masked;  // softcap_after_mask: which of the rank's rows the masks remove

  for (int64_t t = 0; t < T; ++t) {
    visible_rows(p, t, rows);
    if (DCP_MUTANT(softcap_after_mask) && p.softcap > 0.0f) {
      // Masked keys kept with logit -inf, then softcapped: c tanh(-inf / c) = -c.
      masked.assign(static_cast<size_t>(p.rows), 1);
      for (const int64_t r : rows) masked[static_cast<size_t>(r)] = 0;
      rows.resize(static_cast<size_t>(p.rows));
      for (int64_t r = 0; r < p.rows; ++r) rows[static_cast<size_t>(r)] = r;
    }
    const int64_t nk = static_cast<int64_t>(rows.size());
    for (int64_t h = 0; h < H; ++h) {
      const float* q = p.q + (t * H + h) * dk;
      int64_t g_local = (p.head0 + h) / group - p.kv_head0;  // global map, then local
      if (DCP_MUTANT(gqa_head_mod))
        g_local =
            std::clamp<int64_t>((p.head0 + h) % p.kv_heads_total - p.kv_head0, 0, p.kv_heads - 1);
      if (DCP_MUTANT(gqa_local_ratio))
        g_local = std::min<int64_t>(h / std::max<int64_t>(1, H / p.kv_heads), p.kv_heads - 1);
      std::fill(n.begin(), n.end(), 0.0f);
      std::fill(acc.begin(), acc.end(),
                DCP_MUTANT(zero_initial_max) ? MergeAcc{0.0f, 0.0f} : MergeAcc{});
      for (int64_t sp = 0; sp < p.splits; ++sp) {
        // Split sp covers keys [nk sp / splits, nk (sp+1) / splits).
        const int64_t k0 = nk * sp / p.splits;
        int64_t k1 = nk * (sp + 1) / p.splits;
        if (DCP_MUTANT(split_boundary_duplicate) && sp + 1 < p.splits && k1 < nk) ++k1;
        MergeAcc& a = acc[static_cast<size_t>(sp)];
        float* num = &n[static_cast<size_t>(sp * dv)];
        for (int64_t t0 = k0; t0 < k1; t0 += p.tile) {
          const int64_t t1 = std::min(k1, t0 + p.tile);
          float m_tile = kEmptyLseF;
          for (int64_t x = t0; x < t1; ++x) {
            const float* kr = p.k + (rows[static_cast<size_t>(x)] * p.kv_heads + g_local) * dk;
            float dot = 0.0f;
            for (int64_t i = 0; i < dk; ++i) dot += q[i] * kr[i];
            float sc = DCP_MUTANT(scale_missing) ? dot
                       : DCP_MUTANT(scale_twice) ? dot * p.scale * p.scale
                                                 : dot * p.scale;
            if (p.softcap > 0.0f) sc = p.softcap * std::tanh(sc / p.softcap);
            if (DCP_MUTANT(softcap_after_mask) && !masked.empty() &&
                masked[static_cast<size_t>(rows[static_cast<size_t>(x)])])
              sc = -p.softcap;
            if (!DCP_MUTANT(exp2_without_log2e)) sc = to_base_units(base, sc);
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
            if (DCP_MUTANT(bf16_accumulation)) {
              for (int64_t i = 0; i < dv; ++i) num[i] = round_bf16(num[i] + w * vr[i]);
            } else {
              for (int64_t i = 0; i < dv; ++i) num[i] += w * vr[i];
            }
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
