// kernels.hpp — the CUDA kernels of the DCP path, as launchers callable from host code.
//
// Compiled as C++17 by nvcc (CMake 3.25 cannot ask nvcc for C++20), so nothing here or in what
// it includes may need C++20. Each launcher checks its arguments (one-line errors), enqueues on
// `stream` and returns. What each thread computes is in kernel_bodies.hpp, which tests/cuda_host
// also runs on the CPU; the math is the host path's: layout.hpp for where tokens live, merge.hpp
// for every LSE merge, dtype.hpp for rounding, convention.hpp for LSE base, empty shard and sink.
// All arithmetic is fp32 on CUDA cores (no tensor cores), so the backend claims the host backend's
// arithmetic (round-to-nearest adds, fp32 accumulation; properties/dcp_bridge.hpp host_claim).
//
//   DCP_GPU_TRY(launch_kv_write(spec, cache, pos0, len, k_chunk, v_chunk, stream));
//   DCP_GPU_TRY(launch_partial_attention(p, stream));        // p holds device pointers
//   DCP_GPU_TRY(launch_a2a_pack(...));  all_to_all;  DCP_GPU_TRY(launch_a2a_combine(...));
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/cuda/kernel_bodies.hpp"
#include "gpu/cuda/launch_checks.hpp"
#include "gpu/dtype.hpp"
#include "gpu/kv_cache.hpp"
#include "gpu/merge.hpp"
#include "gpu/partial_attention.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

// Stores the tokens of chunk [pos0, pos0 + len) that spec.rank owns, rounded to spec.dtype.
// k [len, kv_heads, Dk], v [len, kv_heads, Dv] (nullptr for a shared latent), device memory.
// Fails when the chunk needs a row beyond spec.physical_rows.
GpuStatus launch_kv_write(const KvCacheSpec& spec, DeviceCacheView cache, int64_t pos0, int64_t len,
                          const float* k, const float* v, cudaStream_t stream);

// partial_attention.hpp's contract on device pointers: fills p.o [T, heads, Dv] and p.lse
// [T, heads]. One block per (token, head, split) runs the online softmax over tiles of p.tile
// keys; split partials are merged left to right by a second kernel. Temporary memory comes from
// the stream-ordered allocator. Limits: check_attention_launch (launch_checks.hpp).
GpuStatus launch_partial_attention(const PartialAttentionParams& p, cudaStream_t stream);

// ag_rs after the LSE AllGather: for every (destination d, token t, local head hl) of the
// group's heads x = t Hg + d Hl + hl, the group LSE L = merge of lse_all[r][x] over ranks in
// `sched`'s order, and send [d, t, hl, :] = base^(L_r - L) O_r[x] (0 for an empty partial).
// The rank's own slice of L goes to lse_out [T, Hl].
GpuStatus launch_agrs_scale(const float* partial_o, const float* partial_lse, const float* lse_all,
                            int64_t tokens, int64_t local_heads, int64_t v_dim, int64_t me,
                            LseBase base, const ReduceSchedule& sched, float* send, float* lse_out,
                            cudaStream_t stream);

// a2a before the All-to-All: send [d, t, hl, 0 .. Dv) = O_r of head d Hl + hl, and
// send [d, t, hl, Dv] = its L_r.
GpuStatus launch_a2a_pack(const float* partial_o, const float* partial_lse, int64_t tokens,
                          int64_t local_heads, int64_t v_dim, int64_t ranks, float* send,
                          cudaStream_t stream);

// a2a after the All-to-All: merges the N received partials of every (t, hl) in `sched`'s order
// into o [T, Hl, Dv] and lse [T, Hl].
GpuStatus launch_a2a_combine(const float* recv, int64_t tokens, int64_t local_heads, int64_t v_dim,
                             LseBase base, const ReduceSchedule& sched, float* o, float* lse,
                             cudaStream_t stream);

// out [count] = sum over the schedule's ranks s of blocks[s][0 .. count) in its order; blocks
// is a host array of sched.ranks device pointers.
GpuStatus launch_ordered_sum(const float* const* blocks, int64_t count, const ReduceSchedule& sched,
                             float* out, cudaStream_t stream);

// x <- round_to(dtype, x) elementwise.
GpuStatus launch_round(float* x, int64_t n, Dtype dtype, cudaStream_t stream);

}  // namespace dcp::gpu
