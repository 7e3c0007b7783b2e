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
                                 KV head's scale, rounded once */
  dcpv_tensor v;              /* [n, kv_heads, Dv] likewise */
  dcpv_tensor k_pos;          /* [n] I64, increasing global positions of the rank's tokens */
  dcpv_tensor sink;           /* [H] F32 sink logits (natural-log units), or absent */
  dcpv_tensor topk;           /* [T, K] I64 selected global positions, -1 padding, or absent */
  dcpv_tensor o;              /* out: [T, H, Dv] F32 */
  dcpv_tensor lse;            /* out: [T, H] F32, base lse_base */
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
  dcpv_tensor q;           /* [T, Hq, Dk] F32 */
  dcpv_tensor q_pos;       /* [T] I64 */
  dcpv_tensor k;           /* [S, Hkv, Dk] in the cache's storage format (an fp8 or scaled
                              cache in F32, dequantized as for the partial level) */
  dcpv_tensor v;           /* [S, Hkv, Dv] likewise, or absent */
  dcpv_tensor sink;        /* [Hq] F32 sink logits, or absent: added once, by rank 0 */
  dcpv_tensor topk;        /* [T, K] I64 selected positions, -1 padding, or absent */
  dcpv_tensor o;           /* out: [T, Hq, Dv] F32 */
  dcpv_tensor lse;         /* out: [T, Hq] F32 */
  dcpv_tensor o_partial;   /* out, optional: [N, T, Hq, Dv] F32, rank r's partial */
  dcpv_tensor lse_partial; /* out, optional: [N, T, Hq] F32 */
  int32_t wrote_partials;  /* the plug-in sets 1 when it wrote o_partial and lse_partial */
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

/* The one symbol a plug-in exports. */
DCPV_EXPORT const dcpv_impl* dcpv_get_impl(void);

#ifdef __cplusplus
}
#endif

#endif /* DCP_VERIFY_IMPL_H_ */
