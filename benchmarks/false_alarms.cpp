// How often the statistical tier (docs/tolerances.md §10) calls a correct result SUSPECT: random
// cases of every value style, judged by `check_result` from the output and every partial, for
// correct variants of the fp32 implementation model (properties/fp32_model.hpp) and for the
// production host path (gpu/, host backend). Counts the rows judged (a row: one token and query
// head of one part, the output or a rank's partial), the parts over their statistical bound
// (SUSPECT) and over their sound bound (FAILED), against what the tier's stated false-alarm
// probability allows: at most kStatFalseAlarm per part.
//
//   build/bin/false_alarms --cases 20000 --seed 1
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>

#include "oracle/check.hpp"
#include "oracle/tolerance.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/result_gen.hpp"

namespace {

using dcp::oracle::DType;
using dcp::props::CaseSpec;
using dcp::props::ModelConfig;
using dcp::props::ValueStyle;
using Rng = std::mt19937_64;

// The cases: T 1-3, 1-16 query heads on 1-4 KV heads (GQA), Dk and Dv 8-128, S 1-3000 (log-
// uniform), every value style, sinks, softcap, windows, base 2; f32 or bf16 inputs.
CaseSpec draw_spec(Rng& rng, uint64_t seed) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  CaseSpec s;
  s.tokens = pick(1, 3);
  s.kv_heads = int64_t{1} << pick(0, 2);
  s.q_heads = s.kv_heads << pick(0, 2);
  s.head_dim = int64_t{8} << pick(0, 4);
  s.v_dim = s.head_dim;
  s.seq = static_cast<int64_t>(std::exp(std::uniform_real_distribution<double>(0.0, 8.0)(rng)));
  s.seq = std::max<int64_t>(1, std::min<int64_t>(3000, s.seq));
  const ValueStyle styles[] = {ValueStyle::normal, ValueStyle::normal, ValueStyle::peaked,
                               ValueStyle::wide,   ValueStyle::ties,   ValueStyle::tiny,
                               ValueStyle::extreme};
  s.values = styles[pick(0, 6)];
  s.sink = coin(0.5);
  s.softcap = coin(0.25) ? 30.0 : 0.0;
  s.window = coin(0.2) ? pick(1, s.seq) : 0;
  s.lse_base = coin(0.5) ? dcp::oracle::LseBase::two : dcp::oracle::LseBase::e;
  s.q_dtype = s.kv_dtype = coin(0.5) ? DType::bf16 : DType::f32;
  s.seed = seed;
  return s;
}

// A correct variant of the model (gen_model_config's draws, with a plain generator).
ModelConfig draw_model(Rng& rng, const CaseSpec& spec) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  auto one_of = [&](std::initializer_list<DType> v) {
    return *(v.begin() + pick(0, v.size() - 1));
  };
  ModelConfig m;
  m.shards = pick(1, 8);
  m.interleave = pick(1, 4);
  m.tile = coin(0.5) ? pick(1, 64) : int64_t{128};
  m.base2 = coin(0.5);
  m.fma = coin(0.5);
  m.pairwise_dot = coin(0.5);
  m.perturb = coin(0.75);
  const double approx[] = {0.0, 0.0, 0.0, 1e-6, 1e-5, 1e-4};
  m.exp_rel_err = approx[pick(0, 5)];
  m.log_rel_err = approx[pick(0, 5)];
  m.approx_systematic = coin(0.5);
  if (coin(0.4)) m.p_cast = one_of({DType::bf16, DType::f16});
  m.tf32 = spec.values != ValueStyle::extreme && spec.values != ValueStyle::wide &&
           spec.values != ValueStyle::peaked && coin(0.25);
  m.out = one_of({DType::f32, DType::f32, DType::bf16, DType::f16});
  m.merge = coin(0.2)   ? dcp::props::Merge::pairwise
            : coin(0.5) ? dcp::props::Merge::ag_rs
                        : dcp::props::Merge::a2a;
  m.reverse_merge = coin(0.5);
  m.truncate = coin(0.25);  // a tensor core's truncating sums, claimed accum_rounding any
  if (coin(0.2)) m.rescale_exp_rel_err = 0.0;
  if (m.shards > 1) {
    m.partial = one_of({DType::f32, DType::f32, DType::bf16, DType::f16});
    m.merge_accum = one_of({DType::f32, DType::f32, DType::bf16});
    m.merge_lse_accum = one_of({DType::f32, DType::f32, DType::bf16});
    if (coin(0.3)) m.merge_exp_rel_err = 0.0;
  }
  m.seed = rng();
  // Dots in lanes along the head dimension, or left to right, claimed so (dot_lanes).
  if (coin(0.3)) m.dot_lanes = int64_t{1} << pick(0, 4);
  // Half of the ag_rs merges claimed in their form (merge_form scaled).
  m.claim_scaled = m.merge == dcp::props::Merge::ag_rs && coin(0.5);
  return m;
}

// A host-path configuration of one DCP group (the property suite's draws, with a plain
// generator).
dcp::gpu::DcpConfig draw_host(Rng& rng, const CaseSpec& spec) {
  using dcp::gpu::StorageFormat;
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  auto format = [&] {
    return coin(0.5) ? StorageFormat::f32 : coin(0.5) ? StorageFormat::bf16 : StorageFormat::f16;
  };
  dcp::gpu::DcpConfig cfg;
  // One DCP group holds every query head: N divides Hq (powers of two here), N <= 8.
  cfg.layout.ranks = std::max<int64_t>(1, std::min<int64_t>(8, spec.q_heads >> pick(0, 2)));
  cfg.layout.interleave = pick(1, 4);
  cfg.tp_size = cfg.layout.ranks;
  cfg.strategy = coin(0.5) ? dcp::gpu::CommStrategy::a2a : dcp::gpu::CommStrategy::ag_rs;
  cfg.base =
      spec.lse_base == dcp::oracle::LseBase::two ? dcp::gpu::LseBase::two : dcp::gpu::LseBase::e;
  cfg.tile = pick(1, 64);
  cfg.splits = pick(1, 3);
  cfg.out_dtype = format();
  if (coin(0.5)) {
    cfg.math.exp = coin(0.5) ? dcp::gpu::ExpImpl::libm : dcp::gpu::ExpImpl::poly3;
    // poly3's 2^0 is not 1: the rescale count is bounded as the property suite bounds it.
    if (cfg.math.exp == dcp::gpu::ExpImpl::poly3)
      cfg.tile = std::max<int64_t>(cfg.tile, (spec.seq + 127) / 128);
    cfg.math.p_cast = format();
    cfg.math.tf32 = spec.values == ValueStyle::normal && coin(0.25);
    cfg.math.partial = format();
    if (cfg.strategy == dcp::gpu::CommStrategy::ag_rs) cfg.math.merge = format();
  }
  return cfg;
}

struct Tally {
  int64_t cases = 0, rows = 0, parts = 0, suspect = 0, failed = 0, refused = 0;
  std::string first;     // the first alarm's case
  double closest = 0.0;  // the largest err/stat of any part: how near a correct result came
  std::string closest_case;
};

void judge(const dcp::oracle::Case& c, const dcp::oracle::DcpResult& r, const std::string& what,
           Tally& t) {
  auto chk = dcp::oracle::check_result(c, r);
  if (!chk) {  // a claim too coarse for a first-order bound (kappa > 0.1): refused, not judged
    ++t.refused;
    return;
  }
  ++t.cases;
  for (const auto& part : chk->parts) {
    ++t.parts;
    t.rows += c.tokens() * c.q_heads();
    const bool failed = !part.cmp.pass(), suspect = !failed && !part.cmp.pass_statistical();
    t.failed += failed ? 1 : 0;
    t.suspect += suspect ? 1 : 0;
    if (part.cmp.max_stat_ratio() > t.closest) {
      t.closest = part.cmp.max_stat_ratio();
      t.closest_case = what;
    }
    if ((failed || suspect) && t.first.empty())
      t.first = what + ": " + part.cmp.summary() + " / " + part.cmp.statistical_summary();
  }
}

void print(const char* name, const Tally& t) {
  std::printf(
      "%-10s cases %7lld  parts %8lld  rows %9lld  SUSPECT %lld  FAILED %lld  refused %lld"
      "  (the tier allows %.2g SUSPECT parts)  largest err/stat %.3g\n",
      name, static_cast<long long>(t.cases), static_cast<long long>(t.parts),
      static_cast<long long>(t.rows), static_cast<long long>(t.suspect),
      static_cast<long long>(t.failed), static_cast<long long>(t.refused),
      static_cast<double>(t.parts) * dcp::oracle::kStatFalseAlarm, t.closest);
  if (!t.closest_case.empty()) std::printf("  largest err/stat at: %s\n", t.closest_case.c_str());
  if (!t.first.empty()) std::printf("  first alarm: %s\n", t.first.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"false_alarms: how often the statistical tier calls a correct result SUSPECT"};
  int cases = 2000, seed = 1;
  app.add_option("--cases", cases, "Cases per implementation")->check(CLI::Range(1, 10000000));
  app.add_option("--seed", seed, "Seed of the draws")->check(CLI::Range(1, 1000000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "false_alarms: %s\n", e.what());
    return 2;
  }
  Rng rng(static_cast<uint64_t>(seed));
  Tally model, host;
  for (int k = 0; k < cases; ++k) {
    const CaseSpec spec = draw_spec(rng, static_cast<uint64_t>(seed) * 10000000 + k);
    const auto c = std::optional<dcp::oracle::Case>(dcp::props::make_case(spec));
    const ModelConfig m = draw_model(rng, spec);
    judge(*c, dcp::props::model_result(*c, m, true),
          dcp::props::describe(spec) + " " + dcp::props::describe(m), model);
    const dcp::gpu::DcpConfig cfg = draw_host(rng, spec);
    auto r = dcp::props::host_result(*c, cfg, dcp::props::make_chunks(spec.seq, spec.seed), true);
    if (!r) {
      std::fprintf(stderr, "false_alarms: host path: %s\n", r.status().message().c_str());
      return 2;
    }
    judge(*c, *r, dcp::props::describe(spec) + " " + dcp::props::describe(cfg), host);
  }
  std::printf(
      "# false_alarms: %d cases, seed %d; a part is SUSPECT over its statistical bound, "
      "FAILED over its sound one\n",
      cases, seed);
  print("fp32 model", model);
  print("host path", host);
  return model.failed + host.failed > 0 ? 1 : 0;
}
