#include "gpu/host/host_device.hpp"

#include <algorithm>
#include <span>

namespace dcp::gpu {

Result<Communicator*> HostDevice::comm(const char* what) {
  if (comm_ == nullptr) return DCP_GPU_ERROR("host device: ", what, " without a communicator");
  return comm_;
}

GpuStatus HostDevice::copy_rows(const RowCopy& c) {
  for (int64_t r = 0; r < c.rows; ++r)
    std::copy_n(c.src + r * c.src_pitch, c.width, c.dst + r * c.dst_pitch);
  return {};
}

GpuStatus HostDevice::kv_write(const body::KvWrite& a) {
  // Only the threads of the rows this rank owns do anything; visit just those.
  const int64_t per_row = a.cache.kv_heads * body::kv_write_width(a);
  const int64_t first = a.layout.count(a.rank, a.pos0),
                last = a.layout.count(a.rank, a.pos0 + a.len);
  for (int64_t row = first; row < last; ++row) {
    const int64_t i = a.layout.position(a.rank, row) - a.pos0;
    for (int64_t x = i * per_row; x < (i + 1) * per_row; ++x) body::kv_write(a, x);
  }
  return {};
}

GpuStatus HostDevice::attention_blocks(const PartialAttentionParams& p, std::vector<float>& split_o,
                                       std::vector<float>& split_lse) {
  const int64_t rows = p.tokens * p.heads;
  split_o.assign(static_cast<size_t>(p.splits * rows * p.v_dim), 0.0f);
  split_lse.assign(static_cast<size_t>(p.splits * rows), 0.0f);
  std::vector<int64_t> topk_rows, topk_counts;
  if (p.topk != nullptr) {
    topk_rows.assign(static_cast<size_t>(std::max<int64_t>(1, p.tokens * p.topk_k)), -1);
    topk_counts.assign(static_cast<size_t>(p.tokens), 0);
    for (int64_t t = 0; t < p.tokens; ++t)
      body::topk_rows(p, t, topk_rows.data(), topk_counts.data());
  }
  std::vector<float> qs(static_cast<size_t>(p.head_dim)), s(static_cast<size_t>(p.tile));
  const body::AttentionBlock b{p.topk != nullptr ? topk_rows.data() : nullptr,
                               topk_counts.data(),
                               split_o.data(),
                               split_lse.data(),
                               qs.data(),
                               s.data()};
  HostBlock blk(p.v_dim);
  for (int64_t sp = 0; sp < p.splits; ++sp)
    for (int64_t row = 0; row < rows; ++row) {
      if (stop_ && stop_())
        return DCP_GPU_ERROR("stopped in the attention on rank ", p.rank, " (split ", sp, ", row ",
                             row, " of ", rows, ")");
      body::partial_attention(blk, p, b, row, sp);
    }
  return {};
}

GpuStatus HostDevice::partial_attention(const PartialAttentionParams& p) {
  std::vector<float> split_o, split_lse;
  DCP_GPU_TRY(attention_blocks(p, split_o, split_lse));
  const body::SplitCombine c = body::split_combine_of(p, split_o.data(), split_lse.data());
  for (int64_t x = 0; x < c.rows; ++x) body::split_combine(c, x, 0, 1);
  return {};
}

GpuStatus HostDevice::agrs_scale(const body::AgRsScale<Schedule>& a) {
  std::vector<MergeAcc> acc(static_cast<size_t>(a.sched.ranks));
  for (int64_t y = 0; y < a.shape.dest_rows(); ++y) body::agrs_scale(a, y, 0, 1, acc.data());
  return {};
}

GpuStatus HostDevice::a2a_pack(const body::A2aPack& a) {
  for (int64_t y = 0; y < a.shape.dest_rows(); ++y) body::a2a_pack(a, y, 0, 1);
  return {};
}

GpuStatus HostDevice::a2a_combine(const body::A2aCombine<Schedule>& a) {
  std::vector<MergeAcc> acc(static_cast<size_t>(a.sched.ranks));
  std::vector<float> num(static_cast<size_t>(a.sched.ranks));
  for (int64_t y = 0; y < a.shape.tokens * a.shape.local_heads; ++y)
    body::a2a_combine(a, y, 0, 1, acc.data(), num.data());
  return {};
}

GpuStatus HostDevice::round(float* x, int64_t n, StorageFormat dtype) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_to(dtype, x[i]);
  return {};
}

GpuStatus HostDevice::all_gather(const float* send, int64_t count, float* recv) {
  DCP_GPU_ASSIGN(c, comm("all_gather"));
  return c->all_gather(std::span<const float>(send, static_cast<size_t>(count)),
                       std::span<float>(recv, static_cast<size_t>(size() * count)));
}

GpuStatus HostDevice::all_to_all(const float* send, int64_t count, float* recv) {
  DCP_GPU_ASSIGN(c, comm("all_to_all"));
  const size_t n = static_cast<size_t>(size() * count);
  return c->all_to_all(std::span<const float>(send, n), std::span<float>(recv, n));
}

GpuStatus HostDevice::reduce_scatter_sum(const float* send, int64_t count, float* recv,
                                         const SumSpec& how) {
  DCP_GPU_ASSIGN(c, comm("reduce_scatter_sum"));
  return c->reduce_scatter_sum(std::span<const float>(send, static_cast<size_t>(size() * count)),
                               std::span<float>(recv, static_cast<size_t>(count)), how);
}

Result<HostKvCache> build_rank_cache(const DcpInputs& in, const DcpConfig& cfg, int64_t tp_rank) {
  HostDevice dev(nullptr);
  return build_device_cache(dev, in, cfg, tp_rank);
}

Result<RankStepOutput> run_tp_rank(Communicator& comm, const DcpInputs& in, const DcpConfig& cfg,
                                   int64_t tp_rank, const std::vector<float>* q) {
  HostDevice dev(&comm, cfg.stop);
  return device_step(dev, in, cfg, tp_rank, q);
}

}  // namespace dcp::gpu
