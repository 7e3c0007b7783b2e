#include "gpu/dcp_step.hpp"

#include <algorithm>
#include <cmath>

#include "gpu/mutants.hpp"
#include "gpu/partial_attention.hpp"

namespace dcp::gpu {

Result<DcpGeometry> DcpGeometry::create(const DcpConfig& cfg, const AttentionDims& d) {
  DCP_GPU_TRY(validate_layout(cfg.layout));
  const int64_t n = cfg.layout.ranks;
  if (cfg.tp_size < 1) return DCP_GPU_ERROR("--tp-size: got ", cfg.tp_size, "; expected >= 1");
  if (cfg.tp_size % n != 0)
    return DCP_GPU_ERROR("--tp-size ", cfg.tp_size, " is not a multiple of --dcp-size ", n);
  if (d.tokens < 1 || d.q_heads < 1 || d.kv_heads < 1 || d.head_dim < 1 || d.v_dim < 1)
    return DCP_GPU_ERROR("shape: tokens, heads, kv-heads, head-dim, v-dim must be >= 1");
  if (d.q_heads % d.kv_heads != 0)
    return DCP_GPU_ERROR("--heads ", d.q_heads, " is not a multiple of --kv-heads ", d.kv_heads);
  if (d.q_heads % cfg.tp_size != 0)
    return DCP_GPU_ERROR("--heads ", d.q_heads, " is not a multiple of --tp-size ", cfg.tp_size);
  if (d.shared_latent && d.v_dim > d.head_dim)
    return DCP_GPU_ERROR("--v-dim ", d.v_dim, " exceeds --head-dim ", d.head_dim,
                         " for a shared latent");
  if (cfg.tile < 1) return DCP_GPU_ERROR("--tile: got ", cfg.tile, "; expected >= 1");
  if (cfg.splits < 1) return DCP_GPU_ERROR("--splits: got ", cfg.splits, "; expected >= 1");
  DcpGeometry g;
  g.n = n;
  g.tp = cfg.tp_size;
  g.h_loc = d.q_heads / cfg.tp_size;
  g.hg = n * g.h_loc;
  g.group_size = d.q_heads / d.kv_heads;
  return g;
}

GpuStatus validate_inputs(const DcpInputs& in, const DcpConfig& cfg) {
  const AttentionDims& d = in.dims;
  Result<DcpGeometry> geo = DcpGeometry::create(cfg, d);
  if (!geo) return geo.status();
  const int64_t T = d.tokens, S = in.seq;
  auto size_err = [](const char* name, size_t got, int64_t want) {
    return DCP_GPU_ERROR("tensor '", name, "': ", got, " elements; expected ", want);
  };
  if (S < 0) return DCP_GPU_ERROR("--seq: got ", S, "; expected >= 0");
  if (in.q.size() != static_cast<size_t>(T * d.q_heads * d.head_dim))
    return size_err("q", in.q.size(), T * d.q_heads * d.head_dim);
  if (in.k.size() != static_cast<size_t>(S * d.kv_heads * d.head_dim))
    return size_err("k", in.k.size(), S * d.kv_heads * d.head_dim);
  if (!d.shared_latent && in.v.size() != static_cast<size_t>(S * d.kv_heads * d.v_dim))
    return size_err("v", in.v.size(), S * d.kv_heads * d.v_dim);
  if (d.shared_latent && !in.v.empty())
    return DCP_GPU_ERROR("tensor 'v': must be empty for a shared latent");
  if (in.q_pos.size() != static_cast<size_t>(T)) return size_err("q_pos", in.q_pos.size(), T);
  for (int64_t t = 0; t < T; ++t) {
    if (in.q_pos[static_cast<size_t>(t)] < 0)
      return DCP_GPU_ERROR("tensor 'q_pos': element [", t, "] = ", in.q_pos[static_cast<size_t>(t)],
                           "; expected >= 0");
  }
  if (!in.sink.empty() && in.sink.size() != static_cast<size_t>(d.q_heads))
    return size_err("sink", in.sink.size(), d.q_heads);
  if (in.topk_k < 0) return DCP_GPU_ERROR("--topk: got ", in.topk_k, "; expected >= 0");
  if (!in.topk.empty()) {
    if (in.topk.size() != static_cast<size_t>(T * in.topk_k))
      return size_err("topk", in.topk.size(), T * in.topk_k);
    for (size_t x = 0; x < in.topk.size(); ++x) {
      const int64_t p = in.topk[x];
      if (p < -1 || p >= S)
        return DCP_GPU_ERROR("tensor 'topk': element [", static_cast<int64_t>(x) / in.topk_k, ", ",
                             static_cast<int64_t>(x) % in.topk_k, "] = ", p,
                             "; expected -1 or a position in [0, ", S, ")");
    }
  }
  if (in.window < 0) return DCP_GPU_ERROR("--window: got ", in.window, "; expected >= 0");
  if (!(in.softcap >= 0.0f)) return DCP_GPU_ERROR("--softcap: got ", in.softcap, "; expected >= 0");
  int64_t sum = 0;
  for (size_t i = 0; i < in.chunks.size(); ++i) {
    if (in.chunks[i] < 0)
      return DCP_GPU_ERROR("chunks: element [", i, "] = ", in.chunks[i], "; expected >= 0");
    sum += in.chunks[i];
  }
  if (!in.chunks.empty() && sum != S)
    return DCP_GPU_ERROR("chunks: lengths sum to ", sum, "; expected the context length ", S);
  return {};
}

Result<KvCacheSpec> rank_cache_spec(const DcpInputs& in, const DcpConfig& cfg, int64_t tp_rank) {
  Result<DcpGeometry> geo = DcpGeometry::create(cfg, in.dims);
  if (!geo) return geo.status();
  const AttentionDims& d = in.dims;
  const DcpLayout& lay = cfg.layout;
  const int64_t cycle = lay.interleave * lay.ranks;
  KvCacheSpec spec;
  spec.layout = lay;
  spec.rank = geo->dcp_rank(tp_rank);
  spec.physical_rows =
      in.physical_rows > 0 ? in.physical_rows : (in.seq + cycle - 1) / cycle * lay.interleave;
  spec.kv_head0 = geo->kv_head0(tp_rank);
  spec.kv_heads = geo->kv_heads(tp_rank);
  spec.head_dim = d.head_dim;
  spec.v_dim = d.v_dim;
  spec.shared_latent = d.shared_latent;
  spec.dtype = in.kv_dtype;
  return spec;
}

std::vector<int64_t> write_chunks(const DcpInputs& in) {
  return in.chunks.empty() ? std::vector<int64_t>{in.seq} : in.chunks;
}

ChunkRows chunk_rows(const DcpInputs& in, const KvCacheSpec& spec, int64_t pos0, int64_t len) {
  const AttentionDims& d = in.dims;
  const int64_t H = spec.kv_heads, dk = d.head_dim, dv = d.v_dim;
  ChunkRows c;
  c.k.assign(static_cast<size_t>(len * H * dk), 0.0f);
  c.v.assign(d.shared_latent ? 0 : static_cast<size_t>(len * H * dv), 0.0f);
  for (int64_t i = 0; i < len; ++i) {
    const int64_t pos = pos0 + i;
    std::copy_n(&in.k[static_cast<size_t>((pos * d.kv_heads + spec.kv_head0) * dk)], H * dk,
                &c.k[static_cast<size_t>(i * H * dk)]);
    if (!d.shared_latent)
      std::copy_n(&in.v[static_cast<size_t>((pos * d.kv_heads + spec.kv_head0) * dv)], H * dv,
                  &c.v[static_cast<size_t>(i * H * dv)]);
  }
  return c;
}

GpuStatus check_group_comm(const DcpGeometry& geo, int64_t tp_rank, int64_t comm_rank,
                           int64_t comm_size) {
  if (comm_size != geo.n || comm_rank != geo.dcp_rank(tp_rank))
    return DCP_GPU_ERROR("communicator: rank ", comm_rank, " of ", comm_size, "; tp rank ", tp_rank,
                         " needs dcp rank ", geo.dcp_rank(tp_rank), " of ", geo.n);
  return {};
}

PartialAttentionParams rank_attention_params(const DcpInputs& in, const DcpConfig& cfg,
                                             const DcpGeometry& geo, const KvCacheSpec& spec,
                                             int64_t tp_rank) {
  const AttentionDims& d = in.dims;
  PartialAttentionParams p;
  p.tokens = d.tokens;
  p.heads = geo.hg;
  p.head_dim = d.head_dim;
  p.head0 = geo.group_head0(tp_rank);
  p.q_heads_total = d.q_heads;
  p.kv_heads_total = d.kv_heads;
  p.seq = in.seq;
  p.layout = cfg.layout;
  p.rank = geo.dcp_rank(tp_rank);
  p.rows = cfg.layout.count(p.rank, in.seq);
  p.kv_heads = spec.kv_heads;
  p.kv_head0 = spec.kv_head0;
  p.v_dim = d.v_dim;
  p.v_head_stride = spec.shared_latent ? spec.head_dim : spec.v_dim;
  p.v_row_stride = spec.kv_heads * p.v_head_stride;
  p.scale = in.scale;
  p.causal = in.causal;
  p.window = in.window;
  p.softcap = in.softcap;
  p.topk_k = in.topk_k;
  p.base = cfg.base;
  p.tile = cfg.tile;
  p.splits = cfg.splits;
  return p;
}

std::vector<float> rank_queries(const DcpInputs& in, const DcpConfig& cfg, const DcpGeometry& geo,
                                int64_t tp_rank) {
  const AttentionDims& d = in.dims;
  const int64_t head0 = cfg.replicate_q ? geo.group_head0(tp_rank) : geo.local_head0(tp_rank);
  const int64_t nh = cfg.replicate_q ? geo.hg : geo.h_loc;
  std::vector<float> q(static_cast<size_t>(d.tokens * nh * d.head_dim));
  for (int64_t t = 0; t < d.tokens; ++t)
    std::copy_n(&in.q[static_cast<size_t>((t * d.q_heads + head0) * d.head_dim)], nh * d.head_dim,
                &q[static_cast<size_t>(t * nh * d.head_dim)]);
  return q;
}

Result<RankKvCache> build_rank_cache(const DcpInputs& in, const DcpConfig& cfg, int64_t tp_rank) {
  Result<KvCacheSpec> spec = rank_cache_spec(in, cfg, tp_rank);
  if (!spec) return spec.status();
  Result<RankKvCache> cache = RankKvCache::create(*spec);
  if (!cache) return cache.status();
  // Replay the writes: every rank sees every chunk and keeps what it owns.
  int64_t pos0 = 0;
  for (const int64_t len : write_chunks(in)) {
    const ChunkRows c = chunk_rows(in, *spec, pos0, len);
    DCP_GPU_TRY(
        cache->write_chunk(pos0, len, c.k.data(), in.dims.shared_latent ? nullptr : c.v.data()));
    pos0 += len;
  }
  return cache;
}

Result<RankStepOutput> dcp_decode_step(Communicator& comm, const DcpConfig& cfg,
                                       const DcpInputs& in, int64_t tp_rank,
                                       std::span<const float> q, const RankKvCache& cache) {
  Result<DcpGeometry> geo_r = DcpGeometry::create(cfg, in.dims);
  if (!geo_r) return geo_r.status();
  const DcpGeometry& geo = *geo_r;
  const AttentionDims& d = in.dims;
  const int64_t N = geo.n, T = d.tokens, Hl = geo.h_loc, Hg = geo.hg, dk = d.head_dim, dv = d.v_dim,
                me = geo.dcp_rank(tp_rank);
  DCP_GPU_TRY(check_group_comm(geo, tp_rank, comm.rank(), comm.size()));
  const int64_t q_heads_in = cfg.replicate_q ? Hg : Hl;
  if (q.size() != static_cast<size_t>(T * q_heads_in * dk))
    return DCP_GPU_ERROR("tensor 'q' on tp rank ", tp_rank, ": ", q.size(), " elements; expected ",
                         T * q_heads_in * dk);
  const int64_t rows = cfg.layout.count(me, in.seq);
  for (int64_t r = 0; r < rows; ++r) {
    if (!cache.written(r))
      return DCP_GPU_ERROR("kv cache: rank ", me, " row ", r, " (position ",
                           cfg.layout.position(me, r), ") was never written");
  }

  // 1. Queries of the whole group: [T, Hg, Dk].
  std::vector<float> qg(static_cast<size_t>(T * Hg * dk));
  if (cfg.replicate_q) {
    std::copy(q.begin(), q.end(), qg.begin());
  } else {
    std::vector<float> recv(static_cast<size_t>(N * T * Hl * dk));
    DCP_GPU_TRY(comm.all_gather(q, recv));
    for (int64_t r = 0; r < N; ++r)
      for (int64_t t = 0; t < T; ++t)
        std::copy_n(&recv[static_cast<size_t>(((r * T + t) * Hl) * dk)], Hl * dk,
                    &qg[static_cast<size_t>((t * Hg + r * Hl) * dk)]);
  }

  // 2. Partial attention over this rank's tokens.
  RankStepOutput out;
  out.partial_o.assign(static_cast<size_t>(T * Hg * dv), 0.0f);
  out.partial_lse.assign(static_cast<size_t>(T * Hg), 0.0f);
  PartialAttentionParams p = rank_attention_params(in, cfg, geo, cache.spec(), tp_rank);
  p.q = qg.data();
  p.q_pos = in.q_pos.data();
  p.k = cache.k();
  p.v = cache.v();
  const bool sink_here = DCP_MUTANT(sink_on_every_rank) ? true
                         : DCP_MUTANT(sink_missing)     ? false
                                                        : me == kSinkRank;
  p.sink = !in.sink.empty() && sink_here ? &in.sink[static_cast<size_t>(p.head0)] : nullptr;
  p.topk = in.topk.empty() ? nullptr : in.topk.data();
  p.o = out.partial_o.data();
  p.lse = out.partial_lse.data();
  DCP_GPU_TRY(partial_attention(p));

  // 3. Combine, handing each rank back its own H_loc heads.
  out.o.assign(static_cast<size_t>(T * Hl * dv), 0.0f);
  out.lse.assign(static_cast<size_t>(T * Hl), 0.0f);
  const LseBase base = cfg.base;
  if (cfg.strategy == CommStrategy::ag_rs) {
    std::vector<float> lse_all(static_cast<size_t>(N * T * Hg));
    DCP_GPU_TRY(comm.all_gather(out.partial_lse, lse_all));
    // The group LSE of every (t, h), reduced over ranks in the configured order.
    std::vector<float> lse_glob(static_cast<size_t>(T * Hg));
    std::vector<MergeAcc> acc(static_cast<size_t>(N));
    for (int64_t x = 0; x < T * Hg; ++x) {
      for (int64_t r = 0; r < N; ++r)
        acc[static_cast<size_t>(r)] =
            MergeAcc::from_partial(lse_all[static_cast<size_t>(r * T * Hg + x)]);
      const int64_t root = reduce_slots(N, cfg.order, cfg.order_seed, [&](int64_t a, int64_t b) {
        merge_into(base, acc[static_cast<size_t>(a)], nullptr, acc[static_cast<size_t>(b)], nullptr,
                   0);
      });
      lse_glob[static_cast<size_t>(x)] = finish(base, acc[static_cast<size_t>(root)], nullptr, 0);
    }
    // send [N dest, T, H_loc, Dv]: O_r scaled by base^(L_r - L), sliced by destination heads.
    std::vector<float> send(static_cast<size_t>(N * T * Hl * dv));
    for (int64_t dst = 0; dst < N; ++dst)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t hl = 0; hl < Hl; ++hl) {
          const int64_t x = t * Hg + dst * Hl + hl;
          const float lr = out.partial_lse[static_cast<size_t>(x)];
          const float lg = lse_glob[static_cast<size_t>(x)];
          const float w = is_empty_lse(lr) ? 0.0f : pow_base(base, lr - lg);
          const float* o_r = &out.partial_o[static_cast<size_t>(x * dv)];
          float* s = &send[static_cast<size_t>(((dst * T + t) * Hl + hl) * dv)];
          for (int64_t i = 0; i < dv; ++i) s[i] = w * o_r[i];
        }
    DCP_GPU_TRY(comm.reduce_scatter_sum(send, out.o, cfg.order, cfg.order_seed));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hl = 0; hl < Hl; ++hl)
        out.lse[static_cast<size_t>(t * Hl + hl)] = lse_glob[static_cast<size_t>(
            t * Hg + (DCP_MUTANT(rs_lse_wrong_slice) ? (me + 1) % N : me) * Hl + hl)];
  } else {
    // send [N dest, T, H_loc, Dv + 1]: each head's O_r followed by its L_r.
    const int64_t w = dv + 1;
    std::vector<float> send(static_cast<size_t>(N * T * Hl * w)), recv(send.size());
    for (int64_t dst = 0; dst < N; ++dst)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t hl = 0; hl < Hl; ++hl) {
          const int64_t slice = DCP_MUTANT(a2a_slices_permuted) ? (dst + 1) % N : dst;
          const int64_t x = t * Hg + slice * Hl + hl;
          float* s = &send[static_cast<size_t>(((dst * T + t) * Hl + hl) * w)];
          std::copy_n(&out.partial_o[static_cast<size_t>(x * dv)], dv, s);
          const float l = out.partial_lse[static_cast<size_t>(x)];
          s[dv] = DCP_MUTANT(a2a_lse_bf16) ? round_bf16(l) : l;
        }
    DCP_GPU_TRY(comm.all_to_all(send, recv));
    std::vector<MergeAcc> acc(static_cast<size_t>(N));
    std::vector<float> num(static_cast<size_t>(N * dv));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hl = 0; hl < Hl; ++hl) {
        for (int64_t src = 0; src < N; ++src) {
          const float* r = &recv[static_cast<size_t>(((src * T + t) * Hl + hl) * w)];
          acc[static_cast<size_t>(src)] = MergeAcc::from_partial(r[dv]);
          std::copy_n(r, dv, &num[static_cast<size_t>(src * dv)]);
        }
        const int64_t root = reduce_slots(N, cfg.order, cfg.order_seed, [&](int64_t a, int64_t b) {
          merge_into(base, acc[static_cast<size_t>(a)], &num[static_cast<size_t>(a * dv)],
                     acc[static_cast<size_t>(b)], &num[static_cast<size_t>(b * dv)], dv);
        });
        float* o = &out.o[static_cast<size_t>((t * Hl + hl) * dv)];
        std::copy_n(&num[static_cast<size_t>(root * dv)], dv, o);
        out.lse[static_cast<size_t>(t * Hl + hl)] =
            finish(base, acc[static_cast<size_t>(root)], o, dv);
      }
  }
  if (DCP_MUTANT(lse_out_wrong_base))
    for (float& x : out.lse) x = base == LseBase::e ? x * kLog2eF : x / kLog2eF;
  for (float& x : out.o) x = round_to(cfg.out_dtype, x);
  for (float& x : out.lse) x = round_to(cfg.out_dtype, x);
  return out;
}

Result<RankStepOutput> run_tp_rank(Communicator& comm, const DcpInputs& in, const DcpConfig& cfg,
                                   int64_t tp_rank) {
  Result<DcpGeometry> geo = DcpGeometry::create(cfg, in.dims);
  if (!geo) return geo.status();
  Result<RankKvCache> cache = build_rank_cache(in, cfg, tp_rank);
  if (!cache) return cache.status();
  return dcp_decode_step(comm, cfg, in, tp_rank, rank_queries(in, cfg, *geo, tp_rank), *cache);
}

}  // namespace dcp::gpu
