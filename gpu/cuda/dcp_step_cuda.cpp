#include "gpu/cuda/dcp_step_cuda.hpp"

#include <vector>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "gpu/cuda/kernels.hpp"

namespace dcp::gpu {
namespace {

template <class T>
Result<DeviceBuffer<T>> upload(const std::vector<T>& host, cudaStream_t s) {
  return DeviceBuffer<T>::upload(std::span<const T>(host), s);
}

// Unwraps a Result into a local, or returns its failure from the enclosing function.
#define DCP_ASSIGN(var, expr)            \
  auto var##_r = (expr);                 \
  if (!var##_r) return var##_r.status(); \
  auto var = std::move(*var##_r)

struct DeviceCache {
  KvCacheSpec spec;
  DeviceBuffer<float> k, v;  // v empty for a shared latent
  DeviceBuffer<uint8_t> written;
};

// Replays in's KV writes into the rank's device cache; checks that every row the context needs
// was written (as the host path does).
Result<DeviceCache> build_device_cache(const DcpInputs& in, const DcpConfig& cfg, int64_t tp_rank,
                                       cudaStream_t s) {
  DCP_ASSIGN(spec, rank_cache_spec(in, cfg, tp_rank));
  DCP_GPU_TRY(validate_cache_spec(spec));
  const size_t rows = static_cast<size_t>(spec.physical_rows);
  DCP_ASSIGN(k, DeviceBuffer<float>::create(rows * spec.kv_heads * spec.head_dim, s));
  DCP_ASSIGN(v, DeviceBuffer<float>::create(
                    spec.shared_latent ? 0 : rows * spec.kv_heads * spec.v_dim, s));
  DCP_ASSIGN(written, DeviceBuffer<uint8_t>::create(rows, s));
  DeviceCacheView view{k.data(), spec.shared_latent ? k.data() : v.data(), written.data()};
  int64_t pos0 = 0;
  for (const int64_t len : write_chunks(in)) {
    const ChunkRows c = chunk_rows(in, spec, pos0, len);
    DCP_ASSIGN(kc, upload(c.k, s));
    DCP_ASSIGN(vc, upload(c.v, s));
    DCP_GPU_TRY(launch_kv_write(spec, view, pos0, len, kc.data(),
                                spec.shared_latent ? nullptr : vc.data(), s));
    DCP_CUDA_TRY(cudaStreamSynchronize(s));  // the chunk buffers are freed next
    pos0 += len;
  }
  std::vector<uint8_t> flags(rows);
  DCP_GPU_TRY(written.download(flags, s));
  const int64_t need = cfg.layout.count(spec.rank, in.seq);
  for (int64_t r = 0; r < need; ++r)
    if (flags[static_cast<size_t>(r)] == 0)
      return DCP_GPU_ERROR("kv cache: rank ", spec.rank, " row ", r, " (position ",
                           cfg.layout.position(spec.rank, r), ") was never written");
  return DeviceCache{spec, std::move(k), std::move(v), std::move(written)};
}

}  // namespace

Result<RankStepOutput> cuda_run_tp_rank(DeviceCommunicator& comm, const DcpInputs& in,
                                        const DcpConfig& cfg, int64_t tp_rank) {
  DCP_ASSIGN(geo, DcpGeometry::create(cfg, in.dims));
  const AttentionDims& d = in.dims;
  const int64_t N = geo.n, T = d.tokens, Hl = geo.h_loc, Hg = geo.hg, dk = d.head_dim, dv = d.v_dim,
                me = geo.dcp_rank(tp_rank);
  if (comm.size() != N || comm.rank() != me)
    return DCP_GPU_ERROR("communicator: rank ", comm.rank(), " of ", comm.size(), "; tp rank ",
                         tp_rank, " needs dcp rank ", me, " of ", N);
  DCP_CUDA_TRY(cudaSetDevice(comm.device()));
  cudaStream_t s = comm.stream();
  DCP_ASSIGN(cache, build_device_cache(in, cfg, tp_rank, s));

  // 1. Queries of the whole group: [T, Hg, Dk].
  DCP_ASSIGN(q_mine, upload(rank_queries(in, cfg, geo, tp_rank), s));
  DeviceBuffer<float> qg_buf;
  const float* qg = q_mine.data();
  if (!cfg.replicate_q) {
    DCP_ASSIGN(recv, DeviceBuffer<float>::create(static_cast<size_t>(N * T * Hl * dk), s));
    DCP_ASSIGN(buf, DeviceBuffer<float>::create(static_cast<size_t>(T * Hg * dk), s));
    DCP_GPU_TRY(comm.all_gather(q_mine.data(), T * Hl * dk, recv.data()));
    const size_t row = sizeof(float) * static_cast<size_t>(Hl * dk);
    for (int64_t r = 0; r < N; ++r)  // recv [r, t, hl, :] -> qg [t, r Hl + hl, :]
      DCP_CUDA_TRY(cudaMemcpy2DAsync(buf.data() + r * Hl * dk, sizeof(float) * Hg * dk,
                                     recv.data() + r * T * Hl * dk, row, row,
                                     static_cast<size_t>(T), cudaMemcpyDeviceToDevice, s));
    DCP_CUDA_TRY(cudaStreamSynchronize(s));  // recv is freed at the end of this scope
    qg_buf = std::move(buf);
    qg = qg_buf.data();
  }

  // 2. Partial attention over this rank's tokens.
  DCP_ASSIGN(q_pos, upload(in.q_pos, s));
  const int64_t head0 = geo.group_head0(tp_rank);
  const bool sink_here = !in.sink.empty() && me == kSinkRank;
  DCP_ASSIGN(sink, upload(sink_here ? std::vector<float>(in.sink.begin() + head0,
                                                         in.sink.begin() + head0 + Hg)
                                    : std::vector<float>{},
                          s));
  DCP_ASSIGN(topk, upload(in.topk, s));
  DCP_ASSIGN(po, DeviceBuffer<float>::create(static_cast<size_t>(T * Hg * dv), s));
  DCP_ASSIGN(pl, DeviceBuffer<float>::create(static_cast<size_t>(T * Hg), s));
  PartialAttentionParams p;
  p.q = qg;
  p.tokens = T;
  p.heads = Hg;
  p.head_dim = dk;
  p.head0 = head0;
  p.q_heads_total = d.q_heads;
  p.kv_heads_total = d.kv_heads;
  p.q_pos = q_pos.data();
  p.seq = in.seq;
  p.layout = cfg.layout;
  p.rank = me;
  p.k = cache.k.data();
  p.v = cache.spec.shared_latent ? cache.k.data() : cache.v.data();
  p.rows = cfg.layout.count(me, in.seq);
  p.kv_heads = cache.spec.kv_heads;
  p.kv_head0 = cache.spec.kv_head0;
  p.v_dim = dv;
  p.v_head_stride = cache.spec.shared_latent ? dk : dv;
  p.v_row_stride = cache.spec.kv_heads * p.v_head_stride;
  p.scale = in.scale;
  p.causal = in.causal;
  p.window = in.window;
  p.softcap = in.softcap;
  p.sink = sink_here ? sink.data() : nullptr;
  p.topk = in.topk.empty() ? nullptr : topk.data();
  p.topk_k = in.topk_k;
  p.base = cfg.base;
  p.tile = cfg.tile;
  p.splits = cfg.splits;
  p.o = po.data();
  p.lse = pl.data();
  DCP_GPU_TRY(launch_partial_attention(p, s));

  // 3. Combine, handing each rank back its own H_loc heads.
  DCP_ASSIGN(sched, make_schedule(N, cfg.order, cfg.order_seed));
  DCP_ASSIGN(o, DeviceBuffer<float>::create(static_cast<size_t>(T * Hl * dv), s));
  DCP_ASSIGN(lse, DeviceBuffer<float>::create(static_cast<size_t>(T * Hl), s));
  if (cfg.strategy == CommStrategy::ag_rs) {
    DCP_ASSIGN(lse_all, DeviceBuffer<float>::create(static_cast<size_t>(N * T * Hg), s));
    DCP_ASSIGN(send, DeviceBuffer<float>::create(static_cast<size_t>(N * T * Hl * dv), s));
    DCP_GPU_TRY(comm.all_gather(pl.data(), T * Hg, lse_all.data()));
    DCP_GPU_TRY(launch_agrs_scale(po.data(), pl.data(), lse_all.data(), T, Hl, dv, me, cfg.base,
                                  sched, send.data(), lse.data(), s));
    DCP_GPU_TRY(
        comm.reduce_scatter_sum(send.data(), T * Hl * dv, o.data(), cfg.order, cfg.order_seed));
  } else {
    const size_t block = static_cast<size_t>(T * Hl * (dv + 1));
    DCP_ASSIGN(send, DeviceBuffer<float>::create(static_cast<size_t>(N) * block, s));
    DCP_ASSIGN(recv, DeviceBuffer<float>::create(static_cast<size_t>(N) * block, s));
    DCP_GPU_TRY(launch_a2a_pack(po.data(), pl.data(), T, Hl, dv, N, send.data(), s));
    DCP_GPU_TRY(comm.all_to_all(send.data(), static_cast<int64_t>(block), recv.data()));
    DCP_GPU_TRY(
        launch_a2a_combine(recv.data(), T, Hl, dv, cfg.base, sched, o.data(), lse.data(), s));
  }
  DCP_GPU_TRY(launch_round(o.data(), T * Hl * dv, cfg.out_dtype, s));
  DCP_GPU_TRY(launch_round(lse.data(), T * Hl, cfg.out_dtype, s));

  RankStepOutput out;
  out.o.resize(o.size());
  out.lse.resize(lse.size());
  out.partial_o.resize(po.size());
  out.partial_lse.resize(pl.size());
  DCP_GPU_TRY(o.download(out.o, s));
  DCP_GPU_TRY(lse.download(out.lse, s));
  DCP_GPU_TRY(po.download(out.partial_o, s));
  DCP_GPU_TRY(pl.download(out.partial_lse, s));
  return out;
}

}  // namespace dcp::gpu
