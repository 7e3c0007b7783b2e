// kernel_bodies.hpp — what each thread of each CUDA kernel computes, as host-and-device code.
//
// kernels.cu's __global__ kernels are thin wrappers: they compute a thread's indices from
// blockIdx/threadIdx and call the body here. The same bodies compile with g++, so
// tests/cuda_host runs them on the CPU — every thread of every block, the attention block's
// threads concurrently with real barriers (a block emulator) — and checks them bit for bit
// against the host backend. What that cannot check is the CUDA plumbing around them: launches,
// device memory, streams, the shuffle-based block max, the communicators.
//
// Compiled as C++17 by nvcc (kernels.hpp); every function is DCP_HD. The attention body takes a
// Block: tid(), size(), sync() (all threads of the block meet) and max(v) (the block-wide max of
// every thread's v, synchronizing as it needs).
//
//   body::partial_attention(block, p, topk_rows, topk_counts, split_o, split_lse, row, sp, qs, s);
#pragma once

#include <cstdint>

#include "gpu/convention.hpp"
#include "gpu/dtype.hpp"
#include "gpu/hd.hpp"
#include "gpu/layout.hpp"
#include "gpu/merge.hpp"
#include "gpu/partial_attention.hpp"

namespace dcp::gpu {

// The merge and sum kernels keep one slot per rank in registers/local memory.
inline constexpr int64_t kMaxDeviceRanks = 64;

// Threads of an attention block; each owns up to kMaxVPerThread of the Dv output components.
inline constexpr int64_t kAttentionThreads = 128;
inline constexpr int64_t kMaxVPerThread = 8;
inline constexpr int64_t kMaxAttentionVDim = kAttentionThreads * kMaxVPerThread;  // 1024

// A ReduceOrder as the device runs it: fold src[i] into dst[i] for i < steps, the result in
// slot root. Built on the host by reduce_slots (merge.hpp), so both backends reduce in the same
// tree.
struct ReduceSchedule {
  int32_t ranks = 1, steps = 0, root = 0;
  int8_t dst[kMaxDeviceRanks] = {}, src[kMaxDeviceRanks] = {};
};

// One rank's cache in device memory: k [rows, kv_heads, Dk], v [rows, kv_heads, Dv] (v == k
// for a shared latent), written [rows] 1 where a token was stored.
struct DeviceCacheView {
  float* k = nullptr;
  float* v = nullptr;
  uint8_t* written = nullptr;
};

namespace body {

// ---- KV write: one thread per (chunk row i, KV head, component) --------------------------------

struct KvWrite {
  DcpLayout layout;
  int64_t rank = 0, pos0 = 0, len = 0, heads = 1, dk = 1, dv = 1;
  bool latent = false;
  Dtype dtype = Dtype::f32;
  const float* k = nullptr;  // [len, heads, dk]
  const float* v = nullptr;  // [len, heads, dv]; unused for a latent
  DeviceCacheView cache;
};

DCP_HD inline int64_t kv_write_threads(const KvWrite& a) {
  return a.len * a.heads * (a.dk + (a.latent ? 0 : a.dv));
}

// Thread x: the owner of the chunk's row keeps the component at layout.row(pos), rounded.
DCP_HD inline void kv_write(const KvWrite& a, int64_t x) {
  const int64_t width = a.dk + (a.latent ? 0 : a.dv);
  if (x >= kv_write_threads(a)) return;
  const int64_t i = x / (a.heads * width), h = x / width % a.heads, c = x % width;
  const int64_t pos = a.pos0 + i;
  if (a.layout.owner(pos) != a.rank) return;
  const int64_t row = a.layout.row(pos);
  if (c < a.dk)
    a.cache.k[(row * a.heads + h) * a.dk + c] =
        round_to(a.dtype, a.k[(i * a.heads + h) * a.dk + c]);
  else
    a.cache.v[(row * a.heads + h) * a.dv + (c - a.dk)] =
        round_to(a.dtype, a.v[(i * a.heads + h) * a.dv + (c - a.dk)]);
  if (h == 0 && c == 0) a.cache.written[row] = 1;
}

// ---- partial attention ------------------------------------------------------------------------

// The key range [lo, hi) of global positions the masks leave query t (empty when hi <= lo).
struct KeyRange {
  int64_t lo = 0, hi = 0;
};
DCP_HD inline KeyRange key_range(const PartialAttentionParams& p, int64_t t) {
  const int64_t qp = p.q_pos[t];
  KeyRange r;
  r.hi = p.causal ? (p.seq < qp + 1 ? p.seq : qp + 1) : p.seq;
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

// One block per (token, head) `row_block` = t * heads + h and split `sp`: the split's keys in
// tiles of p.tile, online softmax, as partial_attention.cpp computes it. qs [Dk] and s [tile]
// are the block's shared memory. Writes the split's (O_s, L_s) to split_o [splits, T, H, Dv],
// split_lse [splits, T, H].
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Block>
DCP_HD void partial_attention(Block& blk, const PartialAttentionParams& p, const int64_t* topk_rows,
                              const int64_t* topk_counts, float* split_o, float* split_lse,
                              int64_t row_block, int64_t sp, float* qs, float* s) {
  const int64_t t = row_block / p.heads, h = row_block % p.heads;
  const int64_t dk = p.head_dim, dv = p.v_dim;
  const int tid = blk.tid(), nt = blk.size();
  const LseBase base = p.base;
  for (int64_t i = tid; i < dk; i += nt) qs[i] = p.q[(t * p.heads + h) * dk + i];

  // The rank's visible keys: a row range, or the token's sorted top-k rows.
  int64_t nk = 0, r_lo = 0;
  const int64_t* list = nullptr;
  if (topk_rows != nullptr) {
    nk = topk_counts[t];
    list = topk_rows + t * p.topk_k;
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

  MergeAcc a;  // running (m, z) of this split, identical in every thread
  float num[kMaxVPerThread];
  for (int j = 0; j < kMaxVPerThread; ++j) num[j] = 0.0f;
  blk.sync();  // qs complete
  for (int64_t t0 = k0; t0 < k1; t0 += p.tile) {
    const int64_t t1 = k1 < t0 + p.tile ? k1 : t0 + p.tile;
    float m_loc = kEmptyLseF;
    for (int64_t x = t0 + tid; x < t1; x += nt) {
      const int64_t row = list != nullptr ? list[x] : r_lo + x;
      const float* kr = p.k + (row * p.kv_heads + g) * dk;
      float dot = 0.0f;
      for (int64_t i = 0; i < dk; ++i) dot += qs[i] * kr[i];
      float sc = dot * p.scale;
      if (p.softcap > 0.0f) sc = p.softcap * tanhf(sc / p.softcap);
      sc = to_base_units(base, sc);
      s[x - t0] = sc;
      m_loc = fmaxf(m_loc, sc);
    }
    const float m_tile = blk.max(m_loc);
    const float m_new = fmaxf(a.m, m_tile);
    const float alpha = is_empty_lse(a.m) ? 0.0f : pow_base(base, a.m - m_new);
    for (int64_t x = t0 + tid; x < t1; x += nt) s[x - t0] = pow_base(base, s[x - t0] - m_new);
    blk.sync();  // every weight of the tile written
    a.z *= alpha;
    for (int64_t x = t0; x < t1; ++x) a.z += s[x - t0];  // key order, as the host backend
    for (int j = 0; j < kMaxVPerThread; ++j) {
      const int64_t i = tid + static_cast<int64_t>(j) * nt;
      if (i >= dv) break;
      float n = num[j] * alpha;
      for (int64_t x = t0; x < t1; ++x) {
        const int64_t row = list != nullptr ? list[x] : r_lo + x;
        n += s[x - t0] * p.v[row * p.v_row_stride + g * p.v_head_stride + i];
      }
      num[j] = n;
    }
    a.m = m_new;
    blk.sync();  // s is rewritten by the next tile
  }
  if (p.sink != nullptr && sp == 0) {  // the sink joins split 0's denominator only
    const float sg = to_base_units(base, p.sink[h]);
    const float m_new = fmaxf(a.m, sg);
    const float alpha = is_empty_lse(a.m) ? 0.0f : pow_base(base, a.m - m_new);
    a.z = a.z * alpha + pow_base(base, sg - m_new);
    for (int j = 0; j < kMaxVPerThread; ++j) num[j] *= alpha;
    a.m = m_new;
  }
  const int64_t row_out = (sp * p.tokens + t) * p.heads + h;
  float l = kEmptyLseF;
  for (int j = 0; j < kMaxVPerThread; ++j) {
    const int64_t i = tid + static_cast<int64_t>(j) * nt;
    if (i >= dv) break;
    l = finish(base, a, &num[j], 1);
    split_o[row_out * dv + i] = num[j];
  }
  if (tid == 0) split_lse[row_out] = l;
}

// Block x = t * H + h, thread tid of nt: merges the splits left to right (the local combine),
// per component.
DCP_HD inline void split_combine(int64_t splits, int64_t rows, int64_t dv, LseBase base,
                                 const float* split_o, const float* split_lse, float* o, float* lse,
                                 int64_t x, int tid, int nt) {
  for (int64_t i = tid; i < dv; i += nt) {
    MergeAcc total = MergeAcc::from_partial(split_lse[x]);
    float n = split_o[x * dv + i];
    for (int64_t sp = 1; sp < splits; ++sp)
      merge_into(base, total, &n, MergeAcc::from_partial(split_lse[sp * rows + x]),
                 &split_o[(sp * rows + x) * dv + i], 1);
    const float l = finish(base, total, &n, 1);
    o[x * dv + i] = n;
    if (i == 0) lse[x] = l;
  }
}

// ---- combine ----------------------------------------------------------------------------------

// Block y = (dst, t, hl) of N x T x Hl, thread tid of nt: after the LSE AllGather
// (lse_all [N, T, Hg]), the group LSE of head x = t Hg + dst Hl + hl by the schedule, and
// send [dst, t, hl, :] = base^(L_r - L) O_r[x] (0 for an empty partial); the rank's own slice of
// L goes to lse_out [T, Hl].
DCP_HD inline void agrs_scale(const float* partial_o, const float* partial_lse,
                              const float* lse_all, int64_t tokens, int64_t hl_n, int64_t dv,
                              int64_t me, LseBase base, const ReduceSchedule& sched, float* send,
                              float* lse_out, int64_t y, int tid, int nt) {
  const int64_t n = sched.ranks, hg = n * hl_n;
  const int64_t dst = y / (tokens * hl_n), t = y / hl_n % tokens, hl = y % hl_n;
  const int64_t x = t * hg + dst * hl_n + hl;
  MergeAcc acc[kMaxDeviceRanks];
  for (int64_t r = 0; r < n; ++r) acc[r] = MergeAcc::from_partial(lse_all[r * tokens * hg + x]);
  for (int32_t st = 0; st < sched.steps; ++st)
    merge_into(base, acc[sched.dst[st]], nullptr, acc[sched.src[st]], nullptr, 0);
  const float lg = finish(base, acc[sched.root], nullptr, 0);
  const float lr = partial_lse[x];
  const float w = is_empty_lse(lr) ? 0.0f : pow_base(base, lr - lg);
  for (int64_t i = tid; i < dv; i += nt) send[y * dv + i] = w * partial_o[x * dv + i];
  if (dst == me && tid == 0) lse_out[t * hl_n + hl] = lg;
}

// Block y = (dst, t, hl): send [dst, t, hl, 0 .. Dv) = O_r of head dst Hl + hl, then its L_r.
DCP_HD inline void a2a_pack(const float* partial_o, const float* partial_lse, int64_t tokens,
                            int64_t hl_n, int64_t dv, int64_t ranks, float* send, int64_t y,
                            int tid, int nt) {
  const int64_t dst = y / (tokens * hl_n), t = y / hl_n % tokens, hl = y % hl_n;
  const int64_t x = t * ranks * hl_n + dst * hl_n + hl;
  float* out = send + y * (dv + 1);
  for (int64_t i = tid; i < dv; i += nt) out[i] = partial_o[x * dv + i];
  if (tid == 0) out[dv] = partial_lse[x];
}

// Block y = t * Hl + hl: merges the N received partials (recv [N, T, Hl, Dv + 1]) by the
// schedule into o [T, Hl, Dv] and lse [T, Hl], per component.
DCP_HD inline void a2a_combine(const float* recv, int64_t tokens, int64_t hl_n, int64_t dv,
                               LseBase base, const ReduceSchedule& sched, float* o, float* lse,
                               int64_t y, int tid, int nt) {
  const int64_t w = dv + 1, block = tokens * hl_n * w;
  for (int64_t i = tid; i < dv; i += nt) {
    MergeAcc acc[kMaxDeviceRanks];
    float num[kMaxDeviceRanks];
    for (int32_t r = 0; r < sched.ranks; ++r) {
      const float* in = recv + r * block + y * w;
      acc[r] = MergeAcc::from_partial(in[dv]);
      num[r] = in[i];
    }
    for (int32_t st = 0; st < sched.steps; ++st)
      merge_into(base, acc[sched.dst[st]], &num[sched.dst[st]], acc[sched.src[st]],
                 &num[sched.src[st]], 1);
    float out = num[sched.root];
    const float l = finish(base, acc[sched.root], &out, 1);
    o[y * dv + i] = out;
    if (i == 0) lse[y] = l;
  }
}

// Element i: out[i] = sum of blocks[r][i] over the schedule's ranks, in its order.
DCP_HD inline void ordered_sum(const float* const* blocks, int64_t count,
                               const ReduceSchedule& sched, float* out, int64_t i) {
  if (i >= count) return;
  float v[kMaxDeviceRanks];
  for (int32_t r = 0; r < sched.ranks; ++r) v[r] = blocks[r][i];
  for (int32_t st = 0; st < sched.steps; ++st) v[sched.dst[st]] += v[sched.src[st]];
  out[i] = v[sched.root];
}

}  // namespace body
}  // namespace dcp::gpu
