// The probe on an implementation whose arithmetic is known: the production path, configured. Every
// claim it prints must be sound for that arithmetic (never a finer format, a smaller exponential
// error or a larger tile than the path has) and, where the experiment can see it, exact. These run
// under the sanitizers too (every experiment once); tests/probe/test_probe_claims.cpp holds the
// longer ones (more arithmetic, tiles, truncating adds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpu/kernels/kernel_math.hpp"
#include "gpu/run_threads.hpp"
#include "oracle/tolerance.hpp"
#include "properties/probe.hpp"
#include "tests/support/probe_path.hpp"

namespace dcp::props {
namespace {

TEST(Probe, DefaultPathReadsAsFp32NearestUncastWithItsTile) {
  const ProbeReport r = probe_path({}, 64);
  const ProbeClaim& c = r.claim;
  EXPECT_EQ(c.accum, "f32");
  EXPECT_EQ(c.accum_rounding, "nearest");
  EXPECT_EQ(c.p_cast, "none");
  EXPECT_EQ(c.partial_dtype, "f32");
  EXPECT_EQ(c.exp_rel_err, 0.0) << probe_text(r);
  EXPECT_EQ(c.tile, 64) << probe_text(r);
  EXPECT_FALSE(c.rescale_exp_rel_err) << probe_text(r);  // the same exp as the weights'
  EXPECT_TRUE(c.merged);
  EXPECT_EQ(c.merge_accum, "f32");
  EXPECT_EQ(c.merge_lse_accum, "f32");
  EXPECT_EQ(c.merge_exp_rel_err, 0.0) << probe_text(r);
  // body::partial_attention sums each q.k left to right over the head dimension.
  EXPECT_EQ(c.dot_lanes, 1) << probe_text(r);
  // libm's logf, in the partials and the merge, within an ulp: the claim's floor, a quarter more.
  EXPECT_EQ(c.log_rel_err, 1.5e-7) << probe_text(r);
  EXPECT_EQ(claim_words(c),
            "accum f32  accum_rounding nearest  p_cast none  partial_dtype f32  tile 64  "
            "dot_lanes 1  log_rel_err 1.5e-07  merge_accum f32  merge_lse_accum f32");
}

TEST(Probe, Bf16OutputsShowRoundToNearestThroughMidpoints) {
  gpu::KernelMath m;
  m.p_cast = gpu::StorageFormat::bf16;
  m.partial = gpu::StorageFormat::bf16;
  const ProbeReport r = probe_path(m, 64);
  EXPECT_EQ(r.claim.accum_rounding, "nearest") << probe_text(r);
}

// P cast to E4M3: the claim is E4M3, never E4M3FNUZ, which rounds every weight the probe draws
// alike but has the finer subnormals (its claim would be too tight for an E4M3 kernel's small
// weights); the finer of two equal casts is ruled out by the coarser, which covers both.
TEST(Probe, AnE4m3PCastIsClaimedAsE4m3) {
  gpu::KernelMath m;
  m.p_cast = gpu::StorageFormat::f8e4m3;
  const ProbeReport r = probe_path(m, 64);
  EXPECT_EQ(r.claim.p_cast, "f8_e4m3") << probe_text(r);
}

TEST(Probe, ANonFiniteOutputIsTheImplementationsFailureNotAMeasurement) {
  ProbeTarget t;
  t.backend = props::DcpBackend([](const gpu::DcpInputs& in, const gpu::DcpConfig& cfg) {
    gpu::Result<gpu::GroupRun> r = gpu::run_dcp_threads(in, cfg);
    if (r) r->o[3] = r->partial_o[0][3] = NAN;
    return r;
  });
  oracle::Expected<ProbeReport> r = probe(t);
  ASSERT_FALSE(r);
  EXPECT_NE(
      r.status().message().find("experiment 'pairs': the implementation's O element 3 is nan"),
      std::string::npos)
      << r.status().message();
}

// The production path with every LSE it returns, its partials' and the merged, off by
// d max(1, |L|): a log of that error.
ProbeTarget log_off_by(double d) {
  ProbeTarget t;
  t.backend = props::DcpBackend([d](const gpu::DcpInputs& in, const gpu::DcpConfig& cfg) {
    gpu::Result<gpu::GroupRun> r = gpu::run_dcp_threads(in, cfg);
    const auto off = [d](std::vector<float>& lse) {
      for (float& l : lse)
        if (std::isfinite(l)) l += static_cast<float>(d * std::max(1.0, std::fabs(double{l})));
    };
    if (r) {
      off(r->lse);
      for (std::vector<float>& p : r->partial_lse) off(p);
    }
    return r;
  });
  return t;
}

TEST(Probe, ALogsErrorIsClaimedWhereBelowTheDefaultBudget) {
  // Planted log errors, not tolerances: 2e-7 lies above the claim an exact log gets (an ulp and a
  // quarter, 1.5e-7) and below the default budget (3 ulp, 3.6e-7); 1e-5 far above that budget.
  constexpr double kFine = 2e-7, kCoarse = 1e-5;
  oracle::Expected<ProbeReport> fine = probe(log_off_by(kFine));
  ASSERT_TRUE(fine) << fine.status().message();
  EXPECT_GE(fine->claim.log_rel_err, kFine) << probe_text(*fine);
  EXPECT_LE(fine->claim.log_rel_err, oracle::Arithmetic{}.log_ulps * 0x1p-23) << probe_text(*fine);
  // Past the default budget the default is kept (no word), and the finding says why.
  oracle::Expected<ProbeReport> coarse = probe(log_off_by(kCoarse));
  ASSERT_TRUE(coarse) << coarse.status().message();
  EXPECT_EQ(coarse->claim.log_rel_err, 0.0) << probe_text(*coarse);
  EXPECT_EQ(coarse->findings.back().what, "log");
  EXPECT_NE(coarse->findings.back().evidence.find("above the default budget"), std::string::npos)
      << probe_text(*coarse);
}

// A plug-in's step level beside its partial and combine levels is not run by the experiments:
// the logs it takes are not measured, so no log word is claimed.
TEST(Probe, AStepLevelNotProbedKeepsTheDefaultLog) {
  ProbeTarget t = production_target({}, 64);
  t.unprobed_step = true;
  oracle::Expected<ProbeReport> r = probe(t);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->claim.log_rel_err, 0.0) << probe_text(*r);
  EXPECT_NE(r->findings.back().evidence.find("its step level is not probed"), std::string::npos)
      << probe_text(*r);
}

TEST(Probe, WithoutItsOwnLevelsNothingIsMeasured) {
  ProbeTarget t;
  t.attend = false;
  t.merge = false;
  oracle::Expected<ProbeReport> r = probe(t);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->calls, 0);
  EXPECT_EQ(claim_words(r->claim),
            "accum f32  accum_rounding any  p_cast none  partial_dtype f32  tile 1");
}

TEST(Probe, ClaimedErrorsRoundUpToTwoDigits) {
  EXPECT_EQ(round_up_2sig(1.234e-4), 1.3e-4);
  EXPECT_EQ(round_up_2sig(1.2e-4), 1.2e-4);
  EXPECT_EQ(round_up_2sig(9.91e-5), 1e-4);
  EXPECT_GE(round_up_2sig(7.51e-5), 7.51e-5);
}

}  // namespace
}  // namespace dcp::props
