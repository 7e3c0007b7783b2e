/* dcp_verify/impl.h — the C plug-in ABI of dcp-verify: how a DCP implementation that lives
 * elsewhere (a CUDA library, an engine's kernels behind a C shim) is driven by the property suite
 * and judged against the oracle. Plain C, version DCPV_ABI_VERSION.
 *
 * A plug-in is a shared library exporting one function, dcpv_get_impl, that returns a dcpv_impl:
 * the levels it implements and the claim that states its arithmetic. dcp-verify loads it with
 * dlopen (`dcp-verify properties --impl ./libmine.so`, `dcp-verify run --impl ./libmine.so`),
 * draws DCP steps, runs the levels the plug-in provides in place of its own production path's,
 * fills the others from that path, and judges every rank's partial and the merged output within
 * the bound derived for the claim.
 *
 * Levels (a NULL function pointer: not provided):
 *   partial   one rank: all gathered query heads against the tokens the rank owns, in their
 *             storage format, returning the rank's partial O_r and LSE_r;
 *   combine   the N partials of a rank's own heads after the All-to-All, returning the merged O
 *             and LSE (the suite runs the a2a exchange around it; on steps that combine by ag_rs,
 *             whose sum is a reduce-scatter, the suite's own combine runs);
 *   step      the whole decode step from the model-wide inputs and the layout (N, I): the merged
 *             O and LSE, and, if the plug-in can, every rank's partial (judged rank by rank).
 *
 * Conventions (docs/case-model.md): positions are global token indices; query head h (global)
 * reads KV head h / (q_heads_total / kv_heads_total); masks (causal: key pos <= query pos;
 * window W > 0: key pos > query pos - W; top-k: only the listed positions) are the plug-in's to
 * apply; the sink logit (natural-log units) adds exp(sink) to the denominator of the rank that is
 * given it; an LSE is ln Z (lse_base 0) or log2 Z (lse_base 1); a row with nothing visible and no
 * sink returns LSE = -inf and O = 0. Tensors are host memory; strides count elements. A function
 * returns 0 on success, or non-zero with a one-line reason in err (err_len bytes, NUL-terminated),
 * which dcp-verify reports as the implementation's failure, naming the level and the rank. A
 * call must return within --timeout seconds (default 300): one that does not cannot be stopped,
 * so dcp-verify then ends at once with exit 124 and a line naming the level (and its rank). A call
 * that crashes (an invalid access, abort()) or calls exit() ends dcp-verify with exit 1 and a line
 * naming the implementation, the level, its rank and the signal (after a crash, and a timeout,
 * `properties` writes its report first, the property in flight ERROR); loading the library (its
 * constructors, dcpv_get_impl) is held to the same. The library is never unloaded.
 *
 * Example (a complete plug-in: plugin/examples/example_impl.cpp):
 *   static dcpv_impl impl = {DCPV_ABI_VERSION, "mine", claim, NULL, my_partial, my_combine,
 *                            my_step};
 *   const dcpv_impl* dcpv_get_impl(void) { return &impl; }
 *
 * Version 2 (below; version 1 still loads) adds the level engines call: `paged`, one rank's
 * attention over its cache as an engine keeps it — a pool of pages in the cache's storage format
 * (fp8 or int8 as raw bytes with its scales: the kernel's own dequantization is judged), a block
 * table per request, a decode batch — with tensors described as DLPack describes them, and a mask
 * of the case features the implementation lacks (never drawn for it). A version-2 plug-in exports
 * dcpv_get_impl_v2 (dcp-verify looks for it first):
 *   static dcpv_impl_v2 impl = {DCPV_ABI_VERSION_2, "mine", claim, DCPV_F32, DCPV_LACKS_SOFTCAP,
 *                               DCPV_PAGES_NHD, NULL, NULL, NULL, NULL, my_paged};
 *   const dcpv_impl_v2* dcpv_get_impl_v2(void) { return &impl; }
 *
 * Version 3 is version 2's struct with abi_version DCPV_ABI_VERSION_3: the plug-in reads the
 * arguments' version-3 fields (each at the end of its struct, so version 1 and 2 plug-ins read
 * theirs where they were): ALiBi's slopes at every attention level, and KV scales by token at the
 * paged level (the contiguous levels get K and V dequantized by the suite, as for scales by head);
 * its lacks mask may name them (DCPV_LACKS_ALIBI, DCPV_LACKS_TOKEN_SCALES). Neither is ever drawn
 * for a version 1 or 2 plug-in, which does not know them.
 *
 * Version 4 (DCPV_ABI_VERSION_4, the same structs) adds KV scales by page at the paged level, one
 * a pool page (and KV head), as a cache quantized page by page keeps them, with the paged
 * arguments' scale_grain saying which grain k_scale and v_scale are of (DCPV_LACKS_PAGE_SCALES);
 * never drawn for a plug-in of an earlier version.
 */
#ifndef DCP_VERIFY_IMPL_H_
#define DCP_VERIFY_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DCPV_ABI_VERSION 1

typedef enum dcpv_dtype {
  DCPV_F32 = 0,
  DCPV_F16 = 1,  /* IEEE binary16, as uint16_t bits */
  DCPV_BF16 = 2, /* bfloat16, as uint16_t bits */
  DCPV_I64 = 3
} dcpv_dtype;

/* A strided view of host memory. data is NULL for a tensor that is absent (no sink, no top-k,
 * no V for a shared latent). */
typedef struct dcpv_tensor {
  void* data;
  dcpv_dtype dtype;
  int32_t ndim;
  int64_t shape[4];
  int64_t strides[4]; /* elements */
} dcpv_tensor;

/* One rank's partial attention. Inputs are read-only; o and lse are written. */
typedef struct dcpv_partial_args {
  int64_t rank, ranks;        /* this DCP rank of N */
  int64_t tokens, heads;      /* T, and H: every query head of the rank's DCP group */
  int64_t head_dim, v_dim;    /* Dk, Dv */
  int64_t head0;              /* global index of head 0 */
  int64_t q_heads_total;      /* Hq of the model */
  int64_t kv_heads_total;     /* Hkv of the model */
  int64_t kv_head0, kv_heads; /* the KV heads k and v hold: global kv_head0 .. + kv_heads */
  int64_t keys;               /* n, the tokens this rank owns below the context length S */
  int32_t shared_latent;      /* 1: V is the first v_dim components of K (v.data is NULL) */
  int32_t lse_base;           /* 0: natural log, 1: log2 */
  int32_t causal;             /* 1: key pos <= query pos */
  int64_t window;             /* > 0: key pos > query pos - window */
  float scale;                /* softmax scale on q.k */
  float softcap;              /* > 0: s <- softcap tanh(s / softcap) */
  dcpv_tensor q;              /* [T, H, Dk] F32 */
  dcpv_tensor q_pos;          /* [T] I64, global positions of the queries */
  dcpv_tensor k;              /* [n, kv_heads, Dk] in the cache's storage format; an fp8
                                 cache, or one with scales, in F32: each stored value times its
                                 scale (its KV head's; version 3: or its token's), rounded once */
  dcpv_tensor v;              /* [n, kv_heads, Dv] likewise */
  dcpv_tensor k_pos;          /* [n] I64, increasing global positions of the rank's tokens */
  dcpv_tensor sink;           /* [H] F32 sink logits (natural-log units), or absent */
  dcpv_tensor topk;           /* [T, K] I64 selected global positions, -1 padding, or absent */
  dcpv_tensor o;              /* out: [T, H, Dv] F32 */
  dcpv_tensor lse;            /* out: [T, H] F32, base lse_base */
  dcpv_tensor alibi_slopes;   /* version 3: [H] F32 ALiBi slopes, or absent: m_h of global
                                 head head0 + h; the logit of key position j for a query at
                                 position i is softcap(scale q.k) - m_h |j - i| (natural-log
                                 units) */
} dcpv_partial_args;

/* The merge of N partials of one rank's own heads. */
typedef struct dcpv_combine_args {
  int64_t ranks, tokens, heads, v_dim; /* N partials of T x H rows of Dv */
  int32_t lse_base;                    /* 0: natural log, 1: log2 */
  dcpv_tensor o_partial;               /* [N, T, H, Dv] F32 */
  dcpv_tensor lse_partial;             /* [N, T, H] F32, -inf: an empty partial */
  dcpv_tensor o;                       /* out: [T, H, Dv] F32 */
  dcpv_tensor lse;                     /* out: [T, H] F32 */
} dcpv_combine_args;

/* How the implementation computes, in the vocabulary of the result files' metadata
 * (docs/format.md): the oracle derives the bound for exactly this. */
typedef struct dcpv_claim {
  int32_t accum_rounding_nearest; /* 1: every add rounds to nearest (CPU fp32); 0: adds may
                                     truncate (tensor-core MMA) */
  int32_t tf32;                   /* 1: q.k and P.V operands rounded to tf32 */
  int32_t ftz;                    /* 1: subnormal results may be flushed to zero */
  double exp_rel_err;             /* the largest relative error of its exp/exp2; 0: 2 ulp */
  double log_rel_err;             /* its log/log2's, relative to max(1, |result|); 0: default */
  dcpv_dtype p_cast;              /* P rounded to BF16/F16 before P.V; F32: not rounded */
  int64_t tile;                   /* keys per online-softmax tile, at least; 1: any tiling */
  int64_t splits;                 /* split-KV pieces the partial merges inside; 1: none */
  dcpv_dtype partial_o;           /* the format the partial's O is stored in (F32, BF16, F16) */
  dcpv_dtype combine_accum;       /* the format of the combine's sums (F32, BF16, F16) */
} dcpv_claim;

/* The whole decode step over the model's heads: token p (row p of k and v) lives on DCP rank
 * floor(p / interleave) mod ranks. */
typedef struct dcpv_step_args {
  int64_t ranks, interleave;    /* N and I */
  int64_t tokens, q_heads;      /* T, Hq */
  int64_t kv_heads;             /* Hkv (divides Hq): query head h reads KV head h / (Hq / Hkv) */
  int64_t head_dim, v_dim, seq; /* Dk, Dv, S */
  int32_t shared_latent;        /* 1: V is the first v_dim components of K (v.data is NULL) */
  int32_t lse_base;             /* 0: natural log, 1: log2 */
  int32_t causal;               /* 1: key pos <= query pos */
  int64_t window;               /* > 0: key pos > query pos - window */
  float scale, softcap;
  dcpv_tensor q;            /* [T, Hq, Dk] F32 */
  dcpv_tensor q_pos;        /* [T] I64 */
  dcpv_tensor k;            /* [S, Hkv, Dk] in the cache's storage format (an fp8 or scaled
                               cache in F32, dequantized as for the partial level) */
  dcpv_tensor v;            /* [S, Hkv, Dv] likewise, or absent */
  dcpv_tensor sink;         /* [Hq] F32 sink logits, or absent: added once, by rank 0 */
  dcpv_tensor topk;         /* [T, K] I64 selected positions, -1 padding, or absent */
  dcpv_tensor o;            /* out: [T, Hq, Dv] F32 */
  dcpv_tensor lse;          /* out: [T, Hq] F32 */
  dcpv_tensor o_partial;    /* out, optional: [N, T, Hq, Dv] F32, rank r's partial */
  dcpv_tensor lse_partial;  /* out, optional: [N, T, Hq] F32 */
  int32_t wrote_partials;   /* the plug-in sets 1 when it wrote o_partial and lse_partial */
  dcpv_tensor alibi_slopes; /* version 3: [Hq] F32 ALiBi slopes, or absent (as for partial) */
} dcpv_step_args;

typedef int (*dcpv_partial_fn)(void* self, const dcpv_partial_args* args, char* err,
                               size_t err_len);
typedef int (*dcpv_combine_fn)(void* self, const dcpv_combine_args* args, char* err,
                               size_t err_len);
typedef int (*dcpv_step_fn)(void* self, dcpv_step_args* args, char* err, size_t err_len);

typedef struct dcpv_impl {
  int32_t abi_version; /* DCPV_ABI_VERSION */
  const char* name;    /* shown in reports */
  dcpv_claim claim;
  void* self;              /* passed back to every call */
  dcpv_partial_fn partial; /* NULL: the suite's own partial attention */
  dcpv_combine_fn combine; /* NULL: the suite's own combine */
  dcpv_step_fn step;       /* NULL: no whole-step level */
} dcpv_impl;

#if defined(__GNUC__)
#define DCPV_EXPORT __attribute__((visibility("default")))
#else
#define DCPV_EXPORT
#endif

/* The one symbol a version-1 plug-in exports. */
DCPV_EXPORT const dcpv_impl* dcpv_get_impl(void);

/* ---- Version 2 ---------------------------------------------------------------------------- */

#define DCPV_ABI_VERSION_2 2
#define DCPV_ABI_VERSION_3 3 /* version 2's structs, with the fields marked "version 3" */
#define DCPV_ABI_VERSION_4 4 /* the same, with the fields marked "version 4" */

/* A tensor as DLPack (dlpack.h, v1) describes one, field for field: a DLTensor* may be read as a
 * dcpv_dltensor* and back. shape and strides (elements, never NULL here) point to ndim values
 * that live as long as the call; data is NULL for an absent tensor (ndim 0). */
typedef struct dcpv_dldevice {
  int32_t device_type; /* DCPV_DL_CPU (host memory) or DCPV_DL_CUDA */
  int32_t device_id;
} dcpv_dldevice;
typedef struct dcpv_dldtype {
  uint8_t code; /* DCPV_DL_INT, _UINT, _FLOAT, _BFLOAT, _FLOAT8_E4M3FN, _FLOAT8_E5M2, ... */
  uint8_t bits;
  uint16_t lanes; /* 1 */
} dcpv_dldtype;
typedef struct dcpv_dltensor {
  void* data;
  dcpv_dldevice device;
  int32_t ndim;
  dcpv_dldtype dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset; /* 0 */
} dcpv_dltensor;

/* DLPack's numbers (DLDeviceType, DLDataTypeCode). */
enum { DCPV_DL_CPU = 1, DCPV_DL_CUDA = 2 };
enum {
  DCPV_DL_INT = 0,
  DCPV_DL_UINT = 1,
  DCPV_DL_FLOAT = 2,
  DCPV_DL_BFLOAT = 4,
  DCPV_DL_FLOAT8_E4M3FN = 10,   /* OCP E4M3: no infinity, largest 448 (torch.float8_e4m3fn) */
  DCPV_DL_FLOAT8_E4M3FNUZ = 11, /* no infinity, no -0 (0x80 is NaN), bias 8, largest 240: AMD
                                   MI300's fp8 (torch.float8_e4m3fnuz); handed to a plug-in only
                                   where --kv-dtypes names fp8e4m3fnuz */
  DCPV_DL_FLOAT8_E5M2 = 12      /* OCP E5M2 (torch.float8_e5m2) */
};

/* Case features an implementation lacks: dcp-verify never draws them for it (as `properties
 * --without` names them). */
enum {
  DCPV_LACKS_SOFTCAP = 1u << 0,
  DCPV_LACKS_SINK = 1u << 1,
  DCPV_LACKS_TOPK = 1u << 2,
  DCPV_LACKS_WINDOW = 1u << 3,
  DCPV_LACKS_LATENT = 1u << 4, /* a shared latent (MLA: V is K's first v_dim components) */
  DCPV_LACKS_BATCH = 1u << 5,  /* more than one request in a step */
  /* Version 3 (a version 1 or 2 plug-in lacks them all): */
  DCPV_LACKS_ALIBI = 1u << 6,        /* ALiBi slopes (alibi_slopes) */
  DCPV_LACKS_TOKEN_SCALES = 1u << 7, /* KV scales by token (and KV head) */
  /* Version 4 (earlier versions lack it): */
  DCPV_LACKS_PAGE_SCALES = 1u << 8 /* KV scales by page (and KV head), at the paged level */
};
/* Their names, bit i named by element i (as `properties --without` names them). */
#define DCPV_LACKS_NAMES \
  { "softcap", "sink", "topk", "window", "latent", "batch", "alibi", "token_scales", "page_scales" }
/* How many of them version 2 knows (bits 0 .. 5), and version 3 (bits 0 .. 7). */
#define DCPV_LACKS_V2_COUNT 6
#define DCPV_LACKS_V3_COUNT 8

/* The grain of the paged level's k_scale and v_scale (version 4's scale_grain). */
typedef enum dcpv_scale_grain {
  DCPV_SCALES_BY_HEAD = 0,  /* [kv_heads] (or absent) */
  DCPV_SCALES_BY_TOKEN = 1, /* [pages, page_size] or [pages, page_size, kv_heads] */
  DCPV_SCALES_BY_PAGE = 2   /* [pages, 1] or [pages, kv_heads]: one a pool page (and KV head) */
} dcpv_scale_grain;

/* How a page of the pool is laid out: NHD [pages, page_size, kv_heads, D] (vLLM's cache, and
 * FlashInfer's NHD), or HND [pages, kv_heads, page_size, D] (FlashInfer's HND). */
typedef enum dcpv_page_layout { DCPV_PAGES_NHD = 0, DCPV_PAGES_HND = 1 } dcpv_page_layout;

/* One rank's attention over its paged cache, for a batch of B >= 1 requests (those with queries
 * in the step, as engines pass a batch). Request b's token
 * at position p (0 <= p < seq_lens[b]) lives on DCP rank floor(p / I) mod N, as row
 * floor(p / (I N)) I + p mod I of the request's rows on it (local_seq_lens[b] of them); row r is
 * slot r mod page_size of pool page block_table[b][r / page_size]. Positions (q_pos, topk, the
 * masks) count within the request. A stored element x of KV head g is the value x k_scale[g]
 * (x v_scale[g] for V): the kernel dequantizes. With scales by token (version 3), the element x
 * of KV head g in pool slot (page pg, slot s) is the value x k_scale[pg][s] (one scale a token)
 * or x k_scale[pg][s][g] (one a token and KV head), whatever the page layout: engines write a
 * token's scales into its slot beside its elements. With scales by page (version 4,
 * scale_grain DCPV_SCALES_BY_PAGE), it is x k_scale[pg][0] or x k_scale[pg][g]: every token of
 * pool page pg shares them. Inputs are read-only; o and lse are written. */
typedef struct dcpv_paged_args {
  int64_t rank, ranks, interleave; /* this DCP rank r of N, and I */
  int64_t requests;                /* B */
  int64_t tokens, heads;           /* T (all requests' queries), H: every query head of the group */
  int64_t head_dim, v_dim;         /* Dk, Dv */
  int64_t head0;                   /* global index of head 0 */
  int64_t q_heads_total;           /* Hq of the model */
  int64_t kv_heads_total;          /* Hkv of the model */
  int64_t kv_head0, kv_heads;      /* the pool holds global KV heads kv_head0 .. + kv_heads */
  int64_t page_size;               /* rows per page */
  int32_t page_layout;             /* dcpv_page_layout, as the implementation asked */
  int32_t shared_latent;           /* 1: V is the first v_dim components of K (v_cache absent) */
  int32_t lse_base;                /* 0: natural log, 1: log2 */
  int32_t causal;                  /* 1: key pos <= query pos */
  int64_t window;                  /* > 0: key pos > query pos - window */
  float scale;                     /* softmax scale on q.k (the K scale not folded in) */
  float softcap;                   /* > 0: s <- softcap tanh(s / softcap) */
  dcpv_dltensor q;                 /* [T, H, Dk] float32 */
  dcpv_dltensor q_pos;             /* [T] int64: each query's position within its request */
  dcpv_dltensor query_start_loc;   /* [B + 1] int32: request b's queries are rows
                                      query_start_loc[b] .. query_start_loc[b + 1] - 1 of q */
  dcpv_dltensor seq_lens;          /* [B] int32: each request's context length S_b (all ranks) */
  dcpv_dltensor local_seq_lens;    /* [B] int32: the rows of it this rank holds */
  dcpv_dltensor block_table;       /* [B, max_pages] int32: pool pages of each request's rows in
                                      order; only the first ceil(local_seq_lens[b] / page_size)
                                      are this rank's (the rest: -1, or pages holding none of
                                      its rows) */
  dcpv_dltensor k_cache;           /* the pool (page_layout) with D = Dk, in the cache's storage
                                      format: float32, bfloat16, float16, float8_e4m3fn,
                                      float8_e5m2, or int8 codes (DCPV_DL_INT, 8 bits); where
                                      --kv-dtypes names them, float8_e4m3fnuz or later */
  dcpv_dltensor v_cache;           /* the same with D = Dv, or absent (shared latent) */
  dcpv_dltensor k_scale, v_scale;  /* [kv_heads] float32, or absent: 1 (a shared latent's V
                                      is scaled by k_scale; v_scale absent); version 3 also
                                      [pages, page_size] or [pages, page_size, kv_heads]: by
                                      token; version 4 also [pages, 1] or [pages, kv_heads]: by
                                      page (above; scale_grain says which) */
  dcpv_dltensor sink;              /* [H] float32 sink logits (natural-log units), or absent */
  dcpv_dltensor topk;              /* [T, K] int64 selected positions, -1 padding, or absent */
  dcpv_dltensor o;                 /* out: [T, H, Dv] float32 */
  dcpv_dltensor lse;               /* out: [T, H] float32, base lse_base */
  dcpv_dltensor alibi_slopes;      /* version 3: [H] float32 ALiBi slopes, or absent (as for
                                      partial; positions within the request) */
  int32_t scale_grain;             /* version 4: dcpv_scale_grain of k_scale and v_scale (a
                                      version 3 plug-in tells head from token by their rank) */
} dcpv_paged_args;

typedef int (*dcpv_paged_fn)(void* self, const dcpv_paged_args* args, char* err, size_t err_len);

typedef struct dcpv_impl_v2 {
  int32_t abi_version; /* DCPV_ABI_VERSION_2, DCPV_ABI_VERSION_3 or DCPV_ABI_VERSION_4 */
  const char* name;    /* shown in reports */
  dcpv_claim claim;
  /* The format the paged level dequantizes K and V into before its products: DCPV_F32 (each
   * stored value times its scale rounded once to float32, or a scale folded into the softmax
   * scale and the output), DCPV_BF16 or DCPV_F16 (rounded once to it, as a 16-bit MMA reads an
   * fp8 cache). */
  dcpv_dtype kv_dequant;
  uint32_t lacks;      /* DCPV_LACKS_* (version 2: bits 0 .. 5 only; version 3: 0 .. 7) */
  int32_t page_layout; /* dcpv_page_layout of the pool the paged level receives */
  void* self;          /* passed back to every call */
  dcpv_partial_fn partial;
  dcpv_combine_fn combine;
  dcpv_step_fn step;
  dcpv_paged_fn paged; /* NULL: none; else partial must be NULL: paged runs in its place */
} dcpv_impl_v2;

/* The symbol a version-2, 3 or 4 plug-in exports. */
DCPV_EXPORT const dcpv_impl_v2* dcpv_get_impl_v2(void);

#ifdef __cplusplus
}
#endif

#endif /* DCP_VERIFY_IMPL_H_ */
