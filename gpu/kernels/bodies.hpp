// bodies.hpp — what each thread of each kernel of the DCP step computes, written once for every
// device: the CUDA kernels (gpu/cuda/kernels.cu), the host device (gpu/host/host_device.hpp: each
// block one thread, run serially) and the CPU emulation of the CUDA grids (tests/cuda_emulated:
// every thread of every block, the attention block's threads with real barriers).
//
// A device's launcher computes a thread's indices and calls the body here with a params struct
// (plain types, device pointers). Compiled as C++17 by nvcc (kernels.hpp); every function is
// DCP_HD. The attention body takes a Block:
//   tid(), size()      this thread and the block's thread count
//   sync()             all threads of the block meet
//   max(v)             the block-wide max of every thread's v, synchronizing as it needs
//   v_slots(dv)        how many of the Dv output components one thread accumulates
//   accumulators(l)    where those live: l (a local float[kMaxVPerThread]) on the GPU, or the
//                      block's own storage of v_slots(dv) floats
// Combine bodies take a ReduceScheduleOf<Capacity> and their per-thread scratch of one slot per
// rank (acc, num, v): a local array of Capacity slots in a GPU thread, the ranks' slots on the
// host.
//
//   body::partial_attention(block, AttentionBlock{p, topk_rows, ...}, row, sp);
#pragma once

#include <cstdint>

#include "gpu/kernels/attention_params.hpp"
#include "gpu/kernels/convention.hpp"
#include "gpu/kernels/hd.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/layout.hpp"
#include "gpu/kernels/merge.hpp"
#include "gpu/kernels/storage_format.hpp"

namespace dcp::gpu {

// The merge and sum kernels keep one slot per rank in registers/local memory.
inline constexpr int64_t kMaxDeviceRanks = 64;

// Threads of an attention block; each owns up to kMaxVPerThread of the Dv output components.
inline constexpr int64_t kAttentionThreads = 128;
inline constexpr int64_t kMaxVPerThread = 8;
inline constexpr int64_t kMaxAttentionVDim = kAttentionThreads * kMaxVPerThread;  // 1024

// A ReduceOrder as a device runs it: fold src[i] into dst[i] for i < steps, the result in slot
// root; at most Capacity ranks. Built by make_schedule (launch_checks.hpp) from reduce_slots
// (merge.hpp), so every device reduces in the same tree.
template <int Capacity>
struct ReduceScheduleOf {
  static constexpr int kCapacity = Capacity;
  int32_t ranks = 1, steps = 0, root = 0;
  int16_t dst[Capacity] = {}, src[Capacity] = {};
};
using ReduceSchedule = ReduceScheduleOf<kMaxDeviceRanks>;

namespace body {

// ---- KV write: one thread per (chunk row i, KV head, component) --------------------------------

struct KvWrite {
  DcpLayout layout;
  int64_t rank = 0, pos0 = 0, len = 0;  // the chunk [pos0, pos0 + len), global positions
  bool latent = false;
  StorageFormat src = StorageFormat::f32;  // the chunk's elements (the cache's are cache.dtype)
  bool quantize = false;    // the chunk holds values (stored as x / scale), not stored elements
  const void* k = nullptr;  // [len, cache.kv_heads, cache.head_dim]
  const void* v = nullptr;  // [len, cache.kv_heads, cache.v_dim]; unused for a latent
  // Scales by token: the chunk's [len, cache.scale_heads] (v_scale == k_scale for a latent);
  // nullptr where the cache has none or its are by head.
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  KvView cache;
};

DCP_HD inline int64_t kv_write_width(const KvWrite& a) {
  return a.cache.head_dim + (a.latent ? 0 : a.cache.v_dim);
}
DCP_HD inline int64_t kv_write_threads(const KvWrite& a) {
  return a.len * a.cache.kv_heads * kv_write_width(a);
}

// The scale, by token, of chunk row i at KV head h from the chunk's scales (1 without them).
DCP_HD inline float chunk_scale(const KvWrite& a, const float* scales, int64_t i, int64_t h) {
  if (scales == nullptr) return 1.0f;
  const int64_t n = a.cache.scale_heads;
  return scales[i * n + (n == 1 ? 0 : h)];
}

// Thread x: the owner of the chunk's row keeps the component at layout.row(pos), rounded to the
// cache's format (divided by its scale first when the chunk holds values). By token, the thread
// of a key's (a value's) first component stores the row's K (V) scale in its slot's entry, as
// engines' quantizing writes do; by page, only the page's first row stores it in the page's entry
// (every row of a page carries the same scale, validate_inputs, and a rank's rows fill its pages
// from their first), so each entry has one writer. The component's own quantizing reads the
// chunk's scale, not that entry.
DCP_HD inline void kv_write(const KvWrite& a, int64_t x) {
  const int64_t width = kv_write_width(a), heads = a.cache.kv_heads, dk = a.cache.head_dim;
  if (x >= kv_write_threads(a)) return;
  const int64_t i = x / (heads * width), h = x / width % heads, c = x % width;
  const int64_t pos = a.pos0 + i;
  if (a.layout.owner(pos) != a.rank) return;
  const int64_t row = a.layout.row(pos);
  const bool by_token = a.cache.scales_written();  // by token or page: the chunk's
  const bool page_writer = a.cache.scale_grain != ScaleGrain::page || row % a.cache.page == 0;
  const bool scale_owner = by_token && page_writer && (a.cache.scale_heads > 1 || h == 0);
  // The scale the component is divided by when the chunk holds values: the chunk's by token or
  // page, else the cache's KV head's (1 without scales).
  if (c < dk) {
    const float e = load_element(a.src, a.k, (i * heads + h) * dk + c);
    const float sc = by_token ? chunk_scale(a, a.k_scale, i, h) : a.cache.k_scale_of(row, h);
    if (scale_owner && c == 0 && a.k_scale != nullptr)
      a.cache.k_scale[a.cache.scale_index(row, h)] = sc;
    a.cache.set_stored_key(row, h, c, a.quantize ? e / sc : e);
  } else {
    const float e = load_element(a.src, a.v, (i * heads + h) * a.cache.v_dim + (c - dk));
    const float sc = by_token ? chunk_scale(a, a.v_scale, i, h) : a.cache.v_scale_of(row, h);
    if (scale_owner && c == dk && a.v_scale != nullptr)
      a.cache.v_scale[a.cache.scale_index(row, h)] = sc;
    a.cache.set_stored_value(row, h, c - dk, a.quantize ? e / sc : e);
  }
  if (h == 0 && c == 0) a.cache.written[a.cache.slot(row)] = 1;
}

// ---- partial attention ------------------------------------------------------------------------

// Query t's context length (its request's in a batch) and the view of its request's rows.
DCP_HD inline int64_t token_seq(const PartialAttentionParams& p, int64_t t) {
  return p.req != nullptr ? p.req_seq[p.req[t]] : p.seq;
}
DCP_HD inline KvView token_view(const PartialAttentionParams& p, int64_t t) {
  KvView v = p.kv;
  if (p.req != nullptr) v.block_table = p.req_tables + p.req[t] * p.table_stride;
  return v;
}

// The key range [lo, hi) of global positions the masks leave query t (empty when hi <= lo).
struct KeyRange {
  int64_t lo = 0, hi = 0;
};
DCP_HD inline KeyRange key_range(const PartialAttentionParams& p, int64_t t) {
  const int64_t qp = p.q_pos[t], seq = token_seq(p, t);
  KeyRange r;
  r.hi = p.causal ? (seq < qp + 1 ? seq : qp + 1) : seq;
  r.lo = p.window > 0 ? (qp - p.window + 1 > 0 ? qp - p.window + 1 : 0) : 0;
  return r;
}

// Thread t (one per query token): the rank-local rows of the selected positions inside the
// token's key range that this rank owns, in increasing order (insertion sort: top-k lists are
// short). rows [T, topk_k], counts [T].
DCP_HD inline void topk_rows(const PartialAttentionParams& p, int64_t t, int64_t* rows,
                             int64_t* counts) {
  if (t >= p.tokens) return;
  const KeyRange kr = key_range(p, t);
  int64_t* out = rows + t * p.topk_k;
  int64_t n = 0;
  if (kr.hi > kr.lo) {
    for (int64_t x = 0; x < p.topk_k; ++x) {
      const int64_t pos = p.topk[t * p.topk_k + x];
      if (pos < kr.lo || pos >= kr.hi || p.layout.owner(pos) != p.rank) continue;  // -1 pads too
      const int64_t r = p.layout.row(pos);
      int64_t j = n++;
      for (; j > 0 && out[j - 1] > r; --j) out[j] = out[j - 1];
      out[j] = r;
    }
  }
  counts[t] = n;
}

// What one attention block reads and writes besides the parameters: the token's sorted top-k
// rows (topk_rows above; nullptr without top-k), the split partials split_o [splits, T, H, Dv]
// and split_lse [splits, T, H], and the block's shared memory qs [Dk] and s [tile].
struct AttentionBlock {
  const int64_t* topk_rows = nullptr;
  const int64_t* topk_counts = nullptr;
  float* split_o = nullptr;
  float* split_lse = nullptr;
  float* qs = nullptr;
  float* s = nullptr;
};

// One block per (token, head) `row_block` = t * heads + h and split `sp`: the split's keys in
// tiles of p.tile, online softmax. Writes the split's (O_s, L_s). F is the cache's format
// (p.kv.dtype), fixed for the key loops; partial_attention below picks it.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <StorageFormat F, class Block>
DCP_HD void partial_attention_as(Block& blk, const PartialAttentionParams& p,
                                 const AttentionBlock& b, int64_t row_block, int64_t sp) {
  const int64_t t = row_block / p.heads, h = row_block % p.heads;
  const int64_t dk = p.head_dim, dv = p.v_dim;
  const KvView kv = token_view(p, t);
  const int tid = blk.tid(), nt = blk.size();
  const Exponential base{p.base, p.exp};
  float* const qs = b.qs;
  float* const s = b.s;
  for (int64_t i = tid; i < dk; i += nt)
    qs[i] = product_operand(p.tf32, p.q[(t * p.heads + h) * dk + i]);

  // The rank's visible keys: a row range, or the token's sorted top-k rows.
  int64_t nk = 0, r_lo = 0;
  const int64_t* list = nullptr;
  if (b.topk_rows != nullptr) {
    nk = b.topk_counts[t];
    list = b.topk_rows + t * p.topk_k;
  } else {
    const KeyRange kr = key_range(p, t);
    if (kr.hi > kr.lo) {
      r_lo = p.layout.count(p.rank, kr.lo);
      nk = p.layout.count(p.rank, kr.hi) - r_lo;
    }
  }
  const int64_t group = p.q_heads_total / p.kv_heads_total;
  const int64_t g = (p.head0 + h) / group - p.kv_head0;  // global map, then local
  const int64_t k0 = nk * sp / p.splits, k1 = nk * (sp + 1) / p.splits;
  // By head, the K scale folded into the logit scale and the V scale applied to the output; by
  // token or page, each key's K scale into its own logit scale and each value dequantized (a
  // product, one rounding) as it is read (exact without a scale).
  const bool by_token = kv.scales_by_row();
  const float v_scale = by_token ? 1.0f : kv.v_scale_of(0, g);

  MergeAcc a;  // running (m, z) of this split, identical in every thread
  float local[kMaxVPerThread];
  float* const num = blk.accumulators(local);
  const int64_t slots = blk.v_slots(dv);
  for (int64_t j = 0; j < slots; ++j) num[j] = 0.0f;
  blk.sync();  // qs complete
  for (int64_t t0 = k0; t0 < k1; t0 += p.tile) {
    const int64_t t1 = k1 < t0 + p.tile ? k1 : t0 + p.tile;
    float m_loc = kEmptyLseF;
    for (int64_t x = t0 + tid; x < t1; x += nt) {
      const int64_t row = list != nullptr ? list[x] : r_lo + x;
      float dot = 0.0f;
      for (int64_t i = 0; i < dk; ++i)
        dot += qs[i] * product_operand(p.tf32, kv.template key_as<F>(row, g, i));
      const float logit_scale = p.scale * kv.k_scale_of(row, g);
      const float sc = to_base_units(p.base, variant_logit(p, dot * logit_scale, t, h, row));
      s[x - t0] = sc;
      m_loc = fmaxf(m_loc, sc);
    }
    const float m_tile = blk.max(m_loc);
    const float m_new = fmaxf(a.m, m_tile);
    const float alpha = is_empty_lse(a.m) ? 0.0f : pow_base(base, a.m - m_new);
    for (int64_t x = t0 + tid; x < t1; x += nt) s[x - t0] = pow_base(base, s[x - t0] - m_new);
    blk.sync();  // every weight of the tile written
    a.z *= alpha;
    for (int64_t x = t0; x < t1; ++x) a.z += s[x - t0];  // key order
    for (int64_t j = 0; j < slots; ++j) {
      const int64_t i = tid + j * nt;
      if (i >= dv) break;
      float n = num[j] * alpha;
      for (int64_t x = t0; x < t1; ++x) {  // P rounded for the P.V product only
        const int64_t row = list != nullptr ? list[x] : r_lo + x;
        const float v = kv.template value_as<F>(row, g, i);
        n += product_operand(p.tf32, round_to(p.p_cast, s[x - t0])) *
             product_operand(p.tf32, by_token ? v * kv.v_scale_of(row, g) : v);
      }
      num[j] = n;
    }
    a.m = m_new;
    blk.sync();  // s is rewritten by the next tile
  }
  if (p.sink != nullptr && sp == 0) {  // the sink joins split 0's denominator only
    const float sg = to_base_units(p.base, p.sink[h]);
    const float m_new = fmaxf(a.m, sg);
    const float alpha = is_empty_lse(a.m) ? 0.0f : pow_base(base, a.m - m_new);
    a.z = a.z * alpha + pow_base(base, sg - m_new);
    for (int64_t j = 0; j < slots; ++j) num[j] *= alpha;
    a.m = m_new;
  }
  const int64_t row_out = (sp * p.tokens + t) * p.heads + h;
  float l = kEmptyLseF;
  for (int64_t j = 0; j < slots; ++j) {
    const int64_t i = tid + j * nt;
    if (i >= dv) break;
    l = finish(base, a, &num[j], 1);
    b.split_o[row_out * dv + i] = num[j] * v_scale;
  }
  if (tid == 0) b.split_lse[row_out] = l;
}

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Block>
DCP_HD void partial_attention(Block& blk, const PartialAttentionParams& p, const AttentionBlock& b,
                              int64_t row_block, int64_t sp) {
  with_format(p.kv.dtype,
              [&](auto f) { partial_attention_as<decltype(f)::value>(blk, p, b, row_block, sp); });
}

// The local combine of split-KV partials: split_o [splits, rows, Dv], split_lse [splits, rows]
// into o [rows, Dv], lse [rows] (rows = T * H).
struct SplitCombine {
  int64_t splits = 1, rows = 0, v_dim = 1;
  LseBase base = LseBase::e;
  ExpImpl exp = ExpImpl::libm;
  const float* split_o = nullptr;
  const float* split_lse = nullptr;
  float* o = nullptr;
  float* lse = nullptr;
};

// The local combine of p's splits: rows T * heads, into p.o and p.lse.
DCP_HD inline SplitCombine split_combine_of(const PartialAttentionParams& p, const float* split_o,
                                            const float* split_lse) {
  SplitCombine c;
  c.splits = p.splits;
  c.rows = p.tokens * p.heads;
  c.v_dim = p.v_dim;
  c.base = p.base;
  c.exp = p.exp;
  c.split_o = split_o;
  c.split_lse = split_lse;
  c.o = p.o;
  c.lse = p.lse;
  return c;
}

// Block x of a.rows, thread tid of nt: merges the splits left to right, per component.
DCP_HD inline void split_combine(const SplitCombine& a, int64_t x, int tid, int nt) {
  const int64_t dv = a.v_dim;
  for (int64_t i = tid; i < dv; i += nt) {
    MergeAcc total = MergeAcc::from_partial(a.split_lse[x]);
    float n = a.split_o[x * dv + i];
    for (int64_t sp = 1; sp < a.splits; ++sp)
      merge_into({a.base, a.exp}, total, &n, MergeAcc::from_partial(a.split_lse[sp * a.rows + x]),
                 &a.split_o[(sp * a.rows + x) * dv + i], 1);
    const float l = finish({a.base, a.exp}, total, &n, 1);
    a.o[x * dv + i] = n;
    if (i == 0) a.lse[x] = l;
  }
}

// ---- combine ----------------------------------------------------------------------------------

// The shapes every combine kernel shares: a rank's partial of its group's Hg = ranks * Hl heads,
// of which it keeps Hl; partial_o [T, Hg, Dv], partial_lse [T, Hg].
struct CombineShape {
  int64_t tokens = 1, local_heads = 1, v_dim = 1, ranks = 1;
  DCP_HD int64_t group_heads() const { return ranks * local_heads; }
  // Blocks of the per-destination kernels: one per (destination, t, hl).
  DCP_HD int64_t dest_rows() const { return ranks * tokens * local_heads; }
  // The group head x = t Hg + dst Hl + hl of block y = (dst, t, hl).
  DCP_HD int64_t group_head_of(int64_t y) const {
    const int64_t dst = y / (tokens * local_heads), t = y / local_heads % tokens,
                  hl = y % local_heads;
    return t * group_heads() + dst * local_heads + hl;
  }
};

// ag_rs after the LSE AllGather (lse_all [N, T, Hg]).
template <class Sched>
struct AgRsScale {
  CombineShape shape;
  int64_t me = 0;  // this rank's dcp rank
  LseBase base = LseBase::e;
  ExpImpl exp = ExpImpl::libm;
  StorageFormat merge = StorageFormat::f32;  // the reduce-scatter's format: send is rounded to it
  Sched sched;
  const float* partial_o = nullptr;
  const float* partial_lse = nullptr;
  const float* lse_all = nullptr;
  float* send = nullptr;     // [N, T, Hl, Dv]
  float* lse_out = nullptr;  // [T, Hl]
};

// Block y = (dst, t, hl), thread tid of nt: the group LSE of head x by the schedule, and
// send [dst, t, hl, :] = base^(L_r - L) O_r[x] (0 for an empty partial) in the merge format; the
// rank's own slice of L goes to lse_out.
template <class Sched>
DCP_HD void agrs_scale(const AgRsScale<Sched>& a, int64_t y, int tid, int nt, MergeAcc* acc) {
  const CombineShape& sh = a.shape;
  const int64_t n = a.sched.ranks, hg = sh.group_heads(), dv = sh.v_dim;
  const int64_t dst = y / (sh.tokens * sh.local_heads), t = y / sh.local_heads % sh.tokens,
                hl = y % sh.local_heads;
  const int64_t x = sh.group_head_of(y);
  for (int64_t r = 0; r < n; ++r)
    acc[r] = MergeAcc::from_partial(a.lse_all[r * sh.tokens * hg + x]);
  const Exponential base{a.base, a.exp};
  for (int32_t st = 0; st < a.sched.steps; ++st)
    merge_into(base, acc[a.sched.dst[st]], nullptr, acc[a.sched.src[st]], nullptr, 0);
  const float lg = finish(base, acc[a.sched.root], nullptr, 0);
  const float lr = a.partial_lse[x];
  const float w = is_empty_lse(lr) ? 0.0f : pow_base(base, lr - lg);
  for (int64_t i = tid; i < dv; i += nt)
    a.send[y * dv + i] = round_to(a.merge, w * a.partial_o[x * dv + i]);
  if (dst == a.me && tid == 0) a.lse_out[t * sh.local_heads + hl] = lg;
}

// a2a before the All-to-All: send [N, T, Hl, Dv + 1].
struct A2aPack {
  CombineShape shape;
  const float* partial_o = nullptr;
  const float* partial_lse = nullptr;
  float* send = nullptr;
};

// Block y = (dst, t, hl): send [dst, t, hl, 0 .. Dv) = O_r of head dst Hl + hl, then its L_r.
DCP_HD inline void a2a_pack(const A2aPack& a, int64_t y, int tid, int nt) {
  const int64_t dv = a.shape.v_dim, x = a.shape.group_head_of(y);
  float* out = a.send + y * (dv + 1);
  for (int64_t i = tid; i < dv; i += nt) out[i] = a.partial_o[x * dv + i];
  if (tid == 0) out[dv] = a.partial_lse[x];
}

// a2a after the All-to-All: recv [N, T, Hl, Dv + 1] into o [T, Hl, Dv] and lse [T, Hl].
template <class Sched>
struct A2aCombine {
  CombineShape shape;
  LseBase base = LseBase::e;
  ExpImpl exp = ExpImpl::libm;
  Sched sched;
  const float* recv = nullptr;
  float* o = nullptr;
  float* lse = nullptr;
};

// Block y = t * Hl + hl: merges the N received partials by the schedule, per component.
template <class Sched>
DCP_HD void a2a_combine(const A2aCombine<Sched>& a, int64_t y, int tid, int nt, MergeAcc* acc,
                        float* num) {
  const int64_t dv = a.shape.v_dim, w = dv + 1, block = a.shape.tokens * a.shape.local_heads * w;
  const Sched& sc = a.sched;
  for (int64_t i = tid; i < dv; i += nt) {
    for (int32_t r = 0; r < sc.ranks; ++r) {
      const float* in = a.recv + r * block + y * w;
      acc[r] = MergeAcc::from_partial(in[dv]);
      num[r] = in[i];
    }
    const Exponential base{a.base, a.exp};
    for (int32_t st = 0; st < sc.steps; ++st)
      merge_into(base, acc[sc.dst[st]], &num[sc.dst[st]], acc[sc.src[st]], &num[sc.src[st]], 1);
    float out = num[sc.root];
    const float l = finish(base, acc[sc.root], &out, 1);
    a.o[y * dv + i] = out;
    if (i == 0) a.lse[y] = l;
  }
}

// Element i: out[i] = sum of blocks[r][i] over the schedule's ranks, in its order, every partial
// sum rounded to `accum` (f32: fp32 adds; bf16: a bf16 reduce-scatter's).
template <class Sched>
DCP_HD void ordered_sum(const float* const* blocks, int64_t count, const Sched& sched,
                        StorageFormat accum, float* out, int64_t i, float* v) {
  if (i >= count) return;
  for (int32_t r = 0; r < sched.ranks; ++r) v[r] = blocks[r][i];
  for (int32_t st = 0; st < sched.steps; ++st)
    v[sched.dst[st]] = round_to(accum, v[sched.dst[st]] + v[sched.src[st]]);
  out[i] = v[sched.root];
}

}  // namespace body
}  // namespace dcp::gpu
