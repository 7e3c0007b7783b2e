#include "tests/cuda_emulated/emulated_device.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "gpu/device_step.hpp"

namespace dcp::gpu::emu {
namespace {

// What uninitialized device memory holds in the emulation.
constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
// Floats of guard after the attention block's shared memory.
constexpr size_t kGuardFloats = 16;

}  // namespace

GpuStatus EmulatedDevice::kv_write(const body::KvWrite& a) {
  for (int64_t x = 0; x < body::kv_write_threads(a); ++x) body::kv_write(a, x);
  return {};
}

GpuStatus EmulatedDevice::partial_attention(const PartialAttentionParams& p) {
  DCP_GPU_TRY(check_attention_launch(p));
  if (p.v_dim > blocks_.threads() * kMaxVPerThread)
    return DCP_GPU_ERROR("emulated device: v_dim ", p.v_dim, " needs blocks of more than ",
                         blocks_.threads(), " threads");
  const int64_t rows = p.tokens * p.heads;
  // The GPU's scratch is uninitialized: here it holds NaN and -1, so an element a body forgets
  // to write shows in the output instead of reading a convenient 0.
  std::vector<float> split_o(static_cast<size_t>(p.splits * rows * p.v_dim), kPoison);
  std::vector<float> split_lse(static_cast<size_t>(p.splits * rows), kPoison);
  std::vector<int64_t> topk_rows, topk_counts;
  if (p.topk != nullptr) {
    topk_rows.assign(static_cast<size_t>(std::max<int64_t>(1, p.tokens * p.topk_k)), -1);
    topk_counts.assign(static_cast<size_t>(p.tokens), -1);
    for (int64_t t = 0; t < p.tokens; ++t)
      body::topk_rows(p, t, topk_rows.data(), topk_counts.data());
  }
  // The block's shared memory: q [Dk], then the tile's scores [tile]; poisoned before every
  // block (a read of a slot no thread wrote shows), with a guard after it (a write past it is an
  // error).
  const size_t used = static_cast<size_t>(attention_smem_bytes(p)) / sizeof(float);
  std::vector<float> smem(used + kGuardFloats);
  for (int64_t sp = 0; sp < p.splits; ++sp)
    for (int64_t row = 0; row < rows; ++row) {
      std::fill(smem.begin(), smem.end(), kPoison);
      const body::AttentionBlock b{p.topk != nullptr ? topk_rows.data() : nullptr,
                                   topk_counts.data(),
                                   split_o.data(),
                                   split_lse.data(),
                                   smem.data(),
                                   smem.data() + p.head_dim};
      DCP_GPU_TRY(
          blocks_.run([&](EmulatedThread& th) { body::partial_attention(th, p, b, row, sp); }));
      for (size_t i = used; i < smem.size(); ++i)
        if (!std::isnan(smem[i]))
          return DCP_GPU_ERROR("emulated device: the attention block wrote shared memory past its ",
                               used, " floats");
    }
  const body::SplitCombine c = body::split_combine_of(p, split_o.data(), split_lse.data());
  grid(rows, [&](int64_t x, int tid, int nt) { body::split_combine(c, x, tid, nt); });
  return {};
}

GpuStatus EmulatedDevice::agrs_scale(const body::AgRsScale<Schedule>& a) {
  std::vector<MergeAcc> acc(static_cast<size_t>(a.sched.ranks));  // one thread at a time
  grid(a.shape.dest_rows(),
       [&](int64_t y, int tid, int nt) { body::agrs_scale(a, y, tid, nt, acc.data()); });
  return {};
}

GpuStatus EmulatedDevice::a2a_pack(const body::A2aPack& a) {
  grid(a.shape.dest_rows(), [&](int64_t y, int tid, int nt) { body::a2a_pack(a, y, tid, nt); });
  return {};
}

GpuStatus EmulatedDevice::a2a_combine(const body::A2aCombine<Schedule>& a) {
  std::vector<MergeAcc> acc(static_cast<size_t>(a.sched.ranks));  // one thread at a time
  std::vector<float> num(static_cast<size_t>(a.sched.ranks));
  grid(a.shape.tokens * a.shape.local_heads, [&](int64_t y, int tid, int nt) {
    body::a2a_combine(a, y, tid, nt, acc.data(), num.data());
  });
  return {};
}

GpuStatus EmulatedDevice::reduce_scatter_sum(const float* send, int64_t count, float* recv,
                                             const SumSpec& how) {
  const Result<ReduceSchedule> sched = make_schedule<ReduceSchedule>(size(), how.order, how.seed);
  if (!sched) return sched.status();
  std::vector<float> blocks(static_cast<size_t>(size() * count));
  DCP_GPU_TRY(all_to_all(send, count, blocks.data()));
  std::vector<const float*> ptrs(static_cast<size_t>(size()));
  for (int64_t s = 0; s < size(); ++s) ptrs[static_cast<size_t>(s)] = blocks.data() + s * count;
  std::vector<float> v(static_cast<size_t>(size()));
  for (int64_t i = 0; i < count; ++i)
    body::ordered_sum(ptrs.data(), count, *sched, how.accum, recv, i, v.data());
  return {};
}

Result<GroupRun> run_dcp_emulated(const DcpInputs& in, const DcpConfig& cfg, int block_threads,
                                  ThreadOrder order) {
  DCP_GPU_TRY(validate_inputs(in, cfg));
  const DcpGeometry geo = *DcpGeometry::create(cfg, in.dims);
  GroupRun run = empty_group_run(geo, in.dims);
  DCP_GPU_TRY(for_each_tp_rank_threads(geo, cfg.deadline, [&](int64_t tp_rank, Communicator& comm) {
    BlockEmulator blocks(block_threads, order);
    EmulatedDevice dev(comm, blocks);
    Result<RankStepOutput> r = device_step(dev, in, cfg, tp_rank);
    if (!r) return r.status();
    place_rank_output(geo, in.dims, tp_rank, *r, run);
    return GpuStatus();
  }));
  return run;
}

}  // namespace dcp::gpu::emu
