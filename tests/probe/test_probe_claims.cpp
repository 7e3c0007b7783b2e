// The probe's claims on implementations whose arithmetic is known, beyond the default path
// (properties/test_probe.cpp): a bf16 pipeline with a polynomial exponential, tf32 operands and a
// bf16 reduce-scatter, tiles from 1 to 1024 keys, and sums that truncate as tensor cores may. Each
// claim must cover the arithmetic (never finer) and equal it where the experiments can see it.
// Labelled slow: a few seconds a probe, minutes under the sanitizers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpu/kernels/kernel_math.hpp"
#include "gpu/run_threads.hpp"
#include "oracle/dtype.hpp"
#include "properties/probe.hpp"
#include "tests/support/probe_path.hpp"

namespace dcp::props {
namespace {

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
  // Its rescales run the same cubic: the kernel's claim covers them, no word of their own.
  EXPECT_FALSE(c.rescale_exp_rel_err) << probe_text(r);
  // A bf16 partial hides its sums' rounding: the probe claims the safe word.
  EXPECT_EQ(c.accum_rounding, "any");
  EXPECT_GE(c.merge_exp_rel_err, gpu::kExp2Poly3RelErr) << probe_text(r);
}

// tf32 operands and a bf16 reduce-scatter (ag_rs) in one path: accum tf32, and the merge's sums
// bf16 beside its fp32 weight sum.
TEST(Probe, Tf32OperandsAndABf16ReduceScatterAreClaimed) {
  gpu::KernelMath m;
  m.tf32 = true;
  m.merge = gpu::StorageFormat::bf16;
  const ProbeReport r = probe_path(m, 64);
  EXPECT_EQ(r.claim.accum, "tf32") << probe_text(r);
  EXPECT_EQ(r.claim.merge_accum, "bf16") << probe_text(r);
  EXPECT_EQ(r.claim.merge_lse_accum, "f32") << probe_text(r);
  // The reduce-scatter sums exp(L_r - L) O_r and stores that sum: the scaled form.
  EXPECT_TRUE(r.claim.merge_scaled) << probe_text(r);
}

// A bf16 merge that sums exp(L_r - M) O_r (M the largest partial LSE) and then divides by the
// weights' sum, as an all-to-all's combine does, is not the scaled form: the probe claims none.
TEST(Probe, AMergeThatDividesItsSumIsNotClaimedScaled) {
  ProbeTarget t = production_target({}, 64);
  t.backend = DcpBackend([](const gpu::DcpInputs& in, const gpu::DcpConfig& cfg) {
    gpu::Result<gpu::GroupRun> r = gpu::run_dcp_threads(in, cfg);
    if (!r || r->partial_o.size() < 2) return r;
    const auto bf16 = [](double x) {
      return static_cast<float>(oracle::round_to(oracle::DType::bf16, x));
    };
    const double lb = cfg.base == gpu::LseBase::e ? 1.0 : std::log(2.0);
    const size_t rows = r->lse.size(), dv = r->o.size() / rows;
    for (size_t row = 0; row < rows; ++row) {
      double m = -INFINITY, z = 0.0;
      for (const auto& l : r->partial_lse) m = std::max(m, lb * l[row]);
      if (!std::isfinite(m)) continue;
      for (const auto& l : r->partial_lse) z += std::exp(lb * l[row] - m);
      for (size_t i = 0; i < dv; ++i) {
        float num = 0.0f;
        for (size_t k = 0; k < r->partial_o.size(); ++k)
          num = bf16(num + bf16(std::exp(lb * r->partial_lse[k][row] - m) *
                                r->partial_o[k][row * dv + i]));
        r->o[row * dv + i] = bf16(num / z);
      }
    }
    return r;
  });
  oracle::Expected<ProbeReport> r = probe(t);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->claim.merge_accum, "bf16") << probe_text(*r);
  EXPECT_FALSE(r->claim.merge_scaled) << probe_text(*r);
}

// A tile claim says "at least this many keys per tile": more than the kernel's would count too
// few rescales. Where the experiments cannot tell, the probe claims less.
TEST(Probe, TileIsNeverOverstated) {
  // (libm with tile 64 is the default path's test; poly3 with 512 the bf16 pipeline's.)
  const std::pair<gpu::ExpImpl, int64_t> paths[] = {
      {gpu::ExpImpl::libm, 1}, {gpu::ExpImpl::poly3, 16}, {gpu::ExpImpl::poly3, 1024}};
  for (const auto& [e, tile] : paths) {
    gpu::KernelMath m;
    m.exp = e;
    const ProbeReport r = probe_path(m, tile);
    EXPECT_LE(r.claim.tile, tile) << gpu::exp_impl_name(e) << "\n" << probe_text(r);
    if (tile >= 16) {
      EXPECT_EQ(r.claim.tile, tile) << gpu::exp_impl_name(e) << "\n" << probe_text(r);
    }
  }
}

// A one-rank attention whose P.V sums truncate as tensor cores may: the row's keys split into
// `accumulators` contiguous runs, each adding `chunk` products at a time (summed exactly) into an
// fp32 accumulator rounding toward zero, the runs then summed exactly; every other operation in
// fp32 to nearest, O stored in `out`. The implementation the production path cannot be, to see the
// probe call its sums truncating.
props::DcpBackend truncating_backend(oracle::DType out, int64_t accumulators, int64_t chunk) {
  return props::DcpBackend([=](const gpu::DcpInputs& in,
                               const gpu::DcpConfig& cfg) -> gpu::Result<gpu::GroupRun> {
    if (cfg.layout.ranks != 1) return DCP_GPU_ERROR("one rank only");
    const int64_t T = in.dims.tokens, H = in.dims.q_heads, D = in.dims.head_dim, Dv = in.dims.v_dim,
                  S = in.seq, block = (S + accumulators - 1) / accumulators;
    const auto* k = static_cast<const float*>(in.k.data);
    const auto* v = static_cast<const float*>(in.v.data);
    gpu::GroupRun run;
    run.o.assign(static_cast<size_t>(T * H * Dv), 0.0f);
    run.lse.assign(static_cast<size_t>(T * H), 0.0f);
    std::vector<float> p(static_cast<size_t>(S));
    const auto truncate = [](double x) {
      float r = static_cast<float>(x);
      if (std::fabs(static_cast<double>(r)) > std::fabs(x)) r = std::nextafter(r, 0.0f);
      return r;
    };
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        float m = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          float dot = 0.0f;
          for (int64_t i = 0; i < D; ++i) dot += in.q[(t * H + h) * D + i] * k[(j * H + h) * D + i];
          p[static_cast<size_t>(j)] = dot * in.scale;
          m = std::fmax(m, p[static_cast<size_t>(j)]);
        }
        float l = 0.0f;
        for (float& x : p) l += (x = std::exp(x - m));
        for (int64_t c = 0; c < Dv; ++c) {
          double total = 0.0;
          for (int64_t b0 = 0; b0 < S; b0 += block) {
            float acc = 0.0f;
            for (int64_t j0 = b0; j0 < std::min(S, b0 + block); j0 += chunk) {
              double part = 0.0;
              for (int64_t j = j0; j < std::min({S, b0 + block, j0 + chunk}); ++j)
                part += static_cast<double>(p[static_cast<size_t>(j)]) * v[(j * H + h) * Dv + c];
              acc = truncate(static_cast<double>(acc) + part);
            }
            total += acc;
          }
          run.o[static_cast<size_t>((t * H + h) * Dv + c)] =
              static_cast<float>(oracle::round_to(out, total / l));
        }
        run.lse[static_cast<size_t>(t * H + h)] = m + std::log(l);
      }
    run.partial_o = {run.o};
    run.partial_lse = {run.lse};
    return run;
  });
}

// Every add truncating, and 8 runs of 16-key chunks (the weakest truncation the probe must see),
// through an fp32 and a bf16 output: never claimed round-to-nearest.
TEST(Probe, TruncatingSumsAreClaimedAnyThroughEitherOutputFormat) {
  for (const oracle::DType out : {oracle::DType::f32, oracle::DType::bf16})
    for (const auto& [accumulators, chunk] : {std::pair<int64_t, int64_t>{1, 1}, {8, 16}}) {
      ProbeTarget t;
      t.backend = truncating_backend(out, accumulators, chunk);
      t.merge = false;
      oracle::Expected<ProbeReport> r = probe(t);
      ASSERT_TRUE(r) << r.status().message();
      EXPECT_EQ(r->claim.accum_rounding, "any") << probe_text(*r);
      const auto sums =
          std::find_if(r->findings.begin(), r->findings.end(),
                       [](const ProbeFinding& f) { return f.what == "sums' rounding"; });
      ASSERT_NE(sums, r->findings.end());
      EXPECT_NE(sums->evidence.find("truncating"), std::string::npos) << sums->evidence;
    }
}

}  // namespace
}  // namespace dcp::props
