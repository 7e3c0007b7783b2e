// The plug-in seam (plugin/plugin.hpp) with implementations defined here, in process: a level
// that fails is reported as the implementation's failure, naming the level, the rank and its
// reason, never as a bound violation; a claim is applied to the levels it covers.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "plugin/plugin.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"

namespace dcp::plugin {
namespace {

int refusing_partial(void*, const dcpv_partial_args* a, char* err, size_t len) {
  std::snprintf(err, len, "shape %lld x %lld is not supported\nby this kernel",
                static_cast<long long>(a->tokens), static_cast<long long>(a->heads));
  return 1;
}

int unused_combine(void*, const dcpv_combine_args*, char*, size_t) { return 1; }

Plugin in_process(const dcpv_impl& impl) {
  Plugin p;
  p.path = "in-process";
  p.impl = &impl;
  return p;
}

TEST(Plugin, AFailingLevelIsTheImplementationsFailureNamingLevelRankAndReason) {
  static const dcpv_impl impl = {DCPV_ABI_VERSION,
                                 "refuser",
                                 dcpv_claim{1, 0, 0, 0.0, 0.0, DCPV_F32, 1, 1, DCPV_F32, DCPV_F32},
                                 nullptr,
                                 refusing_partial,
                                 nullptr,
                                 nullptr};
  props::CaseSpec spec;
  spec.q_heads = 4;
  spec.kv_heads = 2;
  spec.seq = 40;
  gpu::DcpConfig cfg;
  cfg.tp_size = 2;
  cfg.layout = {2, 1};
  const props::DcpCheck chk =
      props::check_dcp(props::make_case(spec), cfg, props::make_chunks(spec.seq, 1),
                       plugin_backend(in_process(impl), std::chrono::seconds(30)));
  EXPECT_FALSE(chk.pass);
  EXPECT_TRUE(chk.backend_error);
  EXPECT_NE(chk.report.find("implementation 'refuser' (in-process): level partial on dcp rank"),
            std::string::npos)
      << chk.report;
  // The plug-in's reason, on the report's one line.
  EXPECT_NE(chk.report.find("shape 1 x 4 is not supported\\nby this kernel"), std::string::npos)
      << chk.report;
}

// The exp error a plug-in below claims (a claim's value, not a tolerance).
constexpr double kClaimedExpRelErr = 1e-4;

TEST(Plugin, TheClaimCoversTheLevelsItProvides) {
  static const dcpv_impl combine_only = {
      DCPV_ABI_VERSION,
      "bf16 combine",
      dcpv_claim{0, 0, 0, kClaimedExpRelErr, 0.0, DCPV_F32, 1, 1, DCPV_F32, DCPV_BF16},
      nullptr,
      nullptr,
      unused_combine,
      nullptr};
  const Plugin p = in_process(combine_only);
  gpu::DcpConfig cfg;
  cfg.tp_size = 4;
  cfg.layout = {4, 1};
  cfg.strategy = gpu::CommStrategy::a2a;
  // a2a: the plug-in's combine runs, so the merge is its (bf16 sums, its exponential); the
  // partials are the production path's.
  const oracle::Arithmetic merged = plugin_claim(p, cfg, false);
  EXPECT_EQ(merged.merge_accum, oracle::DType::bf16);
  EXPECT_EQ(merged.exp_rel_err.value_or(0.0), kClaimedExpRelErr);
  EXPECT_TRUE(merged.truncating_mma);
  const oracle::Arithmetic partial = plugin_claim(p, cfg, true);
  EXPECT_FALSE(partial.exp_rel_err.has_value());
  EXPECT_FALSE(partial.truncating_mma);
  // ag_rs: the production combine runs, and the claim is the production path's.
  cfg.strategy = gpu::CommStrategy::ag_rs;
  EXPECT_EQ(plugin_claim(p, cfg, false).merge_accum, oracle::DType::f32);
}

// The production path states its dots' order and its ag_rs merge's form (props::host_claim); the
// ABI has no word for either, so a plug-in's own levels are judged in any order and any form, and
// the production path's words stay only on the levels it still runs.
TEST(Plugin, TheProductionPathsOrderAndFormAreClaimedOnlyWhereItsLevelsRun) {
  gpu::DcpConfig cfg;
  cfg.tp_size = 4;
  cfg.layout = {4, 1};
  cfg.strategy = gpu::CommStrategy::ag_rs;
  EXPECT_EQ(props::host_claim(cfg, true).dot_lanes, 1);
  EXPECT_EQ(props::host_claim(cfg, false).dot_lanes, 1);
  EXPECT_TRUE(props::host_claim(cfg, false).merge_scaled);
  EXPECT_FALSE(props::host_claim(cfg, true).merge_scaled);  // a partial has no merge
  cfg.strategy = gpu::CommStrategy::a2a;
  EXPECT_FALSE(props::host_claim(cfg, false).merge_scaled);  // a2a divides its sum

  // Round-to-nearest fp32 throughout: only the levels differ.
  constexpr dcpv_claim kClaim{1, 0, 0, 0.0, 0.0, DCPV_F32, 1, 1, DCPV_F32, DCPV_F32};
  static const dcpv_impl attends = {DCPV_ABI_VERSION, "partial and combine", kClaim, nullptr,
                                    refusing_partial, unused_combine,        nullptr};
  static const dcpv_impl combines = {DCPV_ABI_VERSION, "combine",      kClaim, nullptr,
                                     nullptr,          unused_combine, nullptr};
  const Plugin a = in_process(attends), c = in_process(combines);
  for (const gpu::CommStrategy st : {gpu::CommStrategy::ag_rs, gpu::CommStrategy::a2a}) {
    cfg.strategy = st;
    const bool production_merge = st == gpu::CommStrategy::ag_rs;  // a plug-in combines in a2a
    // Its own partials: any order, in the partial's claim and in the merge's.
    EXPECT_EQ(plugin_claim(a, cfg, true).dot_lanes, 0);
    EXPECT_EQ(plugin_claim(a, cfg, false).dot_lanes, 0);
    EXPECT_EQ(plugin_claim(a, cfg, false).merge_scaled, production_merge);
    // The production path's partials under the plug-in's combine (a2a) or the production one.
    EXPECT_EQ(plugin_claim(c, cfg, true).dot_lanes, 1);
    EXPECT_EQ(plugin_claim(c, cfg, false).dot_lanes, 1);
    EXPECT_EQ(plugin_claim(c, cfg, false).merge_scaled, production_merge);
    // A whole step is the plug-in's.
    EXPECT_EQ(plugin_step_claim(a, cfg, true).dot_lanes, 0);
    EXPECT_EQ(plugin_step_claim(a, cfg, false).dot_lanes, 0);
    EXPECT_FALSE(plugin_step_claim(a, cfg, false).merge_scaled);
  }
}

}  // namespace
}  // namespace dcp::plugin
