// launch_checks.hpp — the CUDA kernels' limits and argument checks, and the reduction schedules
// they follow, as plain C++: the launchers (kernels.cu) and the CPU emulation of the kernels
// (tests/cuda_emulated) call the same functions, and both build without nvcc.
//
//   Result<body::KvWrite> a = kv_write_args(spec, cache, pos0, len, k, v);   // checked
//   DCP_GPU_TRY(check_attention_launch(p));
//   Result<ReduceSchedule> sched = make_schedule(N, cfg.order, cfg.order_seed);
#pragma once

#include <cstdint>

#include "gpu/cuda/kernel_bodies.hpp"
#include "gpu/kv_cache.hpp"
#include "gpu/merge.hpp"
#include "gpu/partial_attention.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

// Shared memory a block may use without opting in to more (every architecture since sm_20).
inline constexpr int64_t kMaxAttentionSmemBytes = 48 * 1024;
// The attention kernel's static shared memory: one float per warp for the block max.
inline constexpr int64_t kAttentionStaticSmemBytes =
    kAttentionThreads / 32 * static_cast<int64_t>(sizeof(float));
// The largest gridDim.y (the attention kernel's splits).
inline constexpr int64_t kMaxGridY = 65535;

// The ReduceOrder as the device runs it (kernel_bodies.hpp), built by reduce_slots so that both
// backends reduce in the same tree; refuses more than kMaxDeviceRanks ranks.
Result<ReduceSchedule> make_schedule(int64_t ranks, ReduceOrder order, uint64_t seed);

// A rank count the merge kernels hold (1 .. kMaxDeviceRanks), named by `what` in the error.
GpuStatus check_device_ranks(const char* what, int64_t ranks);

// A KV write's arguments, checked: a valid chunk, every row it needs inside the cache, its
// tensors present.
Result<body::KvWrite> kv_write_args(const KvCacheSpec& spec, DeviceCacheView cache, int64_t pos0,
                                    int64_t len, const float* k, const float* v);

// Dynamic shared memory of an attention block: q [Dk] and the tile's scores [tile], floats.
int64_t attention_smem_bytes(const PartialAttentionParams& p);

// partial_attention.hpp's checks, then the kernel's limits: Dv <= kMaxAttentionVDim, shared
// memory, splits <= kMaxGridY.
GpuStatus check_attention_launch(const PartialAttentionParams& p);

}  // namespace dcp::gpu
