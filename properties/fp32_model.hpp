// fp32_model.hpp — a family of fp32 decode-attention implementations, sharded DCP-style and
// merged, used to test the oracle's derived bounds from both sides: every correct variant must
// stay inside the bound (soundness) and every planted bug must leave it (sensitivity).
//
// This is not the production path (gpu/ is); it is a compact model of the ways correct kernels
// differ: summation order, FMA or not, online-softmax tile size, exp vs exp2 with the scale
// folded into log2(e), approximate intrinsics (results perturbed inside their ulp budget),
// P cast to bf16/fp16/fp8 before P.V, fp8 caches' scales folded into the softmax scale and the
// output, sharding by owner(p) = floor(p / I) mod N, and the ag_rs or a2a combine over any order.
//
//   ModelConfig m;  m.shards = 4;  m.tile = 32;  m.base2 = true;  m.merge = Merge::a2a;
//   ModelOutput out = run_fp32_model(c, m);        // out.o [T, Hq, Dv], out.lse [T, Hq]
//   Arithmetic a = claim_of(m);                     // the arithmetic this variant claims
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mutants/catalogue.hpp"
#include "oracle/case.hpp"
#include "oracle/tensor.hpp"
#include "oracle/tolerance.hpp"

namespace dcp::props {

// ag_rs and a2a merge all N partials at once; pairwise joins them two at a time in rank order (a
// chain, as cascades and ring merges run), each merge's O normalized and stored in `partial`, its
// LSE in fp32: N - 1 merges deep, claimed as merge_depth.
enum class Merge { ag_rs, a2a, pairwise };

// Planted bugs: the catalogue's model mutants (mutants/catalogue.hpp, kInModel), or none for a
// correct implementation.
using Bug = mutants::Mutant;
bool planted_in_model(Bug b);

struct ModelConfig {
  int64_t shards = 1;         // N ranks; key p lives on rank floor(p / interleave) mod N
  int64_t interleave = 1;     // I
  int64_t tile = 16;          // keys per online-softmax tile
  bool base2 = false;         // exponentials as exp2 with scale * log2(e) folded in (FA-style)
  bool fma = false;           // dot products and exponent arguments with fused multiply-add
  bool pairwise_dot = false;  // dot products summed pairwise instead of left to right
  // Dot products summed in this many lanes, lane t adding components i = t (mod W) left to right,
  // then the lane sums pairwise (a dot vectorized along the head dimension), and claimed as
  // dot_lanes; 1: left to right, claimed so. 0: as pairwise_dot says, no order claimed.
  int64_t dot_lanes = 0;
  bool perturb = true;  // perturb exp/log results by up to 1 ulp (approximate intrinsics)
  // The P.V sums and the softmax denominator added as tensor cores do: each product exact, each
  // add rounded toward zero (claimed accum_rounding any).
  bool truncate = false;
  // The kernel's own exp and log, less accurate than the intrinsics (a vectorized polynomial):
  // every exp result off by up to exp_rel_err relative, every log result by up to
  // log_rel_err max(1, |result|); at random, or all low by the whole error (systematic, as a
  // biased approximation is). claim_of claims them as exp_rel_err and log_rel_err. 0: exact.
  double exp_rel_err = 0.0;
  double log_rel_err = 0.0;
  bool approx_systematic = false;
  // The merge's own exp, where it is not the kernel's: off by up to this much (0: the library's,
  // as a combine beside a kernel's vectorized exp), claimed as merge_exp_rel_err. nullopt: the
  // kernel's exp.
  std::optional<double> merge_exp_rel_err;
  // The online softmax's rescales exp(m_old - m_new), where their exp is not the one that weights
  // the keys: off by up to this much (0: the library's, as a scalar exp at each tile's rescale
  // beside a vectorized polynomial), claimed as rescale_exp_rel_err. nullopt: the kernel's exp.
  std::optional<double> rescale_exp_rel_err;
  std::optional<oracle::DType> p_cast;  // P rounded to this format before P.V
  // TF32 tensor cores: both operands of every q.k and P.V product rounded to tf32 first.
  bool tf32 = false;
  // Flush to zero: the P cast, the partials' and the output's stores give 0 for a result in
  // their subnormal range.
  bool ftz = false;
  // A kernel that rounds its cache's dequantized keys and values (stored value times scale) to
  // this format before its products, claimed as kv_dequant. nullopt: exact dequantization.
  std::optional<oracle::DType> dequantize_to;
  oracle::DType out = oracle::DType::f32;
  // The partials' O as exchanged (rounded to this format before the merge, and as reported in
  // o_partial), and the format of the cross-rank products and running sum (bf16 for a bf16
  // reduce-scatter: every product and every partial sum rounded to it).
  oracle::DType partial = oracle::DType::f32;
  oracle::DType merge_accum = oracle::DType::f32;
  // The format of the weight sum sum_r exp(L_r - m), every partial sum rounded to it: the merged
  // LSE's argument and a2a's denominator (engines sum the weights in fp32 beside a bf16
  // reduce-scatter of the outputs).
  oracle::DType merge_lse_accum = oracle::DType::f32;
  Merge merge = Merge::ag_rs;
  // ag_rs's form claimed (merge_form scaled): its terms exp(L_r - L) O_r, L the merged LSE it
  // computed, each rounded to merge_accum, summed there and stored as the output.
  bool claim_scaled = false;
  bool reverse_merge = false;  // sum partials from the last rank down
  Bug bug = Bug::none;
  uint64_t seed = 0;  // for the perturbations
};

struct ModelOutput {
  oracle::Tensor<double> o;            // [T, Hq, Dv]
  oracle::Tensor<double> lse;          // [T, Hq] in the case's base
  oracle::Tensor<double> o_partial;    // [N, T, Hq, Dv] each shard's O_r (fp32 values)
  oracle::Tensor<double> lse_partial;  // [N, T, Hq] each shard's L_r in the case's base
};

ModelOutput run_fp32_model(const oracle::Case& c, const ModelConfig& m);

// The arithmetic a correct variant claims (what derive_bound must accept).
oracle::Arithmetic claim_of(const ModelConfig& m);

std::string describe(const ModelConfig& m);

}  // namespace dcp::props
