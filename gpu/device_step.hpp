// device_step.hpp — one TP rank's DCP decode step, written once for any Device: the host device
// (gpu/host/host_device.hpp: host memory, the kernel bodies run block by block, any
// Communicator), the CUDA device (gpu/cuda/dcp_step_cuda.cpp: device memory, the kernels of
// kernels.cu, a device communicator) and the CPU emulation of the CUDA grids (tests/
// cuda_emulated). So the orchestration every backend runs — buffers, the order of kernels and
// collectives, their arguments — is one piece of code, and CI runs it.
//
// A Device provides, for the rank it serves:
//   Buffer<T>                         an owned array (data(), size()) in the device's memory
//   Schedule                          the ReduceScheduleOf<capacity> its merge kernels hold
//   alloc<T>(n), upload(vector<T>)    Result<Buffer<T>>, zero-filled / copied from the host
//   download(const Buffer<T>&)        Result<vector<T>>
//   sync()                            queued work done (before a buffer it reads is freed)
//   copy_rows(RowCopy)                floats, a strided 2-D copy
//   kv_write(body::KvWrite), partial_attention(PartialAttentionParams),
//   agrs_scale(body::AgRsScale<Schedule>), a2a_pack(body::A2aPack),
//   a2a_combine(body::A2aCombine<Schedule>), round(x, n, dtype)
//                                     the kernels (bodies.hpp), arguments already checked
//   rank(), size(), all_gather, all_to_all, reduce_scatter_sum: the DCP group's collectives on
//                                     the device's pointers
//
//   HostDevice dev(comm);
//   Result<RankStepOutput> r = device_step(dev, inputs, cfg, tp_rank);
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpu/dcp_step.hpp"
#include "gpu/kernels/attention_params.hpp"
#include "gpu/kernels/bodies.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/launch_checks.hpp"

namespace dcp::gpu {

// A strided 2-D copy of floats: rows rows of width floats, row r from src + r src_pitch to
// dst + r dst_pitch.
struct RowCopy {
  float* dst = nullptr;
  int64_t dst_pitch = 0;
  const float* src = nullptr;
  int64_t src_pitch = 0, width = 0, rows = 0;
};

template <class Device>
struct DeviceCache {
  KvCacheSpec spec;
  typename Device::template Buffer<uint8_t> k, v;  // elements of spec.dtype; v empty for a latent
  typename Device::template Buffer<uint8_t> written;         // [pool rows]
  typename Device::template Buffer<float> k_scale, v_scale;  // scale_entries(spec); empty: none
  // [requests, table_pages] (plan_pages); empty: not paged
  typename Device::template Buffer<int32_t> block_table;
  std::vector<int64_t>
      request_pages;  // the pages each request's table holds (host); empty: not paged
  // The view of request b's rows (b's block table).
  KvView view(int64_t b = 0) {
    return kv_view(spec, k.data(), v.data(), written.data(),
                   k_scale.size() > 0 ? k_scale.data() : nullptr,
                   v_scale.size() > 0 ? v_scale.data() : nullptr,
                   block_table.size() > 0 ? block_table.data() + b * spec.table_pages() : nullptr);
  }
};

// An empty cache of the spec on the device, with the dequantization scales of its KV heads and,
// paged, its requests' block tables (kv_view.hpp; shared_pages: their shared prefix's; retired:
// the requests that freed their pages before the rest took theirs): nothing written.
template <class Device>
Result<DeviceCache<Device>> alloc_device_cache(Device& dev, const KvCacheSpec& spec,
                                               const KvScales& scales = {},
                                               const std::vector<int32_t>& block_tables = {},
                                               int64_t shared_pages = 0, int64_t retired = 0) {
  DCP_GPU_TRY(validate_cache_spec(spec));
  DCP_GPU_TRY(validate_cache_scales(spec, scales));
  DCP_GPU_TRY(validate_block_tables(spec, block_tables, shared_pages, retired));
  const KvCacheSizes n = kv_cache_bytes(spec);
  DCP_GPU_ASSIGN(k, dev.template alloc<uint8_t>(static_cast<size_t>(n.k)));
  DCP_GPU_ASSIGN(v, dev.template alloc<uint8_t>(static_cast<size_t>(n.v)));
  DCP_GPU_ASSIGN(written, dev.template alloc<uint8_t>(static_cast<size_t>(n.written)));
  DCP_GPU_ASSIGN(ks, dev.upload(scales.k));
  DCP_GPU_ASSIGN(vs, dev.upload(scales.v));
  DCP_GPU_ASSIGN(bt, dev.upload(block_tables));
  std::vector<int64_t> pages;
  for (size_t i = 0; i < block_tables.size(); ++i) {
    if (i % static_cast<size_t>(spec.table_pages()) == 0) pages.push_back(0);
    if (block_tables[i] >= 0) ++pages.back();
  }
  return DeviceCache<Device>{spec,          std::move(k),  std::move(v),  std::move(written),
                             std::move(ks), std::move(vs), std::move(bt), std::move(pages)};
}

// An error once cfg.stop says so (DcpConfig::stop): the step ends at `where`.
inline GpuStatus stop_point(const DcpConfig& cfg, const char* where) {
  if (cfg.stop && cfg.stop()) return DCP_GPU_ERROR("stopped ", where);
  return {};
}

// Stores the tokens of the chunk (its tensors in the device's memory) the cache's rank owns, at
// request b's rows.
template <class Device>
GpuStatus write_device_chunk(Device& dev, DeviceCache<Device>& cache, const KvChunk& chunk,
                             int64_t b = 0) {
  const auto requests = static_cast<int64_t>(std::max<size_t>(1, cache.request_pages.size()));
  if (b < 0 || b >= requests)
    return DCP_GPU_ERROR("kv write: request ", b, " outside the cache's ", requests, " requests");
  const KvCacheSpec& s = cache.spec;
  const int64_t need = s.layout.count(s.rank, chunk.pos0 + chunk.len);
  if (!cache.request_pages.empty() && chunk.len > 0 &&
      need > cache.request_pages[static_cast<size_t>(b)] * s.page_size)
    return DCP_GPU_ERROR("kv write: rank ", s.rank, " needs row ", need - 1, " for chunk [",
                         chunk.pos0, ", ", chunk.pos0 + chunk.len, ") of request ", b,
                         ", whose pages hold ",
                         cache.request_pages[static_cast<size_t>(b)] * s.page_size, " rows");
  DCP_GPU_ASSIGN(a, kv_write_args(cache.spec, cache.view(b), chunk));
  if (a.len == 0) return {};
  return dev.kv_write(a);
}

// The first row of [0, rows) whose pool row (through a block table of page_size rows, or none)
// was never written, or -1 (flags: the cache's written array).
inline int64_t first_unwritten_row(const std::vector<uint8_t>& flags, int64_t rows,
                                   const int32_t* table = nullptr, int64_t page_size = 0) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t slot =
        table != nullptr ? int64_t{table[r / page_size]} * page_size + r % page_size : r;
    if (flags[static_cast<size_t>(slot)] == 0) return r;
  }
  return -1;
}

// Replays in's KV writes into the rank's cache on the device (one chunk's copy at a time: the
// writes of make_chunks are at most a chunked-prefill's length; a batch's request writes all but
// its last token at once), request by request in a batch, each from the first position it does
// not share; frees the retired requests' pages when the first live request starts (their rows
// keep their stale values; only their `written` flags are cleared); checks that every row each
// live request reads was written.
template <class Device>
Result<DeviceCache<Device>> build_device_cache(Device& dev, const DcpInputs& in,
                                               const DcpConfig& cfg, int64_t tp_rank) {
  DCP_GPU_ASSIGN(spec, rank_cache_spec(in, cfg, tp_rank));
  DCP_GPU_ASSIGN(plan, plan_pages(in, cfg));
  DCP_GPU_ASSIGN(cache, alloc_device_cache(dev, spec, rank_kv_scales(in, spec), plan.tables,
                                           plan.shared_pages, in.retired));
  for (int64_t b = 0; b < in.requests(); ++b) {
    if (b == in.retired && !plan.freed.empty()) {  // the retired requests free their pages
      DCP_GPU_ASSIGN(flags, dev.download(cache.written));
      for (const int32_t page : plan.freed)
        std::fill_n(flags.begin() + int64_t{page} * spec.page_size, spec.page_size, uint8_t{0});
      DCP_GPU_ASSIGN(cleared, dev.upload(std::move(flags)));
      cache.written = std::move(cleared);
    }
    int64_t pos0 = plan.write_from(b, cfg.layout.ranks);
    for (const int64_t len : write_chunks(in, b, pos0)) {
      DCP_GPU_TRY(stop_point(cfg, "between the KV writes"));
      ChunkRows c = chunk_rows(in, spec, pos0, len, b);
      DCP_GPU_ASSIGN(kc, dev.upload(std::move(c.k)));
      DCP_GPU_ASSIGN(vc, dev.upload(std::move(c.v)));
      DCP_GPU_ASSIGN(ksc, dev.upload(std::move(c.k_scale)));
      DCP_GPU_ASSIGN(vsc, dev.upload(std::move(c.v_scale)));
      DCP_GPU_TRY(write_device_chunk(
          dev, cache,
          KvChunk{pos0, len, c.dtype, kc.data(), spec.shared_latent ? nullptr : vc.data(),
                  c.quantize, ksc.size() > 0 ? ksc.data() : nullptr,
                  vsc.size() > 0 ? vsc.data() : nullptr},
          b));
      DCP_GPU_TRY(dev.sync());  // the chunk buffers are freed next
      pos0 += len;
    }
  }
  DCP_GPU_ASSIGN(flags, dev.download(cache.written));
  DCP_GPU_ASSIGN(tables, dev.download(cache.block_table));  // as the readers will find the rows
  for (int64_t b = in.retired; b < in.requests(); ++b) {
    const int64_t missing = first_unwritten_row(
        flags, cfg.layout.count(spec.rank, in.request_seq(b)),
        tables.empty() ? nullptr : tables.data() + b * spec.table_pages(), spec.page_size);
    if (missing >= 0)
      return DCP_GPU_ERROR("kv cache: rank ", spec.rank, " row ", missing, " (position ",
                           cfg.layout.position(spec.rank, missing),
                           in.batched() ? " of request " + std::to_string(b) : std::string(),
                           ") was never written");
  }
  return cache;
}

// The step of dcp_step.hpp (queries, partial attention, ag_rs or a2a combine, rounding) on the
// device. q: the rank's queries ([T, H_loc, Dk], or [T, Hg, Dk] with replicate-q) when the
// caller computes them (the MLA slice); nullptr takes them from in.q.
template <class Device>
Result<RankStepOutput> device_step(Device& dev, const DcpInputs& in, const DcpConfig& cfg,
                                   int64_t tp_rank, const std::vector<float>* q = nullptr) {
  using Schedule = typename Device::Schedule;
  DCP_GPU_ASSIGN(geo, DcpGeometry::create(cfg, in.dims));
  const AttentionDims& d = in.dims;
  const int64_t N = geo.n, T = d.tokens, Hl = geo.h_loc, Hg = geo.hg, dk = d.head_dim, dv = d.v_dim,
                me = geo.dcp_rank(tp_rank);
  DCP_GPU_TRY(check_group_comm(geo, tp_rank, dev.rank(), dev.size()));
  const int64_t q_heads_in = cfg.replicate_q ? Hg : Hl;
  if (q != nullptr && q->size() != static_cast<size_t>(T * q_heads_in * dk))
    return DCP_GPU_ERROR("tensor 'q' on tp rank ", tp_rank, ": ", q->size(), " elements; expected ",
                         T * q_heads_in * dk);
  DCP_GPU_ASSIGN(cache, build_device_cache(dev, in, cfg, tp_rank));

  // 1. Queries of the whole group: [T, Hg, Dk].
  DCP_GPU_ASSIGN(qg, dev.upload(q != nullptr ? *q : rank_queries(in, cfg, geo, tp_rank)));
  if (!cfg.replicate_q) {
    DCP_GPU_ASSIGN(recv, dev.template alloc<float>(static_cast<size_t>(N * T * Hl * dk)));
    DCP_GPU_ASSIGN(all, dev.template alloc<float>(static_cast<size_t>(T * Hg * dk)));
    DCP_GPU_TRY(dev.all_gather(qg.data(), T * Hl * dk, recv.data()));
    for (int64_t r = 0; r < N; ++r)  // recv [r, t, hl, :] -> qg [t, r Hl + hl, :]
      DCP_GPU_TRY(dev.copy_rows(RowCopy{all.data() + r * Hl * dk, Hg * dk,
                                        recv.data() + r * T * Hl * dk, Hl * dk, Hl * dk, T}));
    DCP_GPU_TRY(dev.sync());  // recv is freed at the end of this scope
    qg = std::move(all);
  }

  // 2. Partial attention over this rank's tokens.
  DCP_GPU_ASSIGN(q_pos, dev.upload(in.q_pos));
  const int64_t head0 = geo.group_head0(tp_rank);
  // The per-head vectors' slices of the group's heads, on the ranks that take them.
  std::vector<typename Device::template Buffer<float>> heads_d;
  for (const HeadVector& hv : kHeadVectors) {
    const std::vector<float>& x = in.*hv.values;
    const bool here = !x.empty() && (!hv.sink_rank_only || me == kSinkRank);
    DCP_GPU_ASSIGN(slice,
                   dev.upload(here ? std::vector<float>(x.begin() + head0, x.begin() + head0 + Hg)
                                   : std::vector<float>{}));
    heads_d.push_back(std::move(slice));
  }
  DCP_GPU_ASSIGN(topk, dev.upload(in.topk));
  // A batch: each token's request, the requests' lengths, their block tables (the cache's).
  std::vector<int64_t> req, req_seq;
  for (int64_t t = 0; in.batched() && t < T; ++t) req.push_back(in.request_of(t));
  for (int64_t b = 0; in.batched() && b < in.requests(); ++b) req_seq.push_back(in.request_seq(b));
  DCP_GPU_ASSIGN(req_d, dev.upload(req));
  DCP_GPU_ASSIGN(req_seq_d, dev.upload(req_seq));
  DCP_GPU_ASSIGN(po, dev.template alloc<float>(static_cast<size_t>(T * Hg * dv)));
  DCP_GPU_ASSIGN(pl, dev.template alloc<float>(static_cast<size_t>(T * Hg)));
  PartialAttentionParams p = rank_attention_params(in, cfg, geo, cache.spec, tp_rank);
  p.q = qg.data();
  p.q_pos = q_pos.data();
  p.kv = cache.view();
  for (size_t i = 0; i < std::size(kHeadVectors); ++i)
    p.*kHeadVectors[i].param = heads_d[i].size() > 0 ? heads_d[i].data() : nullptr;
  p.topk = in.topk.empty() ? nullptr : topk.data();
  if (in.batched()) {
    p.requests = in.requests();
    p.req = req_d.data();
    p.req_seq = req_seq_d.data();
    p.req_tables = cache.block_table.data();
    p.table_stride = cache.spec.table_pages();
  }
  p.o = po.data();
  p.lse = pl.data();
  DCP_GPU_TRY(validate_partial_attention(p));  // the device adds its own limits
  DCP_GPU_TRY(stop_point(cfg, "before the attention"));
  DCP_GPU_TRY(dev.partial_attention(p));
  DCP_GPU_TRY(dev.round(po.data(), T * Hg * dv, cfg.math.partial));  // the partial as stored

  // 3. Combine, handing each rank back its own H_loc heads.
  DCP_GPU_TRY(stop_point(cfg, "before the combine"));
  DCP_GPU_ASSIGN(sched, make_schedule<Schedule>(N, cfg.order, cfg.order_seed));
  DCP_GPU_ASSIGN(o, dev.template alloc<float>(static_cast<size_t>(T * Hl * dv)));
  DCP_GPU_ASSIGN(lse, dev.template alloc<float>(static_cast<size_t>(T * Hl)));
  const body::CombineShape shape{T, Hl, dv, N};
  if (cfg.strategy == CommStrategy::ag_rs) {
    DCP_GPU_ASSIGN(lse_all, dev.template alloc<float>(static_cast<size_t>(N * T * Hg)));
    DCP_GPU_ASSIGN(send, dev.template alloc<float>(static_cast<size_t>(N * T * Hl * dv)));
    DCP_GPU_TRY(dev.all_gather(pl.data(), T * Hg, lse_all.data()));
    DCP_GPU_TRY(dev.agrs_scale(body::AgRsScale<Schedule>{.shape = shape,
                                                         .me = me,
                                                         .base = cfg.base,
                                                         .exp = cfg.math.exp,
                                                         .merge = cfg.math.merge,
                                                         .sched = sched,
                                                         .partial_o = po.data(),
                                                         .partial_lse = pl.data(),
                                                         .lse_all = lse_all.data(),
                                                         .send = send.data(),
                                                         .lse_out = lse.data()}));
    DCP_GPU_TRY(dev.reduce_scatter_sum(send.data(), T * Hl * dv, o.data(),
                                       SumSpec{cfg.order, cfg.order_seed, cfg.math.merge}));
  } else {
    const size_t block = static_cast<size_t>(T * Hl * (dv + 1));
    DCP_GPU_ASSIGN(send, dev.template alloc<float>(static_cast<size_t>(N) * block));
    DCP_GPU_ASSIGN(recv, dev.template alloc<float>(static_cast<size_t>(N) * block));
    DCP_GPU_TRY(dev.a2a_pack(body::A2aPack{
        .shape = shape, .partial_o = po.data(), .partial_lse = pl.data(), .send = send.data()}));
    DCP_GPU_TRY(dev.all_to_all(send.data(), static_cast<int64_t>(block), recv.data()));
    DCP_GPU_TRY(dev.a2a_combine(body::A2aCombine<Schedule>{.shape = shape,
                                                           .base = cfg.base,
                                                           .exp = cfg.math.exp,
                                                           .sched = sched,
                                                           .recv = recv.data(),
                                                           .o = o.data(),
                                                           .lse = lse.data()}));
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
