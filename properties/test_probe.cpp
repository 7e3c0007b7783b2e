// The probe on an implementation whose arithmetic is known: the production path, configured. Every
// claim it prints must be sound for that arithmetic (never a finer format, a smaller exponential
// error or a larger tile than the path has) and, where the experiment can see it, exact.
#include <gtest/gtest.h>

#include "gpu/kernels/kernel_math.hpp"
#include "properties/probe.hpp"

namespace dcp::props {
namespace {

ProbeReport probe_path(const gpu::KernelMath& m, int64_t tile,
                       gpu::CommStrategy strategy = gpu::CommStrategy::a2a) {
  ProbeTarget t;
  t.cfg.math = m;
  t.cfg.tile = tile;
  t.cfg.strategy = strategy;
  t.label = "host";
  oracle::Expected<ProbeReport> r = probe(t);
  EXPECT_TRUE(r) << r.status().message();
  return r ? *r : ProbeReport{};
}

TEST(Probe, DefaultPathReadsAsFp32NearestUncastWithItsTile) {
  const ProbeReport r = probe_path({}, 64);
  const ProbeClaim& c = r.claim;
  EXPECT_EQ(c.accum, "f32");
  EXPECT_EQ(c.accum_rounding, "nearest");
  EXPECT_EQ(c.p_cast, "none");
  EXPECT_EQ(c.partial_dtype, "f32");
  EXPECT_EQ(c.exp_rel_err, 0.0) << probe_text(r);
  EXPECT_EQ(c.tile, 64) << probe_text(r);
  EXPECT_TRUE(c.merged);
  EXPECT_EQ(c.merge_accum, "f32");
  EXPECT_EQ(c.merge_lse_accum, "f32");
  EXPECT_EQ(c.merge_exp_rel_err, 0.0) << probe_text(r);
  EXPECT_EQ(claim_words(c),
            "accum f32  accum_rounding nearest  p_cast none  partial_dtype f32  tile 64  "
            "merge_accum f32  merge_lse_accum f32");
}

TEST(Probe, Bf16PipelineWithAPolynomialExpIsRecoveredSoundly) {
  gpu::KernelMath m;
  m.exp = gpu::ExpImpl::poly3;
  m.p_cast = gpu::StorageFormat::bf16;
  m.partial = gpu::StorageFormat::bf16;
  const ProbeReport r = probe_path(m, 512);
  const ProbeClaim& c = r.claim;
  EXPECT_EQ(c.p_cast, "bf16");
  EXPECT_EQ(c.partial_dtype, "bf16");
  // The cubic's own error is at most kExp2Poly3RelErr: the claim covers it, within 2x of it.
  EXPECT_GE(c.exp_rel_err, gpu::kExp2Poly3RelErr) << probe_text(r);
  EXPECT_LE(c.exp_rel_err, 2.0 * gpu::kExp2Poly3RelErr) << probe_text(r);
  EXPECT_EQ(c.tile, 512) << probe_text(r);
  // A bf16 partial hides its sums' rounding: the probe claims the safe word.
  EXPECT_EQ(c.accum_rounding, "any");
  EXPECT_GE(c.merge_exp_rel_err, gpu::kExp2Poly3RelErr) << probe_text(r);
}

TEST(Probe, Tf32OperandsAreClaimed) {
  gpu::KernelMath m;
  m.tf32 = true;
  const ProbeReport r = probe_path(m, 64);
  EXPECT_EQ(r.claim.accum, "tf32") << probe_text(r);
}

TEST(Probe, Bf16ReduceScatterIsTheMergesSumNotItsLse) {
  gpu::KernelMath m;
  m.merge = gpu::StorageFormat::bf16;
  const ProbeReport r = probe_path(m, 64, gpu::CommStrategy::ag_rs);
  EXPECT_EQ(r.claim.merge_accum, "bf16") << probe_text(r);
  EXPECT_EQ(r.claim.merge_lse_accum, "f32") << probe_text(r);
}

// A tile claim says "at least this many keys per tile": more than the kernel's would count too
// few rescales. Where the experiments cannot tell, the probe claims less.
TEST(Probe, TileIsNeverOverstated) {
  for (const gpu::ExpImpl e : {gpu::ExpImpl::libm, gpu::ExpImpl::poly3})
    for (const int64_t tile : {1, 16, 64, 1024}) {
      gpu::KernelMath m;
      m.exp = e;
      const ProbeReport r = probe_path(m, tile);
      EXPECT_LE(r.claim.tile, tile) << gpu::exp_impl_name(e) << "\n" << probe_text(r);
      if (tile >= 64) {
        EXPECT_EQ(r.claim.tile, tile) << gpu::exp_impl_name(e) << "\n" << probe_text(r);
      }
    }
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
