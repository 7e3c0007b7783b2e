// kernels.cu — the CUDA kernels of the DCP path (kernels.hpp). Kept deliberately simple (fp32
// on CUDA cores, one block per output row) until they have run on a GPU: correctness first,
// measured by the property suite against the oracle; speed is tools/gpu-check's business.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "gpu/convention.hpp"
#include "gpu/cuda/cuda_status.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/layout.hpp"

namespace dcp::gpu {
namespace {

// Threads per block of the elementwise kernels.
constexpr int kElementThreads = 256;
// The largest gridDim.y (the splits of the attention kernel).
constexpr int64_t kMaxGridY = 65535;
// The attention kernel's static shared memory: one float per warp for the block max.
constexpr int64_t kAttentionStaticSmemBytes =
    kAttentionThreads / 32 * static_cast<int64_t>(sizeof(float));

int64_t blocks_for(int64_t n, int64_t threads) { return (n + threads - 1) / threads; }

// ---- KV write ---------------------------------------------------------------------------------

// One thread per (chunk row i, KV head, component): the owner keeps it at layout.row(pos).
__global__ void kv_write_kernel(DcpLayout lay, int64_t rank, int64_t pos0, int64_t len,
                                int64_t heads, int64_t dk, int64_t dv, bool latent, Dtype dtype,
                                const float* k, const float* v, DeviceCacheView cache) {
  const int64_t width = dk + (latent ? 0 : dv);
  const int64_t x = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (x >= len * heads * width) return;
  const int64_t i = x / (heads * width), h = x / width % heads, c = x % width;
  const int64_t pos = pos0 + i;
  if (lay.owner(pos) != rank) return;
  const int64_t row = lay.row(pos);
  if (c < dk)
    cache.k[(row * heads + h) * dk + c] = round_to(dtype, k[(i * heads + h) * dk + c]);
  else
    cache.v[(row * heads + h) * dv + (c - dk)] =
        round_to(dtype, v[(i * heads + h) * dv + (c - dk)]);
  if (h == 0 && c == 0) cache.written[row] = 1;
}

// ---- partial attention ------------------------------------------------------------------------

// Top-k: for every token, the rank-local rows of the selected positions inside the masks' key
// range that this rank owns, in increasing order (one thread per token; insertion sort keeps it
// obviously right; top-k lists are short).
__global__ void topk_rows_kernel(PartialAttentionParams p, int64_t* rows, int64_t* counts) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= p.tokens) return;
  const int64_t qp = p.q_pos[t];
  const int64_t hi = p.causal ? min(p.seq, qp + 1) : p.seq;
  const int64_t lo = p.window > 0 ? max(int64_t{0}, qp - p.window + 1) : 0;
  int64_t* out = rows + t * p.topk_k;
  int64_t n = 0;
  if (hi > lo) {
    for (int64_t x = 0; x < p.topk_k; ++x) {
      const int64_t pos = p.topk[t * p.topk_k + x];
      if (pos < lo || pos >= hi || p.layout.owner(pos) != p.rank) continue;  // -1 pads too
      const int64_t r = p.layout.row(pos);
      int64_t j = n++;
      for (; j > 0 && out[j - 1] > r; --j) out[j] = out[j - 1];
      out[j] = r;
    }
  }
  counts[t] = n;
}

__device__ float block_max(float v, float* red) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float m = red[0];
  for (int w = 1; w < static_cast<int>(blockDim.x) / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  return m;
}

// One block per (token, head) and split: the split's keys in tiles of p.tile, online softmax.
// Writes the split's partial (O_s, L_s) to split_o [splits, T, H, Dv], split_lse [splits, T, H].
__global__ void __launch_bounds__(kAttentionThreads)
    partial_attention_kernel(PartialAttentionParams p, const int64_t* topk_rows,
                             const int64_t* topk_counts, float* split_o, float* split_lse) {
  extern __shared__ float smem[];
  float* qs = smem;              // [Dk]
  float* s = smem + p.head_dim;  // [tile] scores, then weights
  __shared__ float red[kAttentionThreads / 32];
  const int64_t t = blockIdx.x / p.heads, h = blockIdx.x % p.heads, sp = blockIdx.y;
  const int64_t dk = p.head_dim, dv = p.v_dim;
  const int tid = threadIdx.x, nt = blockDim.x;
  const LseBase base = p.base;
  for (int64_t i = tid; i < dk; i += nt) qs[i] = p.q[(t * p.heads + h) * dk + i];

  // The rank's visible keys: a row range, or the token's sorted top-k rows.
  const int64_t qp = p.q_pos[t];
  int64_t nk = 0, r_lo = 0;
  const int64_t* list = nullptr;
  if (topk_rows != nullptr) {
    nk = topk_counts[t];
    list = topk_rows + t * p.topk_k;
  } else {
    const int64_t hi = p.causal ? min(p.seq, qp + 1) : p.seq;
    const int64_t lo = p.window > 0 ? max(int64_t{0}, qp - p.window + 1) : 0;
    if (hi > lo) {
      r_lo = p.layout.count(p.rank, lo);
      nk = p.layout.count(p.rank, hi) - r_lo;
    }
  }
  const int64_t group = p.q_heads_total / p.kv_heads_total;
  const int64_t g = (p.head0 + h) / group - p.kv_head0;  // global map, then local
  const int64_t k0 = nk * sp / p.splits, k1 = nk * (sp + 1) / p.splits;

  MergeAcc a;  // running (m, z) of this split, identical in every thread
  float num[kMaxVPerThread];
  for (int j = 0; j < kMaxVPerThread; ++j) num[j] = 0.0f;
  __syncthreads();
  for (int64_t t0 = k0; t0 < k1; t0 += p.tile) {
    const int64_t t1 = min(k1, t0 + p.tile);
    float m_loc = kEmptyLseF;
    for (int64_t x = t0 + tid; x < t1; x += nt) {
      const int64_t row = list != nullptr ? list[x] : r_lo + x;
      const float* kr = p.k + (row * p.kv_heads + g) * dk;
      float dot = 0.0f;
      for (int64_t i = 0; i < dk; ++i) dot += qs[i] * kr[i];
      float sc = dot * p.scale;
      if (p.softcap > 0.0f) sc = p.softcap * tanhf(sc / p.softcap);
      sc = to_base_units(base, sc);
      s[x - t0] = sc;
      m_loc = fmaxf(m_loc, sc);
    }
    const float m_tile = block_max(m_loc, red);
    const float m_new = fmaxf(a.m, m_tile);
    const float alpha = is_empty_lse(a.m) ? 0.0f : pow_base(base, a.m - m_new);
    for (int64_t x = t0 + tid; x < t1; x += nt) s[x - t0] = pow_base(base, s[x - t0] - m_new);
    __syncthreads();
    a.z *= alpha;
    for (int64_t x = t0; x < t1; ++x) a.z += s[x - t0];  // key order, as the host backend
    for (int j = 0; j < kMaxVPerThread; ++j) {
      const int64_t i = tid + static_cast<int64_t>(j) * nt;
      if (i >= dv) break;
      float n = num[j] * alpha;
      for (int64_t x = t0; x < t1; ++x) {
        const int64_t row = list != nullptr ? list[x] : r_lo + x;
        n += s[x - t0] * p.v[row * p.v_row_stride + g * p.v_head_stride + i];
      }
      num[j] = n;
    }
    a.m = m_new;
    __syncthreads();  // s is rewritten by the next tile
  }
  if (p.sink != nullptr && sp == 0) {  // the sink joins split 0's denominator only
    const float sg = to_base_units(base, p.sink[h]);
    const float m_new = fmaxf(a.m, sg);
    const float alpha = is_empty_lse(a.m) ? 0.0f : pow_base(base, a.m - m_new);
    a.z = a.z * alpha + pow_base(base, sg - m_new);
    for (int j = 0; j < kMaxVPerThread; ++j) num[j] *= alpha;
    a.m = m_new;
  }
  const int64_t row_out = (sp * p.tokens + t) * p.heads + h;
  float l = kEmptyLseF;
  for (int j = 0; j < kMaxVPerThread; ++j) {
    const int64_t i = tid + static_cast<int64_t>(j) * nt;
    if (i >= dv) break;
    l = finish(base, a, &num[j], 1);
    split_o[row_out * dv + i] = num[j];
  }
  if (tid == 0) split_lse[row_out] = l;
}

// Merges the splits of every (token, head) left to right (the local combine), per component.
__global__ void split_combine_kernel(int64_t splits, int64_t rows, int64_t dv, LseBase base,
                                     const float* split_o, const float* split_lse, float* o,
                                     float* lse) {
  const int64_t x = blockIdx.x;  // t * H + h
  for (int64_t i = threadIdx.x; i < dv; i += blockDim.x) {
    MergeAcc total = MergeAcc::from_partial(split_lse[x]);
    float n = split_o[x * dv + i];
    for (int64_t sp = 1; sp < splits; ++sp)
      merge_into(base, total, &n, MergeAcc::from_partial(split_lse[sp * rows + x]),
                 &split_o[(sp * rows + x) * dv + i], 1);
    const float l = finish(base, total, &n, 1);
    o[x * dv + i] = n;
    if (i == 0) lse[x] = l;
  }
}

// ---- combine ----------------------------------------------------------------------------------

// Folds slots per the schedule; acc and num are the ranks' states, in place.
__device__ float reduce_merge(const ReduceSchedule& sched, LseBase base, MergeAcc* acc, float* num,
                              float* out) {
  for (int32_t st = 0; st < sched.steps; ++st)
    merge_into(base, acc[sched.dst[st]], &num[sched.dst[st]], acc[sched.src[st]],
               &num[sched.src[st]], 1);
  *out = num[sched.root];
  return finish(base, acc[sched.root], out, 1);
}

__global__ void agrs_scale_kernel(const float* partial_o, const float* partial_lse,
                                  const float* lse_all, int64_t tokens, int64_t hl_n, int64_t dv,
                                  int64_t me, LseBase base, ReduceSchedule sched, float* send,
                                  float* lse_out) {
  const int64_t n = sched.ranks, hg = n * hl_n;
  const int64_t y = blockIdx.x;  // (dst, t, hl)
  const int64_t dst = y / (tokens * hl_n), t = y / hl_n % tokens, hl = y % hl_n;
  const int64_t x = t * hg + dst * hl_n + hl;
  MergeAcc acc[kMaxDeviceRanks];
  for (int64_t r = 0; r < n; ++r) acc[r] = MergeAcc::from_partial(lse_all[r * tokens * hg + x]);
  for (int32_t st = 0; st < sched.steps; ++st)
    merge_into(base, acc[sched.dst[st]], nullptr, acc[sched.src[st]], nullptr, 0);
  const float lg = finish(base, acc[sched.root], nullptr, 0);
  const float lr = partial_lse[x];
  const float w = is_empty_lse(lr) ? 0.0f : pow_base(base, lr - lg);
  for (int64_t i = threadIdx.x; i < dv; i += blockDim.x)
    send[y * dv + i] = w * partial_o[x * dv + i];
  if (dst == me && threadIdx.x == 0) lse_out[t * hl_n + hl] = lg;
}

__global__ void a2a_pack_kernel(const float* partial_o, const float* partial_lse, int64_t tokens,
                                int64_t hl_n, int64_t dv, int64_t ranks, float* send) {
  const int64_t y = blockIdx.x;  // (dst, t, hl)
  const int64_t dst = y / (tokens * hl_n), t = y / hl_n % tokens, hl = y % hl_n;
  const int64_t x = t * ranks * hl_n + dst * hl_n + hl;
  float* s = send + y * (dv + 1);
  for (int64_t i = threadIdx.x; i < dv; i += blockDim.x) s[i] = partial_o[x * dv + i];
  if (threadIdx.x == 0) s[dv] = partial_lse[x];
}

__global__ void a2a_combine_kernel(const float* recv, int64_t tokens, int64_t hl_n, int64_t dv,
                                   LseBase base, ReduceSchedule sched, float* o, float* lse) {
  const int64_t y = blockIdx.x;  // t * Hl + hl
  const int64_t w = dv + 1, block = tokens * hl_n * w;
  for (int64_t i = threadIdx.x; i < dv; i += blockDim.x) {
    MergeAcc acc[kMaxDeviceRanks];
    float num[kMaxDeviceRanks];
    for (int32_t s = 0; s < sched.ranks; ++s) {
      const float* r = recv + s * block + y * w;
      acc[s] = MergeAcc::from_partial(r[dv]);
      num[s] = r[i];
    }
    const float l = reduce_merge(sched, base, acc, num, &o[y * dv + i]);
    if (i == 0) lse[y] = l;
  }
}

struct BlockPointers {
  const float* p[kMaxDeviceRanks];
};

__global__ void ordered_sum_kernel(BlockPointers blocks, int64_t count, ReduceSchedule sched,
                                   float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  float v[kMaxDeviceRanks];
  for (int32_t s = 0; s < sched.ranks; ++s) v[s] = blocks.p[s][i];
  for (int32_t st = 0; st < sched.steps; ++st) v[sched.dst[st]] += v[sched.src[st]];
  out[i] = v[sched.root];
}

__global__ void round_kernel(float* x, int64_t n, Dtype dtype) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = round_to(dtype, x[i]);
}

GpuStatus launched(const char* what) {
  const cudaError_t e = cudaGetLastError();
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

GpuStatus check_ranks(const char* what, int64_t ranks) {
  if (ranks < 1 || ranks > kMaxDeviceRanks)
    return DCP_GPU_ERROR(what, ": ", ranks, " ranks; the CUDA backend supports 1 .. ",
                         kMaxDeviceRanks);
  return {};
}

}  // namespace

Result<ReduceSchedule> make_schedule(int64_t ranks, ReduceOrder order, uint64_t seed) {
  DCP_GPU_TRY(check_ranks("reduce schedule", ranks));
  ReduceSchedule s;
  s.ranks = static_cast<int32_t>(ranks);
  s.root = static_cast<int32_t>(reduce_slots(ranks, order, seed, [&](int64_t dst, int64_t src) {
    s.dst[s.steps] = static_cast<int8_t>(dst);
    s.src[s.steps] = static_cast<int8_t>(src);
    ++s.steps;
  }));
  return s;
}

GpuStatus launch_kv_write(const KvCacheSpec& spec, DeviceCacheView cache, int64_t pos0, int64_t len,
                          const float* k, const float* v, cudaStream_t stream) {
  DCP_GPU_TRY(validate_layout(spec.layout));
  if (pos0 < 0 || len < 0)
    return DCP_GPU_ERROR("kv write: chunk [", pos0, ", ", pos0 + len, ") is not a valid range");
  if (len == 0) return {};
  const int64_t need = spec.layout.count(spec.rank, pos0 + len);
  if (need > spec.physical_rows)
    return DCP_GPU_ERROR("kv write: rank ", spec.rank, " needs row ", need - 1, " for chunk [",
                         pos0, ", ", pos0 + len, ") but holds ", spec.physical_rows, " rows");
  if (k == nullptr || (!spec.shared_latent && v == nullptr))
    return DCP_GPU_ERROR("kv write: a chunk tensor pointer is null");
  const int64_t width = spec.head_dim + (spec.shared_latent ? 0 : spec.v_dim);
  const int64_t n = len * spec.kv_heads * width;
  kv_write_kernel<<<blocks_for(n, kElementThreads), kElementThreads, 0, stream>>>(
      spec.layout, spec.rank, pos0, len, spec.kv_heads, spec.head_dim, spec.v_dim,
      spec.shared_latent, spec.dtype, k, v, cache);
  return launched("kv write");
}

GpuStatus launch_partial_attention(const PartialAttentionParams& p, cudaStream_t stream) {
  DCP_GPU_TRY(validate_partial_attention(p));
  if (p.v_dim > kMaxAttentionVDim)
    return DCP_GPU_ERROR("partial attention: v_dim ", p.v_dim, " exceeds the CUDA kernel's ",
                         kMaxAttentionVDim);
  const int64_t smem = (p.head_dim + p.tile) * static_cast<int64_t>(sizeof(float));
  if (smem + kAttentionStaticSmemBytes > kMaxAttentionSmemBytes)
    return DCP_GPU_ERROR("partial attention: head_dim ", p.head_dim, " + tile ", p.tile,
                         " floats exceed the kernel's ", kMaxAttentionSmemBytes,
                         " bytes of shared memory");
  if (p.splits > kMaxGridY)
    return DCP_GPU_ERROR("partial attention: splits ", p.splits, " exceeds the grid's ", kMaxGridY);
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
    DCP_GPU_TRY(launched("top-k rows"));
  }
  partial_attention_kernel<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(p.splits)),
                             kAttentionThreads, smem, stream>>>(p, topk_rows, topk_counts, split_o,
                                                                split_lse);
  DCP_GPU_TRY(launched("partial attention"));
  split_combine_kernel<<<static_cast<unsigned>(rows), kAttentionThreads, 0, stream>>>(
      p.splits, rows, p.v_dim, p.base, split_o, split_lse, p.o, p.lse);
  return launched("split combine");
}

GpuStatus launch_agrs_scale(const float* partial_o, const float* partial_lse, const float* lse_all,
                            int64_t tokens, int64_t local_heads, int64_t v_dim, int64_t me,
                            LseBase base, const ReduceSchedule& sched, float* send, float* lse_out,
                            cudaStream_t stream) {
  const int64_t rows = sched.ranks * tokens * local_heads;
  agrs_scale_kernel<<<static_cast<unsigned>(rows), kAttentionThreads, 0, stream>>>(
      partial_o, partial_lse, lse_all, tokens, local_heads, v_dim, me, base, sched, send, lse_out);
  return launched("ag_rs scale");
}

GpuStatus launch_a2a_pack(const float* partial_o, const float* partial_lse, int64_t tokens,
                          int64_t local_heads, int64_t v_dim, int64_t ranks, float* send,
                          cudaStream_t stream) {
  DCP_GPU_TRY(check_ranks("a2a pack", ranks));
  a2a_pack_kernel<<<static_cast<unsigned>(ranks * tokens * local_heads), kAttentionThreads, 0,
                    stream>>>(partial_o, partial_lse, tokens, local_heads, v_dim, ranks, send);
  return launched("a2a pack");
}

GpuStatus launch_a2a_combine(const float* recv, int64_t tokens, int64_t local_heads, int64_t v_dim,
                             LseBase base, const ReduceSchedule& sched, float* o, float* lse,
                             cudaStream_t stream) {
  a2a_combine_kernel<<<static_cast<unsigned>(tokens * local_heads), kAttentionThreads, 0, stream>>>(
      recv, tokens, local_heads, v_dim, base, sched, o, lse);
  return launched("a2a combine");
}

GpuStatus launch_ordered_sum(const float* const* blocks, int64_t count, const ReduceSchedule& sched,
                             float* out, cudaStream_t stream) {
  if (count == 0) return {};
  BlockPointers b{};
  std::copy(blocks, blocks + sched.ranks, b.p);
  ordered_sum_kernel<<<blocks_for(count, kElementThreads), kElementThreads, 0, stream>>>(
      b, count, sched, out);
  return launched("ordered sum");
}

GpuStatus launch_round(float* x, int64_t n, Dtype dtype, cudaStream_t stream) {
  if (dtype == Dtype::f32 || n == 0) return {};
  round_kernel<<<blocks_for(n, kElementThreads), kElementThreads, 0, stream>>>(x, n, dtype);
  return launched("round");
}

}  // namespace dcp::gpu
