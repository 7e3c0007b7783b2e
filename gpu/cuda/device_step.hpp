// device_step.hpp — one TP rank's DCP decode step on a device, written once for any Device: the
// CUDA device (dcp_step_cuda.cpp: device memory, the kernels of kernels.cu, a device
// communicator) and the CPU emulation of it (tests/cuda_host: host memory, the same kernel
// bodies run thread by thread, the threads communicator). So the orchestration the GPU runs —
// buffers, the order of kernels and collectives, their arguments — is what CI runs on CPUs.
//
// A Device provides, for the rank it serves:
//   Buffer<T>                         an owned array (data(), size()) in the device's memory
//   alloc<T>(n), upload(vector<T>)    Result<Buffer<T>>, zero-filled / copied from the host
//   download(const Buffer<T>&)        Result<vector<T>>
//   sync()                            queued work done (before a buffer it reads is freed)
//   copy_rows(dst, dst_pitch, src, src_pitch, width, rows)    floats, a strided 2-D copy
//   kv_write, partial_attention, agrs_scale, a2a_pack, a2a_combine, round: the launchers of
//                                     kernels.hpp without their stream
//   rank(), size(), all_gather, all_to_all, reduce_scatter_sum: the DCP group's collectives
//                                     (device_comm.hpp) on device pointers
//
//   CudaDevice dev(comm);
//   Result<RankStepOutput> r = device_step(dev, inputs, cfg, tp_rank);
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gpu/cuda/kernel_bodies.hpp"
#include "gpu/cuda/launch_checks.hpp"
#include "gpu/dcp_step.hpp"
#include "gpu/kv_cache.hpp"
#include "gpu/partial_attention.hpp"

namespace dcp::gpu {

template <class Device>
struct DeviceCache {
  KvCacheSpec spec;
  typename Device::template Buffer<float> k, v;  // v empty for a shared latent
  typename Device::template Buffer<uint8_t> written;
};

// Replays in's KV writes into the rank's cache on the device; checks that every row the context
// needs was written (as the host path does).
template <class Device>
Result<DeviceCache<Device>> build_device_cache(Device& dev, const DcpInputs& in,
                                               const DcpConfig& cfg, int64_t tp_rank) {
  DCP_GPU_ASSIGN(spec, rank_cache_spec(in, cfg, tp_rank));
  DCP_GPU_TRY(validate_cache_spec(spec));
  const size_t rows = static_cast<size_t>(spec.physical_rows);
  DCP_GPU_ASSIGN(k, dev.template alloc<float>(rows * spec.kv_heads * spec.head_dim));
  DCP_GPU_ASSIGN(
      v, dev.template alloc<float>(spec.shared_latent ? 0 : rows * spec.kv_heads * spec.v_dim));
  DCP_GPU_ASSIGN(written, dev.template alloc<uint8_t>(rows));
  const DeviceCacheView view{k.data(), spec.shared_latent ? k.data() : v.data(), written.data()};
  int64_t pos0 = 0;
  for (const int64_t len : write_chunks(in)) {
    const ChunkRows c = chunk_rows(in, spec, pos0, len);
    DCP_GPU_ASSIGN(kc, dev.upload(c.k));
    DCP_GPU_ASSIGN(vc, dev.upload(c.v));
    DCP_GPU_TRY(
        dev.kv_write(spec, view, pos0, len, kc.data(), spec.shared_latent ? nullptr : vc.data()));
    DCP_GPU_TRY(dev.sync());  // the chunk buffers are freed next
    pos0 += len;
  }
  DCP_GPU_ASSIGN(flags, dev.download(written));
  const int64_t need = cfg.layout.count(spec.rank, in.seq);
  for (int64_t r = 0; r < need; ++r)
    if (flags[static_cast<size_t>(r)] == 0)
      return DCP_GPU_ERROR("kv cache: rank ", spec.rank, " row ", r, " (position ",
                           cfg.layout.position(spec.rank, r), ") was never written");
  return DeviceCache<Device>{spec, std::move(k), std::move(v), std::move(written)};
}

// The step of dcp_step.hpp (queries, partial attention, ag_rs or a2a combine, rounding) on the
// device; returns what the host backend returns.
template <class Device>
Result<RankStepOutput> device_step(Device& dev, const DcpInputs& in, const DcpConfig& cfg,
                                   int64_t tp_rank) {
  DCP_GPU_ASSIGN(geo, DcpGeometry::create(cfg, in.dims));
  const AttentionDims& d = in.dims;
  const int64_t N = geo.n, T = d.tokens, Hl = geo.h_loc, Hg = geo.hg, dk = d.head_dim, dv = d.v_dim,
                me = geo.dcp_rank(tp_rank);
  DCP_GPU_TRY(check_group_comm(geo, tp_rank, dev.rank(), dev.size()));
  DCP_GPU_ASSIGN(cache, build_device_cache(dev, in, cfg, tp_rank));

  // 1. Queries of the whole group: [T, Hg, Dk].
  DCP_GPU_ASSIGN(qg, dev.upload(rank_queries(in, cfg, geo, tp_rank)));
  if (!cfg.replicate_q) {
    DCP_GPU_ASSIGN(recv, dev.template alloc<float>(static_cast<size_t>(N * T * Hl * dk)));
    DCP_GPU_ASSIGN(all, dev.template alloc<float>(static_cast<size_t>(T * Hg * dk)));
    DCP_GPU_TRY(dev.all_gather(qg.data(), T * Hl * dk, recv.data()));
    for (int64_t r = 0; r < N; ++r)  // recv [r, t, hl, :] -> qg [t, r Hl + hl, :]
      DCP_GPU_TRY(dev.copy_rows(all.data() + r * Hl * dk, Hg * dk, recv.data() + r * T * Hl * dk,
                                Hl * dk, Hl * dk, T));
    DCP_GPU_TRY(dev.sync());  // recv is freed at the end of this scope
    qg = std::move(all);
  }

  // 2. Partial attention over this rank's tokens.
  DCP_GPU_ASSIGN(q_pos, dev.upload(in.q_pos));
  const int64_t head0 = geo.group_head0(tp_rank);
  const bool sink_here = !in.sink.empty() && me == kSinkRank;
  DCP_GPU_ASSIGN(sink, dev.upload(sink_here ? std::vector<float>(in.sink.begin() + head0,
                                                                 in.sink.begin() + head0 + Hg)
                                            : std::vector<float>{}));
  DCP_GPU_ASSIGN(topk, dev.upload(in.topk));
  DCP_GPU_ASSIGN(po, dev.template alloc<float>(static_cast<size_t>(T * Hg * dv)));
  DCP_GPU_ASSIGN(pl, dev.template alloc<float>(static_cast<size_t>(T * Hg)));
  PartialAttentionParams p = rank_attention_params(in, cfg, geo, cache.spec, tp_rank);
  p.q = qg.data();
  p.q_pos = q_pos.data();
  p.k = cache.k.data();
  p.v = cache.spec.shared_latent ? cache.k.data() : cache.v.data();
  p.sink = sink_here ? sink.data() : nullptr;
  p.topk = in.topk.empty() ? nullptr : topk.data();
  p.o = po.data();
  p.lse = pl.data();
  DCP_GPU_TRY(dev.partial_attention(p));

  // 3. Combine, handing each rank back its own H_loc heads.
  DCP_GPU_ASSIGN(sched, make_schedule(N, cfg.order, cfg.order_seed));
  DCP_GPU_ASSIGN(o, dev.template alloc<float>(static_cast<size_t>(T * Hl * dv)));
  DCP_GPU_ASSIGN(lse, dev.template alloc<float>(static_cast<size_t>(T * Hl)));
  if (cfg.strategy == CommStrategy::ag_rs) {
    DCP_GPU_ASSIGN(lse_all, dev.template alloc<float>(static_cast<size_t>(N * T * Hg)));
    DCP_GPU_ASSIGN(send, dev.template alloc<float>(static_cast<size_t>(N * T * Hl * dv)));
    DCP_GPU_TRY(dev.all_gather(pl.data(), T * Hg, lse_all.data()));
    DCP_GPU_TRY(dev.agrs_scale(po.data(), pl.data(), lse_all.data(), T, Hl, dv, me, cfg.base, sched,
                               send.data(), lse.data()));
    DCP_GPU_TRY(
        dev.reduce_scatter_sum(send.data(), T * Hl * dv, o.data(), cfg.order, cfg.order_seed));
  } else {
    const size_t block = static_cast<size_t>(T * Hl * (dv + 1));
    DCP_GPU_ASSIGN(send, dev.template alloc<float>(static_cast<size_t>(N) * block));
    DCP_GPU_ASSIGN(recv, dev.template alloc<float>(static_cast<size_t>(N) * block));
    DCP_GPU_TRY(dev.a2a_pack(po.data(), pl.data(), T, Hl, dv, N, send.data()));
    DCP_GPU_TRY(dev.all_to_all(send.data(), static_cast<int64_t>(block), recv.data()));
    DCP_GPU_TRY(dev.a2a_combine(recv.data(), T, Hl, dv, cfg.base, sched, o.data(), lse.data()));
  }
  DCP_GPU_TRY(dev.round(o.data(), T * Hl * dv, cfg.out_dtype));
  DCP_GPU_TRY(dev.round(lse.data(), T * Hl, cfg.out_dtype));

  RankStepOutput out;
  DCP_GPU_ASSIGN(o_h, dev.download(o));
  DCP_GPU_ASSIGN(lse_h, dev.download(lse));
  DCP_GPU_ASSIGN(po_h, dev.download(po));
  DCP_GPU_ASSIGN(pl_h, dev.download(pl));
  out.o = std::move(o_h);
  out.lse = std::move(lse_h);
  out.partial_o = std::move(po_h);
  out.partial_lse = std::move(pl_h);
  return out;
}

}  // namespace dcp::gpu
