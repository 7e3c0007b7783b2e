// rc_gen.hpp — RapidCheck generators of case specs and fp32-model configurations.
//
// Specs are built constructively (no filtering, so no discards): the KV head count first, then a
// multiple of it for the query heads, and so on. Every field shrinks toward the simplest case.
//
//   RC_GTEST_PROP(Suite, Name, ()) {
//     const CaseSpec spec = *gen_case_spec(SpecLimits{});
//     const Case c = make_case(spec);
//   }
#pragma once

#include <rapidcheck.h>

#include <cstdint>

#include "properties/case_gen.hpp"
#include "properties/fp32_model.hpp"

namespace dcp::props {

struct SpecLimits {
  int64_t max_tokens = 3;
  int64_t max_kv_heads = 2;
  int64_t max_group = 3;  // Hq / Hkv
  int64_t max_head_dim = 48;
  int64_t max_v_dim = 24;
  int64_t max_seq = 200;
  bool mixed_dtypes = true;  // draw fp16/bf16 inputs too
};

inline rc::Gen<CaseSpec> gen_case_spec(SpecLimits lim) {
  using dcp::oracle::DType;
  using dcp::oracle::LseBase;
  return rc::gen::exec([lim] {
    CaseSpec s;
    s.kv_heads = *rc::gen::inRange<int64_t>(1, lim.max_kv_heads + 1);
    s.q_heads = s.kv_heads * *rc::gen::inRange<int64_t>(1, lim.max_group + 1);
    s.tokens = *rc::gen::inRange<int64_t>(1, lim.max_tokens + 1);
    s.head_dim = *rc::gen::inRange<int64_t>(1, lim.max_head_dim + 1);
    s.shared_latent = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    const int64_t vmax = s.shared_latent ? std::min(lim.max_v_dim, s.head_dim) : lim.max_v_dim;
    s.v_dim = *rc::gen::inRange<int64_t>(1, vmax + 1);
    s.seq = *rc::gen::inRange<int64_t>(0, lim.max_seq + 1);
    if (lim.mixed_dtypes) {
      s.q_dtype = *rc::gen::element(DType::f32, DType::bf16, DType::f16);
      s.kv_dtype = *rc::gen::element(DType::f32, DType::bf16, DType::f16);
    }
    s.causal = *rc::gen::weightedElement<bool>({{1, false}, {3, true}});
    s.explicit_pos = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    s.window = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, lim.max_seq + 2)}});
    s.softcap = *rc::gen::weightedElement<double>({{3, 0.0}, {1, 4.0}, {1, 30.0}});
    s.sink = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    s.topk = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 33)}});
    s.lse_base = *rc::gen::element(LseBase::e, LseBase::two);
    s.explicit_scale = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    s.values = *rc::gen::element(ValueStyle::normal, ValueStyle::peaked, ValueStyle::wide,
                                 ValueStyle::ties, ValueStyle::tiny);
    s.seed = *rc::gen::arbitrary<uint64_t>();
    return s;
  });
}

// A correct fp32 implementation variant (bug == none).
inline rc::Gen<ModelConfig> gen_model_config() {
  using dcp::oracle::DType;
  return rc::gen::exec([] {
    ModelConfig m;
    m.shards = *rc::gen::inRange<int64_t>(1, 9);
    m.interleave = *rc::gen::inRange<int64_t>(1, 5);
    m.tile = *rc::gen::inRange<int64_t>(1, 65);
    m.base2 = *rc::gen::arbitrary<bool>();
    m.fma = *rc::gen::arbitrary<bool>();
    m.pairwise_dot = *rc::gen::arbitrary<bool>();
    m.perturb = *rc::gen::weightedElement<bool>({{1, false}, {3, true}});
    m.p_cast = *rc::gen::weightedOneOf<std::optional<DType>>(
        {{2, rc::gen::just(std::optional<DType>())},
         {1,
          rc::gen::element(std::optional<DType>(DType::bf16), std::optional<DType>(DType::f16))}});
    m.out = *rc::gen::element(DType::f32, DType::bf16, DType::f16);
    m.merge = *rc::gen::element(Merge::ag_rs, Merge::a2a);
    m.reverse_merge = *rc::gen::arbitrary<bool>();
    m.seed = *rc::gen::arbitrary<uint64_t>();
    return m;
  });
}

}  // namespace dcp::props
