// mla.hpp — the oracle of the absorbed-MLA attention slice: computed *unabsorbed*, with a bound
// derived for the absorbed fp32 computation.
//
// The production path (gpu/mla_slice.hpp) absorbs w_kc into the query and w_vc into the output
// and attends over the shared latent. The oracle instead decompresses the latent into per-head
// keys and values,
//   K[j, h] = [ w_kc[h] c_kv[j] (Dn),  rope(k_pe[j], j) (Dr) ]     V[j, h] = c_kv[j] w_vc[h]
//   q[t, h] = [ q_nope (Dn),           rope(q_pe, q_pos[t]) (Dr) ] with q = w_qb[h] c_q[t]
// and runs plain multi-head attention, so agreement checks the absorb algebra, the rope
// positions and the head bookkeeping at once (absorbing is exact in real arithmetic:
// q_nope . (w_kc c_kv) = (q_nope w_kc) . c_kv).
//
// The bound (docs/tolerances.md, "The MLA slice") composes three stages:
//   attention   derive_bound on the latent case the production kernels actually read
//   inputs      a priori bounds on how far those fp32 queries and rotated keys may sit from the
//               exact ones (projection, absorb, RoPE angle and rounding, cache rounding); a
//               logit perturbation of at most Delta moves O by at most
//               (e^(2 Delta) - 1) sum_j P_j |v_j - O| and the LSE by at most Delta
//   V absorb    an fp32 dot product of length Dl over perturbed O_lat
//
//   MlaCase m = ...;
//   Case u = unabsorbed_case(m);                    // q [T, Hq, Dn + Dr], k, v per head, f64
//   Expected<Bound> b = derive_mla_bound(m, q_att, k_att, a);   // o [T, Hq, Dvh], lse [T, Hq]
#pragma once

#include <cstdint>
#include <vector>

#include "oracle/case.hpp"
#include "oracle/status.hpp"
#include "oracle/tensor.hpp"
#include "oracle/tolerance.hpp"

namespace dcp::oracle {

struct MlaCase {
  Tensor<double> w_qb;  // [Hq, Dn + Dr, Dc]
  Tensor<double> w_kc;  // [Hq, Dn, Dl]
  Tensor<double> w_vc;  // [Hq, Dl, Dvh]
  Tensor<double> c_q;   // [T, Dc]
  Tensor<double> c_kv;  // [S, Dl], exact in kv_dtype
  Tensor<double> k_pe;  // [S, Dr], exact in kv_dtype
  DType kv_dtype = DType::bf16;
  std::vector<int64_t> q_pos;  // [T]
  bool causal = true;
  bool apply_rope = false;
  double rope_theta = 10000.0;
  double scale = 0.0;  // the softmax scale as the implementation holds it (an fp32 value)
  LseBase lse_base = LseBase::e;

  int64_t tokens() const { return c_q.dim(0); }
  int64_t heads() const { return w_qb.dim(0); }
  int64_t q_lora() const { return c_q.dim(1); }
  int64_t nope() const { return w_kc.dim(1); }
  int64_t rope() const { return k_pe.dim(1); }
  int64_t kv_lora() const { return c_kv.dim(1); }
  int64_t v_head() const { return w_vc.dim(2); }
  int64_t seq() const { return c_kv.dim(0); }
};

// The decompressed multi-head case (f64 inputs, Hkv = Hq, explicit scale).
Case unabsorbed_case(const MlaCase& m);

// The bound on |out - exact| ([T, Hq, Dvh]) and |lse - exact| ([T, Hq]) of an absorbed fp32
// implementation whose attention read q_att [T, Hq, Dl + Dr] and k_att [S, Dl + Dr] (fp32 values)
// and claims `a` for its attention and combine (a.out: the format of O_lat and of out).
Expected<Bound> derive_mla_bound(const MlaCase& m, const Tensor<double>& q_att,
                                 const Tensor<double>& k_att, const Arithmetic& a);

}  // namespace dcp::oracle
