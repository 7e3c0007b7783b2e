#include "gpu/mla_slice.hpp"

#include <algorithm>
#include <cmath>

#include "gpu/host/host_device.hpp"
#include "gpu/run_threads.hpp"

namespace dcp::gpu {
namespace {

AttentionDims latent_dims(const MlaDims& d) {
  return AttentionDims{d.tokens, d.heads, 1, d.kv_lora + d.rope, d.kv_lora, true};
}

// The attention-level inputs every rank shares: the latent rows [S, 1, Dl + Dr] with k_pe
// rotated in fp32 (the cache rounds them to its format on write) and the variant.
DcpInputs attention_inputs(const MlaInputs& in) {
  const MlaDims& d = in.dims;
  const int64_t dk = d.kv_lora + d.rope;
  DcpInputs a;
  a.dims = latent_dims(d);
  std::vector<float> k(static_cast<size_t>(in.seq * dk), 0.0f);
  for (int64_t j = 0; j < in.seq; ++j) {
    float* row = &k[static_cast<size_t>(j * dk)];
    std::copy_n(in.c_kv.data() + j * d.kv_lora, d.kv_lora, row);
    std::copy_n(in.k_pe.data() + j * d.rope, d.rope, row + d.kv_lora);
    if (in.apply_rope) rope_rotate(row + d.kv_lora, d.rope, j, in.rope_theta);
  }
  a.k = std::move(k);
  a.kv_dtype = in.kv_dtype;
  a.q_pos = in.q_pos;
  a.seq = in.seq;
  a.scale = in.scale;
  a.causal = in.causal;
  a.chunks = in.chunks;
  a.q.assign(static_cast<size_t>(d.tokens * d.heads * dk), 0.0f);  // per-rank q computed below
  return a;
}

// The absorbed queries [T, nh, Dl + Dr] of heads h0 .. h0 + nh - 1.
std::vector<float> absorbed_queries(const MlaInputs& in, int64_t h0, int64_t nh) {
  const MlaDims& d = in.dims;
  const int64_t dq = d.nope + d.rope, dk = d.kv_lora + d.rope;
  std::vector<float> out(static_cast<size_t>(d.tokens * nh * dk), 0.0f);
  std::vector<float> q(static_cast<size_t>(dq));
  for (int64_t t = 0; t < d.tokens; ++t)
    for (int64_t x = 0; x < nh; ++x) {
      const int64_t h = h0 + x;
      for (int64_t i = 0; i < dq; ++i) {  // q_b_proj
        const float* w = &in.w_qb[static_cast<size_t>((h * dq + i) * d.q_lora)];
        const float* c = &in.c_q[static_cast<size_t>(t * d.q_lora)];
        float acc = 0.0f;
        for (int64_t k = 0; k < d.q_lora; ++k) acc += w[k] * c[k];
        q[static_cast<size_t>(i)] = acc;
      }
      float* o = &out[static_cast<size_t>((t * nh + x) * dk)];
      for (int64_t l = 0; l < d.kv_lora; ++l) {  // Q-side absorb
        float acc = 0.0f;
        for (int64_t n = 0; n < d.nope; ++n)
          acc += q[static_cast<size_t>(n)] *
                 in.w_kc[static_cast<size_t>((h * d.nope + n) * d.kv_lora + l)];
        o[l] = acc;
      }
      std::copy_n(q.data() + d.nope, d.rope, o + d.kv_lora);
      if (in.apply_rope)
        rope_rotate(o + d.kv_lora, d.rope, in.q_pos[static_cast<size_t>(t)], in.rope_theta);
    }
  return out;
}

}  // namespace

void rope_rotate(float* x, int64_t dr, int64_t pos, float theta) {
  const int64_t half = dr / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float inv_freq = std::pow(theta, -static_cast<float>(2 * i) / static_cast<float>(dr));
    const float ang = static_cast<float>(pos) * inv_freq;
    const float c = std::cos(ang), s = std::sin(ang);
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

namespace {

// Tensor sizes of the MLA inputs (the attention-level checks follow on attention_inputs).
GpuStatus check_mla_shapes(const MlaInputs& in) {
  const MlaDims& d = in.dims;
  if (d.tokens < 1 || d.heads < 1 || d.q_lora < 1 || d.nope < 1 || d.rope < 0 || d.kv_lora < 1 ||
      d.v_head < 1)
    return DCP_GPU_ERROR("mla: dims must be >= 1 (rope >= 0)");
  if (d.rope % 2 != 0) return DCP_GPU_ERROR("mla: rope dims ", d.rope, " must be even");
  auto size = [](const char* n, size_t got, int64_t want) -> GpuStatus {
    if (got == static_cast<size_t>(want)) return {};
    return DCP_GPU_ERROR("tensor '", n, "': ", got, " elements; expected ", want);
  };
  DCP_GPU_TRY(size("w_qb", in.w_qb.size(), d.heads * (d.nope + d.rope) * d.q_lora));
  DCP_GPU_TRY(size("w_kc", in.w_kc.size(), d.heads * d.nope * d.kv_lora));
  DCP_GPU_TRY(size("w_vc", in.w_vc.size(), d.heads * d.kv_lora * d.v_head));
  DCP_GPU_TRY(size("c_q", in.c_q.size(), d.tokens * d.q_lora));
  DCP_GPU_TRY(size("c_kv", in.c_kv.size(), in.seq * d.kv_lora));
  return size("k_pe", in.k_pe.size(), in.seq * d.rope);
}

}  // namespace

Result<MlaRun> run_mla_threads(const MlaInputs& in, const DcpConfig& cfg) {
  DCP_GPU_TRY(check_mla_shapes(in));
  const MlaDims& d = in.dims;
  const DcpInputs att = attention_inputs(in);
  DCP_GPU_TRY(validate_inputs(att, cfg));
  const DcpGeometry geo = *DcpGeometry::create(cfg, att.dims);
  MlaRun run;
  run.out.assign(static_cast<size_t>(d.tokens * d.heads * d.v_head), 0.0f);
  run.lse.assign(static_cast<size_t>(d.tokens * d.heads), 0.0f);
  const int64_t dk = d.kv_lora + d.rope;
  run.q_att.assign(static_cast<size_t>(d.tokens * d.heads * dk), 0.0f);
  run.k_att.assign(static_cast<size_t>(in.seq * dk), 0.0f);
  DCP_GPU_TRY(for_each_tp_rank_threads(geo, cfg.deadline, [&](int64_t tp_rank, Communicator& comm) {
    Result<HostKvCache> cache = build_rank_cache(att, cfg, tp_rank);
    if (!cache) return cache.status();
    const int64_t h0 = cfg.replicate_q ? geo.group_head0(tp_rank) : geo.local_head0(tp_rank);
    const int64_t nh = cfg.replicate_q ? geo.hg : geo.h_loc;
    const std::vector<float> q = absorbed_queries(in, h0, nh);
    // Record the local heads' queries and the rows this rank stores (disjoint across ranks
    // of a group; group 0 records the cache, every rank its own heads).
    for (int64_t t = 0; t < d.tokens; ++t)
      for (int64_t hl = 0; hl < geo.h_loc; ++hl) {
        const int64_t h = geo.local_head0(tp_rank) + hl;
        std::copy_n(&q[static_cast<size_t>((t * nh + h - h0) * dk)], dk,
                    &run.q_att[static_cast<size_t>((t * d.heads + h) * dk)]);
      }
    if (geo.group(tp_rank) == 0) {
      const int64_t me = geo.dcp_rank(tp_rank);
      const KvView view = cache->view();
      for (int64_t row = 0; row < cfg.layout.count(me, in.seq); ++row)
        for (int64_t i = 0; i < dk; ++i)
          run.k_att[static_cast<size_t>(cfg.layout.position(me, row) * dk + i)] =
              view.key(row, 0, i) * view.k_scale_of(row, 0);
    }
    Result<RankStepOutput> r = run_tp_rank(comm, att, cfg, tp_rank, &q);
    if (!r) return r.status();
    // V-side absorb for the rank's own heads.
    for (int64_t t = 0; t < d.tokens; ++t)
      for (int64_t hl = 0; hl < geo.h_loc; ++hl) {
        const int64_t h = geo.local_head0(tp_rank) + hl;
        const float* o_lat = &r->o[static_cast<size_t>((t * geo.h_loc + hl) * d.kv_lora)];
        float* out = &run.out[static_cast<size_t>((t * d.heads + h) * d.v_head)];
        for (int64_t e = 0; e < d.v_head; ++e) {
          float acc = 0.0f;
          for (int64_t l = 0; l < d.kv_lora; ++l)
            acc += o_lat[l] * in.w_vc[static_cast<size_t>((h * d.kv_lora + l) * d.v_head + e)];
          out[e] = round_to(cfg.out_dtype, acc);
        }
        run.lse[static_cast<size_t>(t * d.heads + h)] =
            r->lse[static_cast<size_t>(t * geo.h_loc + hl)];
      }
    return GpuStatus();
  }));
  return run;
}

}  // namespace dcp::gpu
