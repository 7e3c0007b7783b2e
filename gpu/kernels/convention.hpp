// convention.hpp — the production path's conventions for LSE base, empty shard and sink.
//
// These are the same three rules the oracle states (docs/case-model.md); gpu/ keeps its own copy
// because it shares no code with oracle/, and properties/ asserts the two agree.
//
// 1. LSE base. A partial or final LSE is ln Z (LseBase::e) or log2 Z (LseBase::two), fixed by the
//    kernel. Merging uses the matching pair: exp/log for base e, exp2/log2 for base 2
//    (pow_base/log_base below). A base-2 kernel folds log2(e) into the softmax scale. The
//    exponential itself is the math library's or exp2_poly3 (kernel_math.hpp, ExpImpl); a
//    base-e poly3 exponential is 2^(x log2 e), the product rounded once.
// 2. Empty shard. A rank (or split) with no visible key and no sink returns LSE = -inf and O = 0.
//    -inf is the merge's identity: its weight is exactly 0 and nothing may turn it into NaN.
// 3. Sink. The per-head sink logit sigma_h (natural-log units) adds exp(sigma_h) to Z exactly
//    once per DCP group: on dcp rank kSinkRank only, inside its local partial.
//
//   float w = pow_base(LseBase::two, l_r - l_max);   // exp2 for a base-2 LSE
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "gpu/kernels/hd.hpp"
#include "gpu/kernels/kernel_math.hpp"

namespace dcp::gpu {

enum class LseBase { e, two };

// log2(e) rounded to fp32 (1.44269504...); a base-2 kernel scales natural-unit logits by it.
inline constexpr float kLog2eF = 1.44269504088896340736f;
// The LSE of an empty shard or a fully masked row.
inline constexpr float kEmptyLseF = -std::numeric_limits<float>::infinity();
// The dcp rank whose partial carries the sink term.
inline constexpr int64_t kSinkRank = 0;

DCP_HD inline bool is_empty_lse(float l) { return l == kEmptyLseF; }

// A kernel's exponential: its LSE base and how it computes base^x. Converts from a bare base (the
// math library's exponential), so merges written for a base take either.
struct Exponential {
  LseBase base = LseBase::e;
  ExpImpl impl = ExpImpl::libm;
  DCP_HD constexpr Exponential(LseBase b, ExpImpl i = ExpImpl::libm) : base(b), impl(i) {}
};

// base^x and log_base(x), the exp/log pair matching an LSE's base.
DCP_HD inline float pow_base(Exponential e, float x) {
  if (e.impl == ExpImpl::poly3) return exp2_poly3(e.base == LseBase::e ? x * kLog2eF : x);
  return e.base == LseBase::e ? expf(x) : exp2f(x);
}
DCP_HD inline float log_base(LseBase b, float x) { return b == LseBase::e ? logf(x) : log2f(x); }
// Natural-log units to the base's units (the sink and softcap are defined in natural units).
DCP_HD inline float to_base_units(LseBase b, float x_e) {
  return b == LseBase::e ? x_e : x_e * kLog2eF;
}

}  // namespace dcp::gpu
