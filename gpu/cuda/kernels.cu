// kernels.cu — the CUDA kernels of the DCP path (kernels.hpp). Kept deliberately simple (fp32
// on CUDA cores, one block per output row) until they have run on a GPU: correctness first,
// measured by the property suite against the oracle; speed is tools/gpu-check's business.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/kernels/convention.hpp"
#include "gpu/kernels/launch_checks.hpp"
#include "gpu/kernels/layout.hpp"

namespace dcp::gpu {
namespace {

// Threads per block of the elementwise kernels.
constexpr int kElementThreads = 256;

int64_t blocks_for(int64_t n, int64_t threads) { return (n + threads - 1) / threads; }

// Each kernel computes its thread's indices and runs the body (bodies.hpp).

__global__ void kv_write_kernel(body::KvWrite a) {
  body::kv_write(a, blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
}

__global__ void topk_rows_kernel(PartialAttentionParams p, int64_t* rows, int64_t* counts) {
  body::topk_rows(p, blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, rows, counts);
}

// The attention block on the hardware: __syncthreads, and the block max by warp shuffles then
// one float per warp in shared memory (whole warps only).
static_assert(kAttentionThreads % 32 == 0, "the block max shuffles whole warps");
struct CudaBlock {
  float* red;  // [blockDim.x / 32]
  __device__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ int size() const { return static_cast<int>(blockDim.x); }
  __device__ void sync() const { __syncthreads(); }
  __device__ int64_t v_slots(int64_t) const { return kMaxVPerThread; }
  __device__ float* accumulators(float* local) const { return local; }
  __device__ float max(float v) const {
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int warp = tid() / 32, lane = tid() % 32;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float m = red[0];
    for (int w = 1; w < size() / 32; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    return m;
  }
};

// Grid (T * heads, splits), kAttentionThreads threads; dynamic shared memory (Dk + tile) floats.
__global__ void __launch_bounds__(kAttentionThreads)
    partial_attention_kernel(PartialAttentionParams p, body::AttentionBlock b) {
  extern __shared__ float smem[];
  __shared__ float red[kAttentionThreads / 32];
  CudaBlock blk{red};
  b.qs = smem;
  b.s = smem + p.head_dim;
  body::partial_attention(blk, p, b, blockIdx.x, blockIdx.y);
}

__global__ void split_combine_kernel(body::SplitCombine a) {
  body::split_combine(a, blockIdx.x, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

__global__ void agrs_scale_kernel(body::AgRsScale<ReduceSchedule> a) {
  MergeAcc acc[ReduceSchedule::kCapacity];
  body::agrs_scale(a, blockIdx.x, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), acc);
}

__global__ void a2a_pack_kernel(body::A2aPack a) {
  body::a2a_pack(a, blockIdx.x, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

__global__ void a2a_combine_kernel(body::A2aCombine<ReduceSchedule> a) {
  MergeAcc acc[ReduceSchedule::kCapacity];
  float num[ReduceSchedule::kCapacity];
  body::a2a_combine(a, blockIdx.x, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), acc,
                    num);
}

struct BlockPointers {
  const float* p[kMaxDeviceRanks];
};

__global__ void ordered_sum_kernel(BlockPointers blocks, int64_t count, ReduceSchedule sched,
                                   StorageFormat accum, float* out) {
  float v[ReduceSchedule::kCapacity];
  body::ordered_sum(blocks.p, count, sched, accum, out,
                    blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, v);
}

__global__ void round_kernel(float* x, int64_t n, StorageFormat dtype) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = round_to(dtype, x[i]);
}

// After a launch of `what` on `stream`: records it (a sticky fault found later names it) and
// returns the launch's error.
GpuStatus launched(const char* what, cudaStream_t stream) {
  // A fault of an earlier kernel may surface at this launch: it is named before this one is
  // recorded.
  const cudaError_t e = cudaGetLastError();
  if (sticky_error(e)) end_on_sticky_error(e, what, stream, __FILE__, __LINE__);
  note_launch(what, stream);
  if (e != cudaSuccess)
    return DCP_GPU_ERROR(what, ": launch failed: ", cudaGetErrorName(e), ": ",
                         cudaGetErrorString(e));
  return {};
}

// Stream-ordered scratch memory, returned to the pool (in stream order) when it goes out of
// scope, on every path.
class StreamScratch {
 public:
  explicit StreamScratch(cudaStream_t s) : s_(s) {}
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  ~StreamScratch() {
    for (void* p : ptrs_) cudaFreeAsync(p, s_);
  }
  // n elements (at least one, so every pointer is a real allocation).
  template <class T>
  GpuStatus alloc(T** out, int64_t n) {
    const size_t bytes = sizeof(T) * static_cast<size_t>(n > 1 ? n : 1);
    DCP_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(out), bytes, s_));
    ptrs_.push_back(*out);
    return {};
  }

 private:
  cudaStream_t s_;
  std::vector<void*> ptrs_;
};

}  // namespace

GpuStatus launch_kv_write(const body::KvWrite& a, cudaStream_t stream) {
  if (a.len == 0) return {};
  kv_write_kernel<<<blocks_for(body::kv_write_threads(a), kElementThreads), kElementThreads, 0,
                    stream>>>(a);
  return launched("kv write", stream);
}

GpuStatus launch_partial_attention(const PartialAttentionParams& p, cudaStream_t stream) {
  DCP_GPU_TRY(check_attention_launch(p));
  const int64_t smem = attention_smem_bytes(p);
  const int64_t rows = p.tokens * p.heads;
  StreamScratch scratch(stream);
  float* split_o = nullptr;
  float* split_lse = nullptr;
  int64_t* topk_rows = nullptr;
  int64_t* topk_counts = nullptr;
  DCP_GPU_TRY(scratch.alloc(&split_o, p.splits * rows * p.v_dim));
  DCP_GPU_TRY(scratch.alloc(&split_lse, p.splits * rows));
  if (p.topk != nullptr) {
    DCP_GPU_TRY(scratch.alloc(&topk_rows, p.tokens * p.topk_k));
    DCP_GPU_TRY(scratch.alloc(&topk_counts, p.tokens));
    topk_rows_kernel<<<blocks_for(p.tokens, kElementThreads), kElementThreads, 0, stream>>>(
        p, topk_rows, topk_counts);
    DCP_GPU_TRY(launched("top-k rows", stream));
  }
  body::AttentionBlock b;
  b.topk_rows = topk_rows;
  b.topk_counts = topk_counts;
  b.split_o = split_o;
  b.split_lse = split_lse;
  partial_attention_kernel<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(p.splits)),
                             kAttentionThreads, smem, stream>>>(p, b);
  DCP_GPU_TRY(launched("partial attention", stream));
  const body::SplitCombine c = body::split_combine_of(p, split_o, split_lse);
  split_combine_kernel<<<static_cast<unsigned>(rows), kAttentionThreads, 0, stream>>>(c);
  return launched("split combine", stream);
}

GpuStatus launch_agrs_scale(const body::AgRsScale<ReduceSchedule>& a, cudaStream_t stream) {
  agrs_scale_kernel<<<static_cast<unsigned>(a.shape.dest_rows()), kAttentionThreads, 0, stream>>>(
      a);
  return launched("ag_rs scale", stream);
}

GpuStatus launch_a2a_pack(const body::A2aPack& a, cudaStream_t stream) {
  a2a_pack_kernel<<<static_cast<unsigned>(a.shape.dest_rows()), kAttentionThreads, 0, stream>>>(a);
  return launched("a2a pack", stream);
}

GpuStatus launch_a2a_combine(const body::A2aCombine<ReduceSchedule>& a, cudaStream_t stream) {
  a2a_combine_kernel<<<static_cast<unsigned>(a.shape.tokens * a.shape.local_heads),
                       kAttentionThreads, 0, stream>>>(a);
  return launched("a2a combine", stream);
}

GpuStatus launch_ordered_sum(const float* const* blocks, int64_t count, const ReduceSchedule& sched,
                             StorageFormat accum, float* out, cudaStream_t stream) {
  if (count == 0) return {};
  BlockPointers b{};
  std::copy(blocks, blocks + sched.ranks, b.p);
  ordered_sum_kernel<<<blocks_for(count, kElementThreads), kElementThreads, 0, stream>>>(
      b, count, sched, accum, out);
  return launched("ordered sum", stream);
}

GpuStatus launch_round(float* x, int64_t n, StorageFormat dtype, cudaStream_t stream) {
  if (dtype == StorageFormat::f32 || n == 0) return {};
  round_kernel<<<blocks_for(n, kElementThreads), kElementThreads, 0, stream>>>(x, n, dtype);
  return launched("round", stream);
}

}  // namespace dcp::gpu
