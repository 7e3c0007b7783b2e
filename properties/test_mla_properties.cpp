// The absorbed-MLA attention slice on the DCP path equals the unabsorbed oracle within the
// composed bound (oracle/mla.hpp): absorb algebra, RoPE at global positions and head
// bookkeeping, for gather and replicate-q, ag_rs and a2a, any N, TP multiple and layout.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "properties/mla_check.hpp"
#include "properties/rc_gen.hpp"

namespace dcp::props {
namespace {

RC_GTEST_PROP(MlaSlice, AbsorbedDcpPathEqualsUnabsorbedOracle, ()) {
  MlaSpec s;
  gpu::DcpConfig cfg;
  const int64_t n = *rc::gen::inRange<int64_t>(1, 9);
  cfg.layout = {n, *rc::gen::inRange<int64_t>(1, 6)};
  cfg.tp_size = n * *rc::gen::inRange<int64_t>(1, 3);
  s.heads = cfg.tp_size * *rc::gen::inRange<int64_t>(1, 3);
  s.tokens = *rc::gen::inRange<int64_t>(1, 4);
  s.q_lora = *rc::gen::inRange<int64_t>(1, 33);
  s.nope = *rc::gen::inRange<int64_t>(1, 17);
  s.rope = 2 * *rc::gen::inRange<int64_t>(0, 5);
  s.kv_lora = *rc::gen::inRange<int64_t>(1, 33);
  s.v_head = *rc::gen::inRange<int64_t>(1, 17);
  s.seq = *rc::gen::inRange<int64_t>(0, 400);
  s.apply_rope = *rc::gen::arbitrary<bool>();
  s.explicit_pos = *rc::gen::arbitrary<bool>();
  s.causal = *rc::gen::weightedElement<bool>({{1, false}, {3, true}});
  s.kv_dtype = *rc::gen::element(oracle::DType::bf16, oracle::DType::f16, oracle::DType::f32);
  s.lse_base = *rc::gen::element(oracle::LseBase::e, oracle::LseBase::two);
  s.seed = *rc::gen::arbitrary<uint64_t>();
  draw_step_options(cfg, s.lse_base);
  const DcpCheck chk = check_mla(s, cfg);
  if (!chk.pass) RC_FAIL(describe(s) + " | " + describe(cfg) + "\n" + chk.report);
}

// The K3 shape scaled down by 8 in every width (96 -> 12 heads, 576/512 -> 72/64 latent),
// TP8 x DCP8 with replicate-q and a2a, RoPE skipped as K3 does; and the DeepSeek-style path with
// RoPE and the q gather.
TEST(MlaSlice, K3LikeShapeBothQueryPaths) {
  for (const bool repl : {true, false}) {
    MlaSpec s;
    s.heads = 16;
    s.q_lora = 48;
    s.nope = 16;
    s.rope = 8;
    s.kv_lora = 64;
    s.v_head = 16;
    s.seq = 1000;
    s.tokens = 2;
    s.apply_rope = !repl;
    gpu::DcpConfig cfg;
    cfg.tp_size = 8;
    cfg.layout = {8, 1};
    cfg.strategy = gpu::CommStrategy::a2a;
    cfg.replicate_q = repl;
    const DcpCheck chk = check_mla(s, cfg);
    EXPECT_TRUE(chk.pass) << chk.report;
    EXPECT_GT(chk.full.o_elements, 0);
    EXPECT_LT(chk.max_ratio, 1.0);
  }
}

}  // namespace
}  // namespace dcp::props
