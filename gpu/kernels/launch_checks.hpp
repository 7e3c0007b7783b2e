// launch_checks.hpp — the kernels' limits and argument checks, and the reduction schedules they
// follow, as plain C++: every device's launchers (the CUDA kernels, the host device, the CPU
// emulation of the CUDA grids) call the same functions, and all of them build without nvcc.
//
//   Result<body::KvWrite> a = kv_write_args(spec, cache, KvChunk{pos0, len, dtype, k, v});
//   DCP_GPU_TRY(check_attention_launch(p));
//   Result<ReduceSchedule> sched = make_schedule<ReduceSchedule>(N, cfg.order, cfg.order_seed);
#pragma once

#include <cstdint>

#include "gpu/kernels/attention_params.hpp"
#include "gpu/kernels/bodies.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/merge.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

// Shared memory a block may use without opting in to more (every architecture since sm_20).
inline constexpr int64_t kMaxAttentionSmemBytes = 48 * 1024;
// The attention kernel's static shared memory: one float per warp for the block max.
inline constexpr int64_t kAttentionStaticSmemBytes =
    kAttentionThreads / 32 * static_cast<int64_t>(sizeof(float));
// The largest gridDim.y (the attention kernel's splits).
inline constexpr int64_t kMaxGridY = 65535;

// A rank count a merge of `capacity` slots holds (1 .. capacity), named by `what` in the error.
GpuStatus check_merge_ranks(const char* what, int64_t ranks, int64_t capacity);

// The ReduceOrder as a device runs it (bodies.hpp), built by reduce_slots so that every device
// reduces in the same tree; refuses more ranks than the schedule holds.
template <class Sched>
Result<Sched> make_schedule(int64_t ranks, ReduceOrder order, uint64_t seed) {
  DCP_GPU_TRY(check_merge_ranks("reduce schedule", ranks, Sched::kCapacity));
  Sched s;
  s.ranks = static_cast<int32_t>(ranks);
  s.root = static_cast<int32_t>(reduce_slots(ranks, order, seed, [&](int64_t dst, int64_t src) {
    s.dst[s.steps] = static_cast<int16_t>(dst);
    s.src[s.steps] = static_cast<int16_t>(src);
    ++s.steps;
  }));
  return s;
}

// One KV write as a writer hands it over: positions [pos0, pos0 + len), k [len, kv_heads, Dk] and
// v [len, kv_heads, Dv] (nullptr for a shared latent) in the device's memory, elements of dtype:
// the cache's stored elements (rounded to its format), or with `quantize` values, which the cache
// stores as x / scale rounded to its format (kv_view.hpp), as an engine's quantizing write does.
struct KvChunk {
  int64_t pos0 = 0, len = 0;
  StorageFormat dtype = StorageFormat::f32;
  const void* k = nullptr;
  const void* v = nullptr;
  bool quantize = false;
  // A cache's scales by token: the chunk's rows' [len, scale_heads] (ChunkRows), stored with them
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
};

// A KV write's arguments, checked: a valid chunk, every row it needs inside the cache, its
// tensors present.
Result<body::KvWrite> kv_write_args(const KvCacheSpec& spec, const KvView& cache,
                                    const KvChunk& chunk);

// Dynamic shared memory of an attention block: q [Dk] and the tile's scores [tile], floats.
int64_t attention_smem_bytes(const PartialAttentionParams& p);

// attention_params.hpp's checks, then the CUDA kernel's limits: Dv <= kMaxAttentionVDim, shared
// memory, splits <= kMaxGridY.
GpuStatus check_attention_launch(const PartialAttentionParams& p);

}  // namespace dcp::gpu
