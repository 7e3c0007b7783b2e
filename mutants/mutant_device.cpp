#include "mutants/mutant_device.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gpu/device_step.hpp"
#include "gpu/host/host_device.hpp"

namespace dcp::mutants {
namespace {

using gpu::Exponential;
using gpu::GpuStatus;
using gpu::LseBase;
using gpu::MergeAcc;
using gpu::PartialAttentionParams;
namespace body = gpu::body;

LseBase other_base(LseBase b) { return b == LseBase::e ? LseBase::two : LseBase::e; }

// finite_mask_sentinel's logit for a masked key (natural units): the -1e4 of many masks.
constexpr float kFiniteMaskSentinel = -1.0e4f;

bool in_family(Mutant m, std::initializer_list<Mutant> family) {
  return std::find(family.begin(), family.end(), m) != family.end();
}

// ---- a buggy merge (merge.hpp's merge_into and finish, one bug each) ---------------------------

bool buggy_merges(Mutant m) {
  return in_family(
      m, {Mutant::merge_unweighted_mean, Mutant::merge_base_mismatch, Mutant::merge_no_max_shift,
          Mutant::merge_shift_by_first, Mutant::empty_nan_leak, Mutant::empty_lse_zero,
          Mutant::empty_lse_pos_inf, Mutant::empty_split_clobbers});
}

void merge_into(Mutant m, Exponential base, MergeAcc& a, float* n_a, const MergeAcc& b,
                const float* n_b, int64_t dv) {
  if (m == Mutant::merge_shift_by_first) {  // shifted by a's max, even when a is empty
    const float wa = gpu::pow_base(base, a.m - a.m), wb = gpu::pow_base(base, b.m - a.m);
    a.z = a.z * wa + b.z * wb;
    for (int64_t i = 0; i < dv; ++i) n_a[i] = n_a[i] * wa + n_b[i] * wb;
    return;
  }
  if (gpu::is_empty_lse(b.m) && m != Mutant::empty_nan_leak) return;
  if (gpu::is_empty_lse(a.m)) {
    a = b;
    for (int64_t i = 0; i < dv; ++i) n_a[i] = n_b[i];
    return;
  }
  if (m == Mutant::merge_unweighted_mean) {
    a.m = std::max(a.m, b.m);
    a.z += b.z;
    for (int64_t i = 0; i < dv; ++i) n_a[i] += n_b[i];
    return;
  }
  const float mx = m == Mutant::merge_no_max_shift ? 0.0f : std::max(a.m, b.m);
  const Exponential wbase =
      m == Mutant::merge_base_mismatch ? Exponential{other_base(base.base), base.impl} : base;
  const float wa = gpu::pow_base(wbase, a.m - mx), wb = gpu::pow_base(wbase, b.m - mx);
  a.z = a.z * wa + b.z * wb;
  for (int64_t i = 0; i < dv; ++i) n_a[i] = n_a[i] * wa + n_b[i] * wb;
  a.m = mx;
}

float finish(Mutant m, Exponential base, const MergeAcc& a, float* n, int64_t dv) {
  if (gpu::is_empty_lse(a.m) && m != Mutant::empty_nan_leak) {
    for (int64_t i = 0; i < dv; ++i) n[i] = 0.0f;
    if (m == Mutant::empty_lse_zero) return 0.0f;
    if (m == Mutant::empty_lse_pos_inf) return -gpu::kEmptyLseF;
    return gpu::kEmptyLseF;
  }
  for (int64_t i = 0; i < dv; ++i) n[i] = n[i] / a.z;
  return a.m + gpu::log_base(base.base, a.z);
}

// A fold of n partials (acc, num [n, dv]) in the schedule's order with the buggy merge.
template <class Sched>
float fold(Mutant m, Exponential base, const Sched& sc, std::vector<MergeAcc>& acc,
           std::vector<float>& num, int64_t dv, float* out) {
  for (int32_t st = 0; st < sc.steps; ++st)
    merge_into(m, base, acc[static_cast<size_t>(sc.dst[st])],
               &num[static_cast<size_t>(sc.dst[st] * dv)], acc[static_cast<size_t>(sc.src[st])],
               &num[static_cast<size_t>(sc.src[st] * dv)], dv);
  float* n = &num[static_cast<size_t>(sc.root * dv)];
  const float l = finish(m, base, acc[static_cast<size_t>(sc.root)], n, dv);
  std::copy_n(n, dv, out);
  return l;
}

// ---- the keys a rank attends to, with a bug --------------------------------------------------

bool buggy_keys(Mutant m) {
  return in_family(
      m, {Mutant::causal_on_local_rows, Mutant::window_on_local_rows, Mutant::window_off_by_one,
          Mutant::topk_as_local_rows, Mutant::topk_pad_last_rank, Mutant::count_off_by_one,
          Mutant::split_boundary_duplicate, Mutant::global_lengths, Mutant::causal_local_minus_k,
          Mutant::count_without_rank});
}

// The pages a request's block table holds: its leading entries before the -1 padding, of `stride`.
int64_t pages_held(const int32_t* table, int64_t stride) {
  int64_t held = 0;
  while (held < stride && table[held] >= 0) ++held;
  return held;
}

// The rows the rank's cache has room for in query t's request: its pages, or all rows unpaged.
int64_t allocated_rows(const PartialAttentionParams& p, int64_t t) {
  const gpu::KvView kv = body::token_view(p, t);
  if (kv.block_table == nullptr) return kv.rows;
  return pages_held(kv.block_table, (kv.rows + kv.page - 1) / kv.page) * kv.page;
}

// The rank-local rows query t attends to, in order, as a kernel with bug m finds them.
std::vector<int64_t> visible_rows(Mutant m, const PartialAttentionParams& p, int64_t t) {
  std::vector<int64_t> rows;
  const gpu::DcpLayout& lay = p.layout;
  const int64_t qp = p.q_pos[t], seq = body::token_seq(p, t), rows_t = lay.count(p.rank, seq);
  const int64_t hi = p.causal ? std::min(seq, qp + 1) : seq;
  const int64_t first = m == Mutant::window_off_by_one ? qp - p.window : qp - p.window + 1;
  const int64_t lo = p.window > 0 ? std::max<int64_t>(0, first) : 0;
  const int64_t shift = m == Mutant::count_off_by_one ? 1 : 0;  // count(r, x) over [0, x]
  if (hi <= lo) return rows;
  if (p.topk != nullptr) {
    for (int64_t x = 0; x < p.topk_k; ++x) {
      const int64_t pos = p.topk[t * p.topk_k + x];
      if (pos == -1 && m == Mutant::topk_pad_last_rank) {
        if (p.rank == lay.ranks - 1 && rows_t > 0) rows.push_back(rows_t - 1);
        continue;
      }
      if (pos < lo || pos >= hi) continue;
      if (m == Mutant::topk_as_local_rows) {
        if (pos < rows_t) rows.push_back(pos);
        continue;
      }
      if (lay.owner(pos) == p.rank) rows.push_back(lay.row(pos));
    }
    std::sort(rows.begin(), rows.end());
  } else {
    // count_without_rank: every rank counts its rows as rank 0 does (no rank offset).
    const int64_t counted = m == Mutant::count_without_rank ? 0 : p.rank;
    int64_t r_lo = lay.count(counted, lo + shift), r_hi = lay.count(counted, hi + shift);
    if (m == Mutant::causal_on_local_rows && p.causal) r_hi = std::min(rows_t, qp + 1);
    if (m == Mutant::causal_local_minus_k && p.causal) {  // local(G) - k, not local(G - k)
      const int64_t newest = *std::max_element(p.q_pos, p.q_pos + p.tokens);
      r_hi = std::max(r_lo, lay.count(p.rank, std::min(seq, newest + 1)) - (newest - qp));
    }
    if (m == Mutant::global_lengths)  // as many rows as global positions, within its pages
      r_hi = std::min(r_lo + (hi - lo), allocated_rows(p, t));
    if (m == Mutant::window_on_local_rows && p.window > 0) r_lo = lo;
    for (int64_t r = r_lo; r < r_hi; ++r) rows.push_back(r);
  }
  if (m == Mutant::split_boundary_duplicate) {  // each split also takes the next one's first key
    const auto nk = static_cast<int64_t>(rows.size());
    std::vector<int64_t> dup;
    for (int64_t sp = 0; sp < p.splits; ++sp) {
      const int64_t k0 = nk * sp / p.splits, k1 = nk * (sp + 1) / p.splits;
      dup.insert(dup.end(), rows.begin() + k0, rows.begin() + k1);
      if (sp + 1 < p.splits && k1 < nk) dup.push_back(rows[static_cast<size_t>(k1)]);
    }
    rows = dup;
  }
  return rows;
}

// ---- a buggy online softmax ------------------------------------------------------------------

bool buggy_softmax(Mutant m) {
  return in_family(
      m,
      {Mutant::zero_initial_max, Mutant::softcap_after_mask, Mutant::alibi_on_local_rows,
       Mutant::bf16_accumulation, Mutant::sink_per_split, Mutant::partial_lse_scaled_max,
       Mutant::sink_skipped_when_empty, Mutant::sink_no_max_shift, Mutant::finite_mask_sentinel});
}

// The attention of every (t, h) of p with bug m: the body's online softmax over tiles of p.tile
// keys (bodies.hpp, partial_attention_as: the same products, exponential, P cast and order), per
// split, the splits then merged by the production split combine.
void buggy_attention(Mutant m, const PartialAttentionParams& p) {
  const int64_t H = p.heads, dk = p.head_dim, dv = p.v_dim, rows_out = p.tokens * H;
  const int64_t group = p.q_heads_total / p.kv_heads_total;
  const LseBase lb = p.base;
  const Exponential base{p.base, p.exp};
  const auto operand = [&](float x) { return gpu::product_operand(p.tf32, x); };
  // alibi_on_local_rows: the parameters of a rank that holds positions 0, 1, ... in its rows
  PartialAttentionParams rows_as_positions = p;
  rows_as_positions.layout = gpu::DcpLayout{.ranks = 1, .interleave = 1};
  rows_as_positions.rank = 0;
  std::vector<float> split_o(static_cast<size_t>(p.splits * rows_out * dv)),
      split_lse(static_cast<size_t>(p.splits * rows_out));
  std::vector<float> num(static_cast<size_t>(dv)), qs(static_cast<size_t>(dk));
  for (int64_t t = 0; t < p.tokens; ++t) {
    std::vector<int64_t> rows = visible_rows(Mutant::none, p, t);
    const gpu::KvView kv = body::token_view(p, t);
    const int64_t rows_t = p.layout.count(p.rank, body::token_seq(p, t));
    // softcap_after_mask, finite_mask_sentinel: which of the rank's rows the masks remove, then
    // attended with a finite logit
    std::vector<char> masked;
    if ((m == Mutant::softcap_after_mask && p.softcap > 0.0f) ||
        m == Mutant::finite_mask_sentinel) {
      masked.assign(static_cast<size_t>(rows_t), 1);
      for (const int64_t r : rows) masked[static_cast<size_t>(r)] = 0;
      rows.resize(static_cast<size_t>(rows_t));
      for (int64_t r = 0; r < rows_t; ++r) rows[static_cast<size_t>(r)] = r;
    }
    const auto nk = static_cast<int64_t>(rows.size());
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < dk; ++i)
        qs[static_cast<size_t>(i)] = operand(p.q[(t * H + h) * dk + i]);
      const int64_t g = (p.head0 + h) / group - p.kv_head0;
      const bool by_token = kv.scales_by_row();  // scales as the body applies them
      for (int64_t sp = 0; sp < p.splits; ++sp) {
        const int64_t k0 = nk * sp / p.splits, k1 = nk * (sp + 1) / p.splits;
        MergeAcc a = m == Mutant::zero_initial_max ? MergeAcc{0.0f, 0.0f} : MergeAcc{};
        std::fill(num.begin(), num.end(), 0.0f);
        for (int64_t t0 = k0; t0 < k1; t0 += p.tile) {
          const int64_t t1 = std::min(k1, t0 + p.tile);
          std::vector<float> s(static_cast<size_t>(t1 - t0));
          float m_tile = gpu::kEmptyLseF;
          for (int64_t x = t0; x < t1; ++x) {
            const int64_t row = rows[static_cast<size_t>(x)];
            float dot = 0.0f;
            for (int64_t i = 0; i < dk; ++i)
              dot += qs[static_cast<size_t>(i)] * operand(kv.key(row, g, i));
            const float logit_scale = p.scale * kv.k_scale_of(row, g);
            float sc = gpu::variant_logit(m == Mutant::alibi_on_local_rows ? rows_as_positions : p,
                                          dot * logit_scale, t, h, row);
            if (!masked.empty() && masked[static_cast<size_t>(row)])
              sc = m == Mutant::finite_mask_sentinel ? kFiniteMaskSentinel : -p.softcap;
            sc = gpu::to_base_units(lb, sc);
            s[static_cast<size_t>(x - t0)] = sc;
            m_tile = std::max(m_tile, sc);
          }
          const float m_new = std::max(a.m, m_tile);
          const float alpha = gpu::is_empty_lse(a.m) ? 0.0f : gpu::pow_base(base, a.m - m_new);
          for (float& w : s) w = gpu::pow_base(base, w - m_new);
          a.z *= alpha;
          for (const float w : s) a.z += w;
          for (int64_t i = 0; i < dv; ++i) {
            float n = num[static_cast<size_t>(i)] * alpha;
            for (int64_t x = t0; x < t1; ++x) {
              const int64_t row = rows[static_cast<size_t>(x)];
              const float v = kv.value(row, g, i);
              n += operand(gpu::round_to(p.p_cast, s[static_cast<size_t>(x - t0)])) *
                   operand(by_token ? v * kv.v_scale_of(row, g) : v);
              if (m == Mutant::bf16_accumulation) n = gpu::round_bf16(n);
            }
            num[static_cast<size_t>(i)] = n;
          }
          a.m = m_new;
        }
        // The sink joins split 0's denominator only (sink_per_split: every split's;
        // sink_skipped_when_empty: not when split 0 has no key).
        const bool sink_here = (sp == 0 || m == Mutant::sink_per_split) &&
                               !(m == Mutant::sink_skipped_when_empty && k1 == k0);
        if (p.sink != nullptr && sink_here && m == Mutant::sink_no_max_shift &&
            !gpu::is_empty_lse(a.m)) {  // base^(sink - m) added, the running max left as it was
          a.z += gpu::pow_base(base, gpu::to_base_units(lb, p.sink[h]) - a.m);
        } else if (p.sink != nullptr && sink_here) {
          const float sg = gpu::to_base_units(lb, p.sink[h]);
          const float m_new = std::max(a.m, sg);
          const float alpha = gpu::is_empty_lse(a.m) ? 0.0f : gpu::pow_base(base, a.m - m_new);
          a.z = a.z * alpha + gpu::pow_base(base, sg - m_new);
          for (float& n : num) n *= alpha;
          a.m = m_new;
        }
        const int64_t row_out = (sp * p.tokens + t) * H + h;
        float* o = &split_o[static_cast<size_t>(row_out * dv)];
        std::copy(num.begin(), num.end(), o);
        float& l = split_lse[static_cast<size_t>(row_out)];
        l = gpu::finish(base, a, o, dv);
        if (m == Mutant::partial_lse_scaled_max && !gpu::is_empty_lse(a.m))
          l += (p.scale - 1.0f) * a.m;  // tau m + log z: the max, already scaled, scaled again
        if (!by_token)
          for (int64_t i = 0; i < dv; ++i) o[i] *= kv.v_scale_of(0, g);  // as the body
      }
    }
  }
  const body::SplitCombine c = body::split_combine_of(p, split_o.data(), split_lse.data());
  for (int64_t x = 0; x < rows_out; ++x) body::split_combine(c, x, 0, 1);
}

// ---- the host device with one bug -------------------------------------------------------------

class MutantDevice : public gpu::HostDevice {
 public:
  // planted false: m's code path (its copies of the production kernels) with no bug in it.
  MutantDevice(gpu::Communicator& comm, Mutant m, bool planted, const gpu::DcpInputs& in,
               const gpu::DcpConfig& cfg)
      : HostDevice(&comm, cfg.stop), path_(m), m_(planted ? m : Mutant::none), in_(in), cfg_(cfg) {}

  using HostDevice::upload;
  // The cache's block tables (its one int32 upload) as an allocator with the bug writes them.
  gpu::Result<Buffer<int32_t>> upload(const std::vector<int32_t>& host) {
    return HostDevice::upload(buggy_tables(host));
  }
  GpuStatus kv_write(const body::KvWrite& a);
  GpuStatus partial_attention(const PartialAttentionParams& p);
  GpuStatus agrs_scale(const body::AgRsScale<Schedule>& a);
  GpuStatus a2a_pack(const body::A2aPack& a);
  GpuStatus a2a_combine(const body::A2aCombine<Schedule>& a);

 private:
  GpuStatus attention_with_args(PartialAttentionParams p);
  GpuStatus attention_per_head(const PartialAttentionParams& p);
  GpuStatus attention_with_keys(PartialAttentionParams p);
  GpuStatus attention_buggy_split_merge(const PartialAttentionParams& p);
  void corrupt_empty_partials(const PartialAttentionParams& p) const;
  std::vector<int32_t> buggy_tables(std::vector<int32_t> tables) const;
  Mutant path_;  // which of the device's code paths runs (the family's copies of the kernels)
  Mutant m_;     // the bug planted in that path (none: the path with no bug)
  const gpu::DcpInputs& in_;
  const gpu::DcpConfig& cfg_;
};

std::vector<int32_t> MutantDevice::buggy_tables(std::vector<int32_t> t) const {
  if (t.empty() || !in_family(path_, {Mutant::shared_pages_freed, Mutant::partial_page_shared}))
    return t;
  const gpu::Result<gpu::PagePlan> plan = gpu::plan_pages(in_, cfg_);
  if (!plan || plan->tables != t) return t;
  const int64_t stride = plan->stride, shared = plan->shared_pages;
  const auto held = [&](int64_t b) { return pages_held(t.data() + b * stride, stride); };
  const auto entry = [&](int64_t b, int64_t j) -> int32_t& {
    return t[static_cast<size_t>(b * stride + j)];
  };
  if (m_ == Mutant::shared_pages_freed && in_.retired > 0) {
    // The shared pages freed last, so handed out first: the first live request with pages of its
    // own takes them as its own.
    for (int64_t b = in_.retired; b < in_.requests(); ++b) {
      if (held(b) <= shared) continue;
      for (int64_t i = 0; i < std::min(shared, held(b) - shared); ++i)
        entry(b, shared + i) = entry(0, i);
      break;
    }
  }
  const int64_t virtual_page = cfg_.page_size * cfg_.layout.ranks;
  if (m_ == Mutant::partial_page_shared && in_.shared_prefix % virtual_page != 0)
    for (int64_t b = 1; b < in_.requests(); ++b)  // request 0's partly shared page in every table
      if (held(0) > shared && held(b) > shared) entry(b, shared) = entry(0, shared);
  return t;
}

// Token i of the chunk written to the cache's row `row`, as the production write stores it; its
// scales, by token, stored at the entries of row `scale_row` (row itself, where no bug moves them;
// none past the cache's rows, as a bounds-checked store).
void write_token(const body::KvWrite& a, int64_t row, int64_t i, int64_t scale_row) {
  const gpu::KvView& c = a.cache;
  const bool by_token = c.scales_written();  // by token or page
  for (int64_t g = 0; g < c.kv_heads; ++g) {
    const float ks = by_token ? body::chunk_scale(a, a.k_scale, i, g) : c.k_scale_of(row, g);
    const float vs = by_token ? body::chunk_scale(a, a.v_scale, i, g) : c.v_scale_of(row, g);
    if (by_token && scale_row < c.rows) {
      if (a.k_scale != nullptr) c.k_scale[c.scale_index(scale_row, g)] = ks;
      if (a.v_scale != nullptr && !a.latent) c.v_scale[c.scale_index(scale_row, g)] = vs;
    }
    for (int64_t x = 0; x < c.head_dim; ++x) {
      const float e = gpu::load_element(a.src, a.k, (i * c.kv_heads + g) * c.head_dim + x);
      c.set_stored_key(row, g, x, a.quantize ? e / ks : e);
    }
    if (!a.latent)
      for (int64_t x = 0; x < c.v_dim; ++x) {
        const float e = gpu::load_element(a.src, a.v, (i * c.kv_heads + g) * c.v_dim + x);
        c.set_stored_value(row, g, x, a.quantize ? e / vs : e);
      }
  }
  c.written[c.slot(row)] = 1;
}

// layout.hpp's share and inverse with the layout family's bugs, as a cache write uses them: the
// rank's rows of the chunk, each mapped back to its position (chunk_share_*,
// position_no_interleave), or the chunk's positions, each kept by an owner test and stored at a
// row (kv_write_global_row, owner_from_local_row; rows past the cache dropped, as a bounds-checked
// store does).
GpuStatus MutantDevice::kv_write(const body::KvWrite& a) {
  const gpu::DcpLayout& lay = a.layout;
  const gpu::KvView& c = a.cache;
  if (in_family(path_, {Mutant::kv_write_global_row, Mutant::owner_from_local_row,
                        Mutant::token_scale_global_row, Mutant::page_scale_logical_page})) {
    // The scales' entry at the global position: its slot by token, its page (position / P,
    // through the block table) by page; each mutant on its own grain.
    const bool scale_at_pos =
        (m_ == Mutant::token_scale_global_row && c.scale_grain == gpu::ScaleGrain::token) ||
        (m_ == Mutant::page_scale_logical_page && c.scale_grain == gpu::ScaleGrain::page);
    for (int64_t i = 0; i < a.len; ++i) {
      const int64_t pos = a.pos0 + i;
      const int64_t owner =
          m_ == Mutant::owner_from_local_row ? lay.owner(lay.row(pos)) : lay.owner(pos);
      const int64_t row = m_ == Mutant::kv_write_global_row ? pos : lay.row(pos);
      if (owner == a.rank && row < c.rows) write_token(a, row, i, scale_at_pos ? pos : row);
    }
    return {};
  }
  if (!in_family(path_, {Mutant::chunk_share_uniform, Mutant::chunk_share_no_phase,
                         Mutant::position_no_interleave}))
    return HostDevice::kv_write(a);
  const int64_t n = lay.ranks, first = lay.count(a.rank, a.pos0);
  const int64_t share = m_ == Mutant::chunk_share_uniform ? a.len / n + (a.rank < a.len % n ? 1 : 0)
                        : m_ == Mutant::chunk_share_no_phase
                            ? lay.count(a.rank, a.len)
                            : lay.count(a.rank, a.pos0 + a.len) - first;
  if (first + share > c.rows)
    return DCP_GPU_ERROR("kv write: rank ", a.rank, " needs ", first + share, " rows, holds ",
                         c.rows);
  for (int64_t row = first; row < first + share; ++row) {
    const int64_t pos =
        m_ == Mutant::position_no_interleave ? row * n + a.rank : lay.position(a.rank, row);
    const int64_t i = pos - a.pos0;
    if (i < 0 || i >= a.len)
      return DCP_GPU_ERROR("kv write: rank ", a.rank, " row ", row, " maps to position ", pos,
                           ", outside the chunk [", a.pos0, ", ", a.pos0 + a.len, ")");
    write_token(a, row, i, row);
  }
  return {};
}

GpuStatus MutantDevice::partial_attention(const PartialAttentionParams& p) {
  if (buggy_softmax(path_)) {
    buggy_attention(m_, p);
    return {};
  }
  if (buggy_keys(path_)) return attention_with_keys(p);
  if (in_family(path_, {Mutant::gqa_head_mod, Mutant::gqa_local_ratio}))
    return attention_per_head(p);
  if (buggy_merges(path_)) {
    DCP_GPU_TRY(attention_buggy_split_merge(p));
    corrupt_empty_partials(p);
    return {};
  }
  return attention_with_args(p);
}

// The production attention with the bug in its arguments (or none).
GpuStatus MutantDevice::attention_with_args(PartialAttentionParams p) {
  // A scale applied twice: the cache's scales squared.
  const int64_t entries = p.kv.scale_entries();  // of each scale array (by head or by token)
  const auto squared = [&](const float* s) {
    std::vector<float> sq;
    for (int64_t e = 0; s != nullptr && e < entries; ++e) sq.push_back(s[e] * s[e]);
    return sq;
  };
  std::vector<float> twice, k_first, v_first, sink, slopes, q;
  std::vector<int32_t> tables;
  // The rank's local heads' sinks, each changed by f.
  const auto sinks = [&](auto f) {
    if (p.sink == nullptr) return;
    sink.assign(p.sink, p.sink + p.heads);
    for (float& x : sink) x = f(x);
    p.sink = sink.data();
  };
  // A scale array read as one scalar: its first entry for every KV head (and token).
  const auto first_only = [&](float* scale, std::vector<float>& into) -> float* {
    if (scale == nullptr) return nullptr;
    into.assign(static_cast<size_t>(entries), scale[0]);
    return into.data();
  };
  switch (m_) {
    case Mutant::k_scale_missing:
      p.kv.k_scale = nullptr;
      break;
    case Mutant::k_scale_twice:
      twice = squared(p.kv.k_scale);
      if (!twice.empty()) p.kv.k_scale = twice.data();
      break;
    case Mutant::v_scale_missing:
      p.kv.v_scale = nullptr;
      break;
    case Mutant::v_scale_twice:
      twice = squared(p.kv.v_scale);
      if (!twice.empty()) p.kv.v_scale = twice.data();
      break;
    case Mutant::block_table_ignored:  // a batch's tables made the identity too
      p.kv.block_table = nullptr;
      if (p.req != nullptr) {
        tables.resize(static_cast<size_t>(in_.requests() * p.table_stride));
        for (size_t i = 0; i < tables.size(); ++i)
          tables[i] = static_cast<int32_t>(static_cast<int64_t>(i) % p.table_stride);
        p.req_tables = tables.data();
      }
      break;
    case Mutant::prefix_pages_without_n:  // the shared prefix counted in pages of P, not P N
      if (p.req != nullptr) {
        tables.assign(p.req_tables, p.req_tables + in_.requests() * p.table_stride);
        const auto held = [&](int64_t b) {
          return pages_held(tables.data() + b * p.table_stride, p.table_stride);
        };
        const int64_t shared = in_.shared_prefix / p.kv.page;
        for (int64_t b = 1; b < in_.requests(); ++b)
          for (int64_t j = 0; j < std::min({shared, held(0), held(b)}); ++j)
            tables[static_cast<size_t>(b * p.table_stride + j)] = tables[static_cast<size_t>(j)];
        p.req_tables = tables.data();
      }
      break;
    case Mutant::block_table_by_position:  // a table per row: pool row of page position / P
      if (p.kv.block_table != nullptr) {
        const int64_t P = p.kv.page,
                      stride = p.req != nullptr ? p.table_stride : (p.kv.rows + P - 1) / P;
        const int32_t* src = p.req != nullptr ? p.req_tables : p.kv.block_table;
        const int64_t requests = p.req != nullptr ? in_.requests() : 1;
        tables.assign(static_cast<size_t>(requests * stride * P), -1);
        for (int64_t b = 0; b < requests; ++b) {
          const int32_t* t = src + b * stride;
          const int64_t pages = pages_held(t, stride);
          for (int64_t r = 0; pages > 0 && r < stride * P; ++r) {
            const int64_t page = std::min(p.layout.position(p.rank, r) / P, pages - 1);
            tables[static_cast<size_t>(b * stride * P + r)] =
                static_cast<int32_t>(t[page] * P + r % P);
          }
        }
        p.kv.page = 1;
        p.kv.block_table = tables.data();
        if (p.req != nullptr) {
          p.req_tables = tables.data();
          p.table_stride = stride * P;
        }
      }
      break;
    case Mutant::scale_missing:
      p.scale = 1.0f;
      break;
    case Mutant::scale_twice:
      p.scale *= p.scale;
      break;
    case Mutant::exp2_without_log2e:  // natural-unit logits taken as base-2 units
      if (p.base == LseBase::two) {
        p.scale /= gpu::kLog2eF;
        p.softcap /= gpu::kLog2eF;
        if (p.alibi_slopes != nullptr) {  // the logit's every natural-unit term
          slopes.assign(p.alibi_slopes, p.alibi_slopes + p.heads);
          for (float& m : slopes) m /= gpu::kLog2eF;
          p.alibi_slopes = slopes.data();
        }
      }
      break;
    case Mutant::sink_missing:
      p.sink = nullptr;
      break;
    case Mutant::sink_without_log2e:  // to_base_units then leaves it as it was given
      if (p.base == LseBase::two) sinks([](float x) { return x / gpu::kLog2eF; });
      break;
    case Mutant::sink_softcapped:
      if (p.softcap > 0.0f) sinks([c = p.softcap](float x) { return c * tanhf(x / c); });
      break;
    case Mutant::kv_scale_head0:
      p.kv.k_scale = first_only(p.kv.k_scale, k_first);
      p.kv.v_scale = first_only(p.kv.v_scale, v_first);
      break;
    case Mutant::kv_scales_swapped:
      std::swap(p.kv.k_scale, p.kv.v_scale);
      break;
    case Mutant::sink_on_every_rank:
      if (!in_.sink.empty()) p.sink = &in_.sink[static_cast<size_t>(p.head0)];
      break;
    case Mutant::q_gated_by_owner:  // the queries of tokens whose position another rank owns
      q.assign(p.q, p.q + p.tokens * p.heads * p.head_dim);
      for (int64_t t = 0; t < p.tokens; ++t)
        if (p.layout.owner(p.q_pos[t]) != p.rank)
          std::fill_n(&q[static_cast<size_t>(t * p.heads * p.head_dim)], p.heads * p.head_dim,
                      0.0f);
      p.q = q.data();
      break;
    default:
      break;
  }
  DCP_GPU_TRY(HostDevice::partial_attention(p));
  if (m_ == Mutant::lse_layout_transposed) {  // [T, H] stored as [H, T]
    const std::vector<float> lse(p.lse, p.lse + p.tokens * p.heads);
    for (int64_t t = 0; t < p.tokens; ++t)
      for (int64_t h = 0; h < p.heads; ++h)
        p.lse[h * p.tokens + t] = lse[static_cast<size_t>(t * p.heads + h)];
  }
  return {};
}

// Each head alone through the production attention, reading the KV head the bug maps it to.
GpuStatus MutantDevice::attention_per_head(const PartialAttentionParams& p) {
  const int64_t T = p.tokens, H = p.heads, dk = p.head_dim, dv = p.v_dim;
  std::vector<float> q(static_cast<size_t>(T * dk)), o(static_cast<size_t>(T * dv)),
      lse(static_cast<size_t>(T));
  for (int64_t h = 0; h < H; ++h) {
    const int64_t group = p.q_heads_total / p.kv_heads_total;
    const int64_t g =
        m_ == Mutant::gqa_head_mod
            ? std::clamp<int64_t>((p.head0 + h) % p.kv_heads_total - p.kv_head0, 0,
                                  p.kv.kv_heads - 1)
        : m_ == Mutant::gqa_local_ratio
            ? std::min<int64_t>(h / std::max<int64_t>(1, H / p.kv.kv_heads), p.kv.kv_heads - 1)
            : (p.head0 + h) / group - p.kv_head0;  // the production mapping
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(p.q + (t * H + h) * dk, dk, &q[static_cast<size_t>(t * dk)]);
    PartialAttentionParams ph = p;
    ph.q = q.data();
    ph.heads = 1;
    ph.q_heads_total = ph.kv_heads_total = 1;            // query head head0 reads KV head head0 ...
    ph.head0 = p.kv_head0 + g;                           // ... the local head g
    for (const gpu::HeadVector& hv : gpu::kHeadVectors)  // the sink, ALiBi's slopes: head h's
      if (p.*hv.param != nullptr) ph.*hv.param = p.*hv.param + h;
    ph.o = o.data();
    ph.lse = lse.data();
    DCP_GPU_TRY(HostDevice::partial_attention(ph));
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(&o[static_cast<size_t>(t * dv)], dv, p.o + (t * H + h) * dv);
      p.lse[t * H + h] = lse[static_cast<size_t>(t)];
    }
  }
  return {};
}

// The production attention over the keys the bug selects, handed to it as a top-k list.
GpuStatus MutantDevice::attention_with_keys(PartialAttentionParams p) {
  std::vector<std::vector<int64_t>> lists(static_cast<size_t>(p.tokens));
  int64_t k = 1;
  for (int64_t t = 0; t < p.tokens; ++t) {
    lists[static_cast<size_t>(t)] = visible_rows(m_, p, t);
    k = std::max<int64_t>(k, static_cast<int64_t>(lists[static_cast<size_t>(t)].size()));
  }
  std::vector<int64_t> topk(static_cast<size_t>(p.tokens * k), -1);
  for (int64_t t = 0; t < p.tokens; ++t) {
    const std::vector<int64_t>& l = lists[static_cast<size_t>(t)];
    for (size_t x = 0; x < l.size(); ++x)
      topk[static_cast<size_t>(t * k) + x] = p.layout.position(p.rank, l[x]);
  }
  p.topk = topk.data();
  p.topk_k = k;
  p.causal = false;  // the list already holds exactly the keys to read
  p.window = 0;
  // global_lengths reads rows past the request's own: their positions lie past its length, so
  // the body's range (positions below the request's length) is widened to every row it holds.
  std::vector<int64_t> wide;
  if (m_ == Mutant::global_lengths) {
    const gpu::DcpLayout& lay = p.layout;
    const int64_t rows = std::max(p.kv.rows, p.table_stride * p.kv.page);
    const int64_t seq = (rows / lay.interleave + 1) * lay.interleave * lay.ranks;
    p.seq = seq;
    p.rows = lay.count(p.rank, seq);
    if (p.req != nullptr) {
      wide.assign(static_cast<size_t>(in_.requests()), seq);
      p.req_seq = wide.data();
    }
  }
  return HostDevice::partial_attention(p);
}

// The production attention blocks, then the split partials merged with the buggy merge.
GpuStatus MutantDevice::attention_buggy_split_merge(const PartialAttentionParams& p) {
  std::vector<float> split_o, split_lse;
  DCP_GPU_TRY(attention_blocks(p, split_o, split_lse));
  const int64_t rows = p.tokens * p.heads, dv = p.v_dim;
  for (int64_t x = 0; x < rows; ++x) {
    MergeAcc total = MergeAcc::from_partial(split_lse[static_cast<size_t>(x)]);
    float* o = p.o + x * dv;
    std::copy_n(&split_o[static_cast<size_t>(x * dv)], dv, o);
    for (int64_t sp = 1; sp < p.splits; ++sp)
      merge_into(m_, {p.base, p.exp}, total, o,
                 MergeAcc::from_partial(split_lse[static_cast<size_t>(sp * rows + x)]),
                 &split_o[static_cast<size_t>((sp * rows + x) * dv)], dv);
    p.lse[x] = finish(m_, {p.base, p.exp}, total, o, dv);
    for (int64_t sp = 0; m_ == Mutant::empty_split_clobbers && sp < p.splits; ++sp)
      if (gpu::is_empty_lse(split_lse[static_cast<size_t>(sp * rows + x)]))
        p.lse[x] = split_lse[static_cast<size_t>(sp * rows + x)];  // its -inf over the merged LSE
  }
  return {};
}

// Empty partials as the empty-shard bugs report them.
void MutantDevice::corrupt_empty_partials(const PartialAttentionParams& p) const {
  const int64_t rows = p.tokens * p.heads;
  for (int64_t x = 0; x < rows; ++x) {
    if (!gpu::is_empty_lse(p.lse[x])) continue;
    if (m_ == Mutant::empty_lse_zero) p.lse[x] = 0.0f;
    if (m_ == Mutant::empty_lse_pos_inf) p.lse[x] = -gpu::kEmptyLseF;
    if (m_ == Mutant::empty_nan_leak)  // 0 / 0
      std::fill_n(p.o + x * p.v_dim, p.v_dim, std::numeric_limits<float>::quiet_NaN());
  }
}

GpuStatus MutantDevice::agrs_scale(const body::AgRsScale<Schedule>& a) {
  if (m_ == Mutant::rs_lse_wrong_slice) {  // the next rank's slice of the group LSE
    body::AgRsScale<Schedule> b = a;
    b.me = (a.me + 1) % a.shape.ranks;
    return HostDevice::agrs_scale(b);
  }
  if (m_ == Mutant::rs_bf16_claimed_f32 && a.merge == gpu::StorageFormat::f32) {
    body::AgRsScale<Schedule> b = a;
    b.merge = gpu::StorageFormat::bf16;
    return HostDevice::agrs_scale(b);
  }
  if (!buggy_merges(path_)) {
    DCP_GPU_TRY(HostDevice::agrs_scale(a));
  } else {
    const body::CombineShape& sh = a.shape;
    const int64_t n = sh.ranks, hg = sh.group_heads(), dv = sh.v_dim;
    std::vector<MergeAcc> acc(static_cast<size_t>(n));
    for (int64_t y = 0; y < sh.dest_rows(); ++y) {
      const int64_t dst = y / (sh.tokens * sh.local_heads), t = y / sh.local_heads % sh.tokens,
                    hl = y % sh.local_heads, x = sh.group_head_of(y);
      for (int64_t r = 0; r < n; ++r)
        acc[static_cast<size_t>(r)] = MergeAcc::from_partial(a.lse_all[r * sh.tokens * hg + x]);
      std::vector<float> num(static_cast<size_t>(n), 0.0f);
      float unused = 0.0f;
      const Exponential base{a.base, a.exp};
      const float lg = fold(m_, base, a.sched, acc, num, 0, &unused);
      const float lr = a.partial_lse[x];
      const float w = gpu::is_empty_lse(lr) ? 0.0f : gpu::pow_base(base, lr - lg);
      for (int64_t i = 0; i < dv; ++i)
        a.send[y * dv + i] = gpu::round_to(a.merge, w * a.partial_o[x * dv + i]);
      if (dst == a.me) a.lse_out[t * sh.local_heads + hl] = lg;
    }
  }
  if (m_ == Mutant::lse_out_wrong_base)
    for (int64_t i = 0; i < a.shape.tokens * a.shape.local_heads; ++i)
      a.lse_out[i] =
          a.base == LseBase::e ? a.lse_out[i] * gpu::kLog2eF : a.lse_out[i] / gpu::kLog2eF;
  return {};
}

GpuStatus MutantDevice::a2a_pack(const body::A2aPack& a) {
  DCP_GPU_TRY(HostDevice::a2a_pack(a));
  const body::CombineShape& sh = a.shape;
  const int64_t w = sh.v_dim + 1, block = sh.tokens * sh.local_heads * w;
  if (m_ == Mutant::a2a_slices_permuted) {  // destination d gets the heads of d + 1
    const std::vector<float> packed(a.send, a.send + sh.ranks * block);
    for (int64_t d = 0; d < sh.ranks; ++d)
      std::copy_n(&packed[static_cast<size_t>((d + 1) % sh.ranks * block)], block,
                  a.send + d * block);
  }
  if (m_ == Mutant::a2a_lse_bf16)
    for (int64_t y = 0; y < sh.dest_rows(); ++y)
      a.send[y * w + sh.v_dim] = gpu::round_bf16(a.send[y * w + sh.v_dim]);
  return {};
}

GpuStatus MutantDevice::a2a_combine(const body::A2aCombine<Schedule>& a) {
  if (!buggy_merges(path_)) {
    DCP_GPU_TRY(HostDevice::a2a_combine(a));
  } else {
    const body::CombineShape& sh = a.shape;
    const int64_t n = sh.ranks, dv = sh.v_dim, w = dv + 1, block = sh.tokens * sh.local_heads * w;
    std::vector<MergeAcc> acc(static_cast<size_t>(n));
    std::vector<float> num(static_cast<size_t>(n * dv));
    for (int64_t y = 0; y < sh.tokens * sh.local_heads; ++y) {
      for (int64_t r = 0; r < n; ++r) {
        const float* in = a.recv + r * block + y * w;
        acc[static_cast<size_t>(r)] = MergeAcc::from_partial(in[dv]);
        std::copy_n(in, dv, &num[static_cast<size_t>(r * dv)]);
      }
      a.lse[y] = fold(m_, {a.base, a.exp}, a.sched, acc, num, dv, a.o + y * dv);
    }
  }
  if (m_ == Mutant::lse_out_wrong_base)
    for (int64_t i = 0; i < a.shape.tokens * a.shape.local_heads; ++i)
      a.lse[i] = a.base == LseBase::e ? a.lse[i] * gpu::kLog2eF : a.lse[i] / gpu::kLog2eF;
  return {};
}

}  // namespace

bool planted_in_step(Mutant m) { return m != Mutant::none && (mutant_info(m).where & kInStep); }

gpu::RankStep mutant_step(Mutant m, bool planted) {
  return [m, planted](gpu::Communicator& comm, const gpu::DcpInputs& in, const gpu::DcpConfig& cfg,
                      int64_t tp_rank) -> gpu::Result<gpu::RankStepOutput> {
    MutantDevice dev(comm, m, planted, in, cfg);
    return gpu::device_step(dev, in, cfg, tp_rank);
  };
}

}  // namespace dcp::mutants
