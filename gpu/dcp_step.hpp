// dcp_step.hpp — one DCP decode-attention step on one rank of the attention TP group.
//
// The TP group of tp ranks is cut into tp / N DCP groups of N consecutive ranks
// (dcp_rank = tp_rank mod N). With H_loc = Hq / tp query heads per TP rank, DCP group g covers
// the Hg = N H_loc consecutive heads starting at g N H_loc, and each of its ranks holds 1/N of
// the context (by token, layout.hpp) for the KV heads those heads read. A step is:
//   1. queries   gather: AllGather of q [T, H_loc, Dk] in the group -> [T, Hg, Dk]
//                replicate-q: the rank already holds q [T, Hg, Dk]; no communication
//   2. attention partial_attention over the rank's tokens -> O_r [T, Hg, Dv], L_r [T, Hg]
//                O_r stored in math.partial (the LSE in fp32)
//   3. combine   ag_rs: AllGather L_r; scale O_r by base^(L_r - L); ReduceScatter by head,
//                       summed in math.merge
//                a2a:   pack (O_r, L_r) by destination head slice; All-to-All; local merge
//   -> O [T, H_loc, Dv] and LSE [T, H_loc] for the rank's own heads, rounded to out_dtype.
// The kernels' arithmetic (exponential, P cast, tf32 operands) is math's (kernel_math.hpp).
// GQA: query head h reads KV head h / (Hq / Hkv) on *global* head indices on every rank.
//
// The step itself is device_step.hpp's, for every device.
//
//   DcpGeometry geo = *DcpGeometry::create(cfg, dims);
//   Result<RankStepOutput> out = run_tp_rank(comm, inputs, cfg, tp_rank);   // host_device.hpp
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "gpu/comm/communicator.hpp"
#include "gpu/kernels/attention_params.hpp"
#include "gpu/kernels/convention.hpp"
#include "gpu/kernels/kernel_math.hpp"
#include "gpu/kernels/kv_view.hpp"
#include "gpu/kernels/layout.hpp"
#include "gpu/kernels/merge.hpp"
#include "gpu/kernels/names.hpp"
#include "gpu/kernels/storage_format.hpp"
#include "gpu/status.hpp"

namespace dcp::gpu {

enum class CommStrategy { ag_rs, a2a };
inline constexpr EnumName<CommStrategy> kStrategyNames[] = {{CommStrategy::ag_rs, "ag_rs"},
                                                            {CommStrategy::a2a, "a2a"}};
inline std::string_view strategy_name(CommStrategy s) { return name_in(kStrategyNames, s); }
inline std::optional<CommStrategy> parse_strategy(std::string_view s) {
  return parse_in(kStrategyNames, s);
}

struct DcpConfig {
  int64_t tp_size = 1;  // attention TP group size, a multiple of N
  DcpLayout layout;     // N = layout.ranks, I = layout.interleave
  CommStrategy strategy = CommStrategy::a2a;
  bool replicate_q = false;  // every rank holds its group's Hg heads' queries (no q gather)
  ReduceOrder order = ReduceOrder::sequential;
  uint64_t order_seed = 0;
  LseBase base = LseBase::e;  // the kernel's LSE base
  int64_t tile = 64;          // online-softmax tile, keys
  int64_t splits = 1;         // split-KV pieces inside a rank
  StorageFormat out_dtype = StorageFormat::f32;
  KernelMath math;  // exponential, P cast, tf32, partial and reduce-scatter formats
  // How long a rank waits for its peers in a collective (communicator.hpp).
  std::chrono::milliseconds deadline = kDefaultCollectiveDeadline;
  // > 0: each rank's cache is a pool of pages of page_size rows (kv_view.hpp, a multiple of the
  // interleave), with one free page for every two used, in an order drawn from page_seed
  // (plan_pages): a fragmented pool, as an engine's block allocator leaves it.
  int64_t page_size = 0;
  uint64_t page_seed = 0;
  // With page_size > 0 and scales by token: the caches keep one scale per page of the pool (per
  // page and KV head for [S, Hkv] scales), as a cache quantized page by page keeps them; the KV
  // write stores a token's scales in its page's entry. Every token of a rank-local page must carry
  // the same scales (validate_inputs names the first two that differ).
  bool page_scales = false;
  // Polled between the step's KV writes and kernels, and by the host device between the
  // attention's rows, from every rank's thread at once (so it must be safe to call that way):
  // once it says true, the step ends with an error saying where (the CLI's Ctrl-C). Empty: the
  // step runs to its end.
  std::function<bool()> stop;
};

// Model-wide shapes.
struct AttentionDims {
  int64_t tokens = 1;    // T
  int64_t q_heads = 1;   // Hq
  int64_t kv_heads = 1;  // Hkv (divides Hq)
  int64_t head_dim = 1;  // Dk
  int64_t v_dim = 1;     // Dv
  bool shared_latent = false;
};

// Where a TP rank sits: its DCP group, its heads and the KV heads it stores.
struct DcpGeometry {
  int64_t n = 1, tp = 1, h_loc = 1, hg = 1, group_size = 1;  // group_size = Hq / Hkv
  static Result<DcpGeometry> create(const DcpConfig& cfg, const AttentionDims& d);
  int64_t dcp_rank(int64_t tp_rank) const { return tp_rank % n; }
  int64_t group(int64_t tp_rank) const { return tp_rank / n; }
  int64_t group_head0(int64_t tp_rank) const { return group(tp_rank) * hg; }
  int64_t local_head0(int64_t tp_rank) const { return tp_rank * h_loc; }
  int64_t kv_head0(int64_t tp_rank) const { return group_head0(tp_rank) / group_size; }
  int64_t kv_heads(int64_t tp_rank) const {
    return (group_head0(tp_rank) + hg - 1) / group_size - kv_head0(tp_rank) + 1;
  }
};

// Keys or values [S, Hkv, D] as the writer hands them to the caches: numel elements of dtype
// (f32 as floats, f16 and bf16 as their bit patterns, fp8 as bytes): the caches' stored elements
// (rounded to kv_dtype), or with `quantize` values, which the caches store as x / scale rounded
// to kv_dtype (kv_view.hpp). Owned
// here (from floats) or borrowed (a case's stored bytes, kept alive by `owner`), so a long
// context's K and V are not copied to be written.
struct KvSource {
  StorageFormat dtype = StorageFormat::f32;
  const void* data = nullptr;
  int64_t numel = 0;
  std::shared_ptr<const void> owner;
  bool quantize = false;

  KvSource() = default;
  KvSource(std::vector<float> values);  // NOLINT: fp32 values, owned; implicit as a vector's
  static KvSource borrowed(StorageFormat dtype, const void* data, int64_t numel,
                           std::shared_ptr<const void> owner) {
    KvSource s;
    s.dtype = dtype;
    s.data = data;
    s.numel = numel;
    s.owner = std::move(owner);
    return s;
  }
  int64_t size() const { return numel; }
  bool empty() const { return numel == 0; }
  // Elements from i0 on, as bytes of dtype (a borrowed file's bytes need not be aligned for
  // dtype: readers copy them, as chunk_rows does).
  const uint8_t* bytes_at(int64_t i0) const {
    return static_cast<const uint8_t*>(data) + i0 * format_bytes(dtype);
  }
};

// The model-wide problem every rank reads its share of (values already in their formats).
struct DcpInputs {
  AttentionDims dims;
  std::vector<float> q;                         // [T, Hq, Dk]
  KvSource k;                                   // [S, Hkv, Dk]
  KvSource v;                                   // [S, Hkv, Dv]; empty for a shared latent
  StorageFormat kv_dtype = StorageFormat::f32;  // the caches' format
  // The caches' dequantization scales (an fp8 cache's k_scale / v_scale, as engines keep them),
  // finite and > 0, of kv_scale_grain: by head [1] per tensor or [Hkv] per KV head; by token [S]
  // per token or [S, Hkv] per token and KV head (one request only), stored by the KV write with
  // each token (in its page's entry with DcpConfig.page_scales). Empty: none. The key the attention
  // means is the stored key times its k_scale (KvSource says what k and v hold; v's quantize must
  // be k's). A shared latent has no v_scale: k_scale scales its V too.
  std::vector<float> k_scale, v_scale;
  ScaleGrain kv_scale_grain = ScaleGrain::head;
  std::vector<int64_t> q_pos;  // [T] global positions
  int64_t seq = 0;             // S
  float scale = 1.0f;
  bool causal = true;
  int64_t window = 0;
  float softcap = 0.0f;
  std::vector<float> sink;  // [Hq] natural-log units, empty: none
  std::vector<float>
      alibi_slopes;           // [Hq] ALiBi slopes, natural-log units per position; empty: none
  std::vector<int64_t> topk;  // [T, topk_k] global positions, -1 padding, empty: none
  int64_t topk_k = 0;
  std::vector<int64_t> chunks;  // lengths of the KV writes that build the cache (sum S);
                                // empty: one chunk
  int64_t physical_rows = 0;    // rows per rank; 0: just enough for S

  // A decode batch (empty: one request, all of q and k). B requests, as engines pass them:
  // request b's queries are rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and q_pos, and its
  // context is rows [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k and v; q_pos and topk count
  // positions within the request; seq is cu_seqlens_k[B]. The requests' KV lives in one paged
  // pool (DcpConfig.page_size > 0; plan_pages). Every request's first shared_prefix positions
  // hold the same tokens (a radix cache's match): the whole virtual pages of it are kept once and
  // read by every request, later requests writing from the first page they do not share. chunks
  // and physical_rows stay unset: each request writes its own tokens as a prefill of all but the
  // last and a decode append of the last.
  std::vector<int64_t> cu_seqlens_q, cu_seqlens_k;
  int64_t shared_prefix = 0;
  // Requests [0, retired) finished in an earlier step: they hold no query token here (their
  // cu_seqlens_q ranges are empty), their tokens were written, and then their pages were freed —
  // all but the shared prefix's, which the live requests still hold — before the live requests
  // took theirs. A freed page goes to the next request that needs one (plan_pages), stale rows
  // and all, as an engine's allocator reuses blocks between steps.
  int64_t retired = 0;

  bool batched() const { return !cu_seqlens_q.empty(); }
  int64_t requests() const { return batched() ? static_cast<int64_t>(cu_seqlens_q.size()) - 1 : 1; }
  // Request b's context length and first row of k and v.
  int64_t request_seq(int64_t b) const {
    return batched()
               ? cu_seqlens_k[static_cast<size_t>(b + 1)] - cu_seqlens_k[static_cast<size_t>(b)]
               : seq;
  }
  int64_t request_key0(int64_t b) const {
    return batched() ? cu_seqlens_k[static_cast<size_t>(b)] : 0;
  }
  // The request of query token t.
  int64_t request_of(int64_t t) const;
  // The longest request's context length (0 at least) and the shortest's.
  int64_t longest_request() const;
  int64_t shortest_request() const;
};

// DcpInputs' per-head vectors ([Hq], natural-log units), each handed to the attention as its
// gathered heads' slice ([heads], PartialAttentionParams): on every rank, or on the sink's rank
// (convention.hpp) alone. validate_inputs checks their sizes and device_step uploads them from
// this list; its names are the case file's tensors (oracle/case.hpp, kHeadVectors).
struct HeadVector {
  const char* name;
  std::vector<float> DcpInputs::*values;  // empty: unused
  const float* PartialAttentionParams::*param;
  bool sink_rank_only;
};
inline constexpr HeadVector kHeadVectors[] = {
    {"sink", &DcpInputs::sink, &PartialAttentionParams::sink, true},
    {"alibi_slopes", &DcpInputs::alibi_slopes, &PartialAttentionParams::alibi_slopes, false}};

struct RankStepOutput {
  std::vector<float> o;            // [T, H_loc, Dv] the rank's heads, out_dtype values
  std::vector<float> lse;          // [T, H_loc] base cfg.base
  std::vector<float> partial_o;    // [T, Hg, Dv] this rank's partial (before the combine)
  std::vector<float> partial_lse;  // [T, Hg]
};

// Checks the inputs against the configuration: tp % N, heads divisibility, tensor sizes,
// positions, top-k indices, chunk lengths. One-line errors naming the field ("DcpConfig.tp_size")
// or tensor.
GpuStatus validate_inputs(const DcpInputs& in, const DcpConfig& cfg);

// The pieces device_step.hpp builds a rank's step from, on every device:
// the cache a TP rank holds: its dcp rank, rows (in.physical_rows, or just enough for S), the
// KV heads its group reads, shapes and storage format;
Result<KvCacheSpec> rank_cache_spec(const DcpInputs& in, const DcpConfig& cfg, int64_t tp_rank);
// the pages of a paged cache (cfg.page_size > 0), as an allocator of the widened slot space hands
// them out. The group's pools are pool_pages pages of P = page_size rows; virtual page v is slots
// [v P N, (v + 1) P N) of the widened space (P a multiple of I), pool page v of every rank, so one
// block table serves every rank and slot s lives on rank owner(s) at pool row v P + row(s) mod P.
// Request b holds ceil(S_b / (P N)) pages in row b of `tables` (-1 past them): the shared
// prefix's shared_pages whole pages first, the same for every request, then its own. Pages come
// off a free list shuffled from cfg.page_seed, and the pool keeps one free page for every two
// used: a fragmented pool, as an engine's allocator leaves it. The retired requests (DcpInputs)
// take their pages first; their own pages then go back on the free list, in front, so the live
// requests reuse them before any page never used. Empty when not paged;
struct PagePlan {
  int64_t page_size = 0, pool_pages = 0;
  int64_t stride = 0;           // table entries per request: the longest request's pages
  int64_t shared_pages = 0;     // leading pages every request holds
  std::vector<int32_t> tables;  // [requests, stride]
  std::vector<int32_t> freed;   // the retired requests' own pages, freed before the live ones'
  // Request b's table.
  const int32_t* table(int64_t b) const { return tables.data() + b * stride; }
  // The first position of request b it writes itself: 0 for request 0, after the shared pages
  // for the rest.
  int64_t write_from(int64_t b, int64_t ranks) const {
    return b == 0 ? 0 : shared_pages * page_size * ranks;
  }
};
Result<PagePlan> plan_pages(const DcpInputs& in, const DcpConfig& cfg);
// the widened slot of position pos of a request holding `table`: the allocator's numbering, whose
// owner and row (layout.hpp) are the rank and pool row that store it;
int64_t widened_slot(const PagePlan& plan, const int32_t* table, const DcpLayout& lay, int64_t pos);
// the scales of the KV heads the spec stores ([spec.kv_heads] each, or none);
KvScales rank_kv_scales(const DcpInputs& in, const KvCacheSpec& spec);
// the scale of global KV head g of model-wide row `row` of in.k_scale or in.v_scale (`s`): by
// head [1] or [Hkv], by token [S] or [S, Hkv] (in.kv_scale_grain);
float input_scale(const DcpInputs& in, const std::vector<float>& s, int64_t row, int64_t g);
// request b's KV writes, in order, from position `from` (in.chunks, or one chunk of S, for one
// request; a prefill and a decode append for a request of a batch);
std::vector<int64_t> write_chunks(const DcpInputs& in, int64_t b = 0, int64_t from = 0);
// chunk [pos0, pos0 + len) of the model-wide K and V cut down to the spec's KV heads, as a
// writer hands it to every rank: k [len, kv_heads, Dk], v [len, kv_heads, Dv] (empty for a
// shared latent), bytes of the inputs' elements (in.k.dtype);
struct ChunkRows {
  StorageFormat dtype = StorageFormat::f32;
  std::vector<uint8_t> k, v;
  bool quantize = false;  // in.k.quantize
  // Scales by token: each row's [len, spec.scale_heads] (empty: by head, or none)
  std::vector<float> k_scale, v_scale;
};
// (request b's positions in a batch)
ChunkRows chunk_rows(const DcpInputs& in, const KvCacheSpec& spec, int64_t pos0, int64_t len,
                     int64_t b = 0);
// that the rank's DCP-group communicator (rank comm_rank of comm_size) is the one tp_rank needs;
GpuStatus check_group_comm(const DcpGeometry& geo, int64_t tp_rank, int64_t comm_rank,
                           int64_t comm_size);
// the partial-attention parameters of the rank's step: shapes, heads, rows, variant and kernel
// settings; the tensor pointers (q, q_pos, kv, the per-head vectors, topk, o, lse) are the
// caller's, in whichever memory it runs;
PartialAttentionParams rank_attention_params(const DcpInputs& in, const DcpConfig& cfg,
                                             const DcpGeometry& geo, const KvCacheSpec& spec,
                                             int64_t tp_rank);
// the queries the rank starts the step with: [T, H_loc, Dk] (gather) or [T, Hg, Dk]
// (replicate-q).
std::vector<float> rank_queries(const DcpInputs& in, const DcpConfig& cfg, const DcpGeometry& geo,
                                int64_t tp_rank);

}  // namespace dcp::gpu
