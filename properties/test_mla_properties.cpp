// The absorbed-MLA attention slice on the DCP path equals the unabsorbed oracle within the
// composed bound (oracle/mla.hpp): absorb algebra, RoPE at global positions and head
// bookkeeping, for gather and replicate-q, ag_rs and a2a, any N, TP multiple and layout.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "properties/mla_check.hpp"
#include "properties/suite.hpp"

namespace dcp::props {
namespace {

RC_GTEST_PROP(MlaSlice, AbsorbedDcpPathEqualsUnabsorbedOracle, ()) {
  set_property_bound(BoundTier::statistical);
  mla_slice_property();
}

// The K3 shape scaled down by 8 in every width (96 -> 12 heads, 576/512 -> 72/64 latent),
// TP8 x DCP8 with replicate-q and a2a, RoPE skipped as K3 does; and the DeepSeek-style path with
// RoPE and the q gather.
TEST(MlaSlice, K3LikeShapeBothQueryPaths) {
  for (const bool repl : {true, false}) {
    const MlaSpec s{.tokens = 2,
                    .heads = 16,
                    .q_lora = 48,
                    .nope = 16,
                    .rope = 8,
                    .kv_lora = 64,
                    .v_head = 16,
                    .seq = 1000,
                    .apply_rope = !repl};
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
