// kernels.hpp — the CUDA kernels of the DCP path, as launchers callable from host code.
//
// Compiled as C++17 by nvcc (CMake 3.25 cannot ask nvcc for C++20), so nothing here or in what
// it includes may need C++20. Each launcher takes the params struct of its body (bodies.hpp,
// device pointers), enqueues on `stream` and returns; what each thread computes is the body,
// which the host device and the CPU emulation run too. All arithmetic is fp32 on CUDA cores (no
// tensor cores), so the backend claims the host backend's arithmetic (round-to-nearest adds, fp32
// accumulation; properties/dcp_bridge.hpp host_claim).
//
//   DCP_GPU_ASSIGN(a, kv_write_args(spec, view, KvChunk{pos0, len, dtype, k_chunk, v_chunk}));
//   DCP_GPU_TRY(launch_kv_write(a, stream));
//   DCP_GPU_TRY(launch_partial_attention(p, stream));        // p holds device pointers
//   DCP_GPU_TRY(launch_a2a_pack(pack, stream));  all_to_all;  DCP_GPU_TRY(launch_a2a_combine(...));
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/kernels/attention_params.hpp"
#include "gpu/kernels/bodies.hpp"
#include "gpu/kernels/launch_checks.hpp"
#include "gpu/kernels/storage_format.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

// Stores the tokens of the write's chunk that its rank owns, rounded to its format; arguments
// from kv_write_args (checked).
GpuStatus launch_kv_write(const body::KvWrite& a, cudaStream_t stream);

// attention_params.hpp's contract on device pointers: fills p.o [T, heads, Dv] and p.lse
// [T, heads]. One block per (token, head, split) runs the online softmax over tiles of p.tile
// keys; split partials are merged left to right by a second kernel. Temporary memory comes from
// the stream-ordered allocator. Limits: check_attention_launch (launch_checks.hpp).
GpuStatus launch_partial_attention(const PartialAttentionParams& p, cudaStream_t stream);

// ag_rs after the LSE AllGather (body::agrs_scale).
GpuStatus launch_agrs_scale(const body::AgRsScale<ReduceSchedule>& a, cudaStream_t stream);

// a2a before the All-to-All (body::a2a_pack).
GpuStatus launch_a2a_pack(const body::A2aPack& a, cudaStream_t stream);

// a2a after the All-to-All (body::a2a_combine).
GpuStatus launch_a2a_combine(const body::A2aCombine<ReduceSchedule>& a, cudaStream_t stream);

// out [count] = sum over the schedule's ranks s of blocks[s][0 .. count) in its order, each
// partial sum rounded to accum; blocks is a host array of sched.ranks device pointers.
GpuStatus launch_ordered_sum(const float* const* blocks, int64_t count, const ReduceSchedule& sched,
                             StorageFormat accum, float* out, cudaStream_t stream);

// x <- round_to(dtype, x) elementwise.
GpuStatus launch_round(float* x, int64_t n, StorageFormat dtype, cudaStream_t stream);

}  // namespace dcp::gpu
