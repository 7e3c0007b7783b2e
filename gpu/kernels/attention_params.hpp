// attention_params.hpp — one rank's partial attention: all gathered query heads against the
// tokens this rank owns, returning (O_r, LSE_r). The parameters every device's attention
// launcher takes (bodies.hpp computes it, thread by thread).
//
// Numerics: fp32 accumulation over inputs already rounded to their storage formats (with the
// exponential, P cast and tf32 operands of kernel_math.hpp), online softmax over tiles of `tile`
// keys, and an optional split of the rank's keys into `splits` contiguous pieces whose partials
// are merged locally (split-KV). Masks are evaluated on *global* positions: a rank's row r holds
// position layout.position(rank, r). Top-k indices are global positions selected for the whole
// group; each rank attends to the selected positions it owns. The sink (natural-log units) is
// added by the rank holding it only (convention.hpp). A row with nothing visible and no sink
// returns LSE = -inf and O = 0.
//
//   PartialAttentionParams p = rank_attention_params(in, cfg, geo, spec, tp_rank);
//   p.q = q_gathered;  p.kv = view;  ...  p.o = o;  p.lse = lse;
//   DCP_GPU_TRY(dev.partial_attention(p));   // fills p.o [T, heads, Dv] and p.lse [T, heads]
#pragma once

#include <cstdint>

#include "gpu/kernels/convention.hpp"
#include "gpu/kernels/kernel_math.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/layout.hpp"
#include "gpu/kernels/storage_format.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

struct PartialAttentionParams {
  // Queries: q [tokens, heads, head_dim], gathered heads head0 .. head0 + heads - 1 (global).
  const float* q = nullptr;
  int64_t tokens = 0, heads = 0, head_dim = 0, head0 = 0;
  // Model-wide head counts: query head h (global) reads KV head h / (q_heads_total /
  // kv_heads_total).
  int64_t q_heads_total = 0, kv_heads_total = 0;
  const int64_t* q_pos = nullptr;  // [tokens] global positions of the queries
  int64_t seq = 0;                 // S, the global context length (positions 0 .. S-1 exist)
                                   // (a batch: its longest request's)

  // This rank's cache, read through kv (kv_view.hpp): kv.kv_heads local KV heads from global
  // head kv_head0, v_dim values per head.
  DcpLayout layout;
  int64_t rank = 0;
  KvView kv;
  int64_t rows = 0;  // rows holding positions < seq: layout.count(rank, seq)
  int64_t kv_head0 = 0, v_dim = 0;

  // A batch of requests over one paged pool (dcp_step.hpp, DcpInputs' batch): token t belongs to
  // request req[t], whose context is req_seq[req[t]] positions (q_pos, topk and the masks count
  // positions within the request), its rows placed through block table req_tables + req[t] *
  // table_stride (it replaces kv.block_table). nullptr: one request of seq positions.
  int64_t requests = 0;                 // B (with req)
  const int64_t* req = nullptr;         // [tokens]
  const int64_t* req_seq = nullptr;     // [requests]
  const int32_t* req_tables = nullptr;  // [requests, table_stride]
  int64_t table_stride = 0;

  // The case's variant (global positions, natural-log units).
  float scale = 0.0f;    // softmax scale; the body folds each key's k_scale into it (scale *
                         // k_scale, one rounding) and applies v_scale to the partial output (by
                         // head) or to each value as it is read (by token: kv_view.hpp)
  bool causal = true;    // key pos <= query pos
  int64_t window = 0;    // > 0: key pos > query pos - window
  float softcap = 0.0f;  // > 0: s <- softcap * tanh(s / softcap)
  const float* sink = nullptr;  // [heads] sink logits on the rank holding the sink, else nullptr
  const float* alibi_slopes = nullptr;  // [heads] ALiBi slopes (natural-log units per position)
  const int64_t* topk = nullptr;  // [tokens, topk_k] global positions, -1 padding; nullptr: none
  int64_t topk_k = 0;

  // Kernel conventions.
  LseBase base = LseBase::e;
  int64_t tile = 64;   // keys per online-softmax tile
  int64_t splits = 1;  // split-KV pieces of the rank's keys, merged locally
  // Kernel arithmetic (kernel_math.hpp): the exponential, P's rounding before P.V (f32: none)
  // and tf32 product operands.
  ExpImpl exp = ExpImpl::libm;
  StorageFormat p_cast = StorageFormat::f32;
  bool tf32 = false;

  float* o = nullptr;    // [tokens, heads, v_dim] partial outputs
  float* lse = nullptr;  // [tokens, heads] partial LSEs, base `base`
};

// The variant's logit of the key in rank-local row `row` for query token t, local head h, from
// the scaled product s = scale * k_scale * q.k (natural-log units): the softcap, then ALiBi's
// bias -m_h |j - i| on the key's global position j (its request's, in a batch) and the query's i.
// The kernel body calls it, and so does the planted copy of the attention at the device seam.
DCP_HD inline float variant_logit(const PartialAttentionParams& p, float s, int64_t t, int64_t h,
                                  int64_t row) {
  if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
  if (p.alibi_slopes != nullptr) {
    const int64_t d = p.layout.position(p.rank, row) - p.q_pos[t];
    s -= p.alibi_slopes[h] * static_cast<float>(d < 0 ? -d : d);
  }
  return s;
}

// Checks the parameters' shapes, heads, rows and settings (one-line errors naming the field);
// reads no tensor, so it serves device pointers as well (the CUDA backend's launcher).
GpuStatus validate_partial_attention(const PartialAttentionParams& p);

}  // namespace dcp::gpu
