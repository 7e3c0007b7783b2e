// tolerance.hpp — per-element error bounds derived from error analysis (docs/tolerances.md).
//
// Given a case, its exact attention (the oracle's, rounded to double) and a claimed arithmetic
// (how an implementation computes), derive_bound returns for every output element a *sound*
// bound on |computed - exact|: every implementation that follows the claim is inside it, in any
// summation order, tile size, reduction tree and shard layout. There is no fixed atol/rtol here:
// each bound is built from the case's own scores, probabilities and values.
//
//   Arithmetic a;                 // fp32 accumulation, CUDA fast intrinsics, fp32 outputs
//   a.p_cast = DType::bf16;       // FlashAttention-style: P rounded to bf16 before P.V
//   a.shards = 8;                 // partials of up to 8 ranks merged (any tree, ag_rs or a2a)
//   Expected<Bound> b = derive_bound(c, ref, a);   // b->o [T, Hq, Dv], b->lse [T, Hq]
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "oracle/attention.hpp"
#include "oracle/case.hpp"
#include "oracle/dtype.hpp"
#include "oracle/shard.hpp"
#include "oracle/status.hpp"

namespace dcp::oracle {

// The arithmetic an implementation claims. Defaults admit every correct fp32 kernel built from
// CUDA's fast intrinsics (ex2.approx, lg2.approx, tanh.approx, div.approx) on tensor cores.
struct Arithmetic {
  DType accum = DType::f32;    // dot products, softmax sums, P.V accumulation
  bool truncating_mma = true;  // tensor-core adds may truncate: use 2u for accum
  // TF32 tensor cores: both operands of every product (q.k and P.V) rounded to tf32 (10 stored
  // significand bits, u = 2^-11) before an fp32 multiply-add.
  bool tf32 = false;
  // Flush to zero: a result in the subnormal range of its format (a store, the P cast, an
  // operand) may become 0, so each such rounding costs up to that format's smallest normal.
  bool ftz = false;
  std::optional<DType> p_cast;     // P rounded to this format before P.V; nullopt: not cast
  DType partial_o = DType::f32;    // format of partial outputs O_r as exchanged (shards > 1)
  DType partial_lse = DType::f32;  // format of partial LSEs L_r as exchanged (shards > 1)
  DType merge_accum = DType::f32;  // format of the cross-rank sum (bf16 for a bf16 reduce-scatter)
  // Format of the merge's weight sum sum_r exp(L_r - m): the merged LSE's argument and the
  // denominator that normalizes O, where it is not merge_accum (a bf16 reduce-scatter of the
  // scaled outputs beside an fp32 LSE merge, as engines' merges compute it). nullopt: merge_accum.
  std::optional<DType> merge_lse_accum;
  DType out = DType::f32;      // format the final O is stored in
  DType lse_out = DType::f32;  // format the final LSE is stored in
  int64_t shards = 1;          // N partials merged over any tree (1: no merge)
  // Terms of the cross-rank sum in merge_accum, where fewer than `shards` (0: shards): split-KV
  // pieces merged in fp32 inside each rank before a reduce-scatter of N rank terms.
  int64_t merge_terms = 0;
  // Partials merged two at a time as normalized (O, LSE) states, each merge's O divided and
  // stored in partial_o and its LSE in partial_lse, a partial passing through at most this many
  // merges (a chain over N partials, as cascades and ring merges run: N - 1; a balanced tree:
  // ceil(log2 N)). 0: one merge of all N (a reduce-scatter, an all-to-all's combine).
  int64_t merge_depth = 0;
  // The merge's form, where it is one merge of all N (merge_depth 0): each partial's O scaled by
  // exp(L_r - L) with L the merged LSE as the merge computes it, each scaled value rounded once to
  // merge_accum, and their merge_accum sum the output, stored without a division (vLLM's and
  // SGLang's all-gather of the LSEs and reduce-scatter of the scaled outputs). Its sum is then in
  // the output's units, within the merged LSE's error, so each rounding costs half an ulp of its
  // value's binade and a store of that sum into a format that holds every merge_accum value is
  // exact (docs/tolerances.md §5). false: any form.
  bool merge_scaled = false;
  // Which partial each key is in, where the caller knows it: key p in partial layout->of(p), one
  // partial per rank (a sink added at the merge may be one more, without values). With it the
  // merge's terms scale with the exact partials' sum_r w_r |O_r| (docs/tolerances.md §5) instead
  // of sum_j P_j |v_j|; nullopt: any partition into `shards` parts (split-KV pieces within a
  // rank, a partition the caller does not know).
  std::optional<Ownership> layout;
  // The order of each q.k dot's adds, where the kernel's is known: its Dk products summed in this
  // many lanes, lane t adding the products of components i = t (mod W) one at a time in
  // increasing i, then the W lane sums added in any order (a dot vectorized along the head
  // dimension; 1: one chain in component order). 0: any order (docs/tolerances.md §3).
  int64_t dot_lanes = 0;
  // Keys per online-softmax tile, at least (1: any tiling). Each tile rescales the running sums
  // by exp(m_old - m_new), whose error the keys before it carry: a context of S keys sees at most
  // ceil(S / tile) rescales, plus one for a sink.
  int64_t tile = 1;
  // Intrinsic budgets (PTX ISA: ex2.approx.f32 2 ulp; lg2.approx.f32 2^-22 absolute on
  // (0.5, 2) and 2^-22 relative elsewhere; __logf 2^-21.41 absolute on [0.5, 2], 3 ulp elsewhere;
  // tanh.approx.f32 2^-11 relative; div.approx/div.full.f32 2 ulp).
  double exp_ulps = 2.0;
  double log_abs = std::ldexp(1.0, -21);  // absolute error of ln on [0.5, 2]
  double log_ulps = 3.0;                  // elsewhere
  double tanh_rel = std::ldexp(1.0, -11);
  double div_ulps = 2.0;
  // A kernel's own exp and log, where they are less accurate than the budgets above (a
  // vectorized polynomial, a table): the largest relative error of its exp/exp2 result, and the
  // largest error of its log/log2 result relative to max(1, |result|). nullopt: the budgets.
  std::optional<double> exp_rel_err;
  std::optional<double> log_rel_err;
  // docs/tolerances.md §10: the largest magnitude of its exp's mean relative error over the keys
  // of a row (a polynomial's bias; its errors about that mean unrelated to the keys), where it is
  // smaller than exp_rel_err (or the budget); the statistical tier's LSE charges this mean whole
  // and the rest as random. nullopt: not known, the whole error charged.
  std::optional<double> exp_bias;
  // The merge's own exp/exp2 (the weights exp(L_r - m) and a tree's rescales), where it is not
  // the attention kernel's: a combine in the math library beside a kernel's vectorized
  // polynomial. nullopt: exp_rel_err (or the budget).
  std::optional<double> merge_exp_rel_err;
  // The online softmax's own rescale exponential exp(m_old - m_new) (a sink's too), where it is
  // not the one that weights the keys: a scalar library exp at each tile's rescale beside a
  // vectorized polynomial for the weights. nullopt: exp_rel_err (or the budget).
  std::optional<double> rescale_exp_rel_err;
  // K and V dequantized into this format before the products: each element of the cache (its
  // stored value times its scale) rounded once to it, as a kernel that reads an fp8 cache into
  // its bf16 MMA computes. nullopt: the dequantized values are exact (a scale folded into the
  // softmax scale and applied to the output, each one rounding of accum).
  std::optional<DType> kv_dequant;
};

struct Bound {
  Tensor<double> o;    // [T, Hq, Dv] bound on |O_computed - O_exact|, same units as O
  Tensor<double> lse;  // [T, Hq] bound on |LSE_computed - LSE_exact| in the case's LSE base
  // Largest first-order relative coefficient of the case (kappa in docs/tolerances.md); bounds
  // are inflated by exp(8 kappa) for second-order terms and are not derived when kappa > 0.1.
  double kappa = 0.0;
  // The statistical tier (docs/tolerances.md §10): bounds, <= o and lse, that hold with
  // probability at least 1 - kStatFalseAlarm when the roundings of round-to-nearest operations
  // are independent and mean zero; empty: the same as o and lse.
  Tensor<double> o_stat, lse_stat;
};

// The false-alarm probability one derivation allows its statistical bounds (§10): a check of up
// to 100 parts (the output and N <= 99 partials) stays within 1e-6.
inline constexpr double kStatFalseAlarm = 1e-8;

// Requires a valid case and its reference. Fails on a layout that does not fit the case (an owner
// map of the wrong length, a rank outside [0, ranks), more ranks than shards), and when the
// claimed arithmetic is too coarse for a first-order bound to be meaningful (kappa > 0.1): the
// message names the row, kappa and the claim term that contributes most to it. `watch`
// (attention.hpp) counts (row, key) pairs bounded, a row at a time, and stops between rows: an
// "interrupted" error.
Expected<Bound> derive_bound(const Case& c, const Attention& ref, const Arithmetic& a,
                             const Watch& watch = {});

// What each step of a sound bound's derivation adds (docs/tolerances.md §6, §7), in the order the
// steps apply: the values sum to the bound, in its units. O's: "keys" (T_key,i, the key weights'
// errors), "accumulation" (c_S S_i + c_O |O_i|), "floors" (underflow and subnormal stores),
// "second_order" (the first three times exp(8 kappa)(1 + 2^-30) - 1), "p_cast", "merge" (N > 1),
// "store" (the output's format, with 2^-30 of the bound: its evaluation in double) and "oracle"
// (the reference's 2^-52). The LSE's: "keys", "log", "add" (m + ln l), "floors", "second_order",
// "merge", "store", "oracle", each in the case's base.
struct BoundTerm {
  const char* name;
  double value;
};
inline constexpr std::array<const char*, 8> kOBoundTermNames = {
    "keys", "accumulation", "floors", "second_order", "p_cast", "merge", "store", "oracle"};
inline constexpr std::array<const char*, 8> kLseBoundTermNames = {
    "keys", "log", "add", "floors", "second_order", "merge", "store", "oracle"};
struct BoundTerms {
  std::vector<BoundTerm> o;    // element (t, h, i) of O; empty where the row sees nothing (bound 0)
  std::vector<BoundTerm> lse;  // row (t, h) of the LSE; the same
};

// The terms of the sound bounds derive_bound gives element (t, h, i) of O and row (t, h) of the
// LSE, from the same code. Fails on an index outside the case and as derive_bound does for the
// claim; a row derive_bound would refuse (kappa > 0.1) gets its terms all the same.
Expected<BoundTerms> bound_terms(const Case& c, const Attention& ref, const Arithmetic& a,
                                 int64_t t, int64_t h, int64_t i);

// gamma_n(u) = n u / (1 - n u) (Higham, Accuracy and Stability, 2nd ed., Lemma 3.1); inf when
// n u >= 1.
inline double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu < 1.0 ? nu / (1.0 - nu) : INFINITY;
}

}  // namespace dcp::oracle
