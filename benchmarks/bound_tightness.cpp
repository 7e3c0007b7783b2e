// How close the derived bounds sit to the errors correct kernels make, and how small a bug they
// see from the output alone: the fp32 implementation model (properties/fp32_model.hpp) on
// decode-sized cases, judged by `check_result` as a result file would be, with the merge bounded
// for any partition of the keys (sum_j P_j |v_j|) or from the layout's exact partials
// (docs/tolerances.md §5). Prints, per pipeline and bound, the median / 90th percentile / largest
// per-case err/bound of the output's O and LSE (both tiers, §10) and of the partials' O; then,
// for every bug of the catalogue planted in the model, on how many cases the output alone is
// FAILED, and SUSPECT.
//
//   build/bin/bound_tightness --cases 60 --seed 1
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mutants/catalogue.hpp"
#include "oracle/check.hpp"
#include "properties/case_gen.hpp"
#include "properties/result_gen.hpp"

namespace {

using dcp::oracle::DType;
using dcp::props::Bug;
using dcp::props::ModelConfig;

struct Pipeline {
  const char* name;
  ModelConfig m;
  DType kv = DType::f32;  // the cache: f32 values, or fp8 with per-head scales
};

// A decode kernel tiles 128 keys; the 16-bit pipeline is FlashAttention-style (P cast to bf16)
// with bf16 partials merged by a bf16 reduce-scatter (claimed merge_form scaled) and a bf16
// output. The fp8 pipelines read an
// E4M3 cache with per-head scales, dequantized for a bf16 MMA (P cast to bf16) or multiplied in
// fp8 (P cast to E4M3), with the same bf16 merge.
std::vector<Pipeline> pipelines() {
  ModelConfig f32;
  f32.tile = 128;
  ModelConfig f32_dcp = f32;
  f32_dcp.shards = 8;
  ModelConfig bf16 = f32_dcp;
  bf16.p_cast = DType::bf16;
  bf16.out = DType::bf16;
  bf16.partial = DType::bf16;
  bf16.merge_accum = DType::bf16;
  bf16.claim_scaled = true;  // the model's ag_rs is the scaled form, and says so
  ModelConfig fp8_mma = bf16;
  fp8_mma.p_cast = DType::f8e4m3;
  return {{"fp32 N=1", f32, DType::f32},
          {"fp32 N=8", f32_dcp, DType::f32},
          {"bf16 N=8 rs", bf16, DType::f32},
          {"e4m3 kv, P bf16", bf16, DType::f8e4m3},
          {"e4m3 kv, P e4m3", fp8_mma, DType::f8e4m3}};
}

// Case k: one decode token, 8 query heads on one KV head of dim 128, N(0, 1) inputs, 1K-4K keys,
// a sink on every other case; the cache in `kv` (fp8 with per-head scales).
dcp::oracle::Case decode_case(uint64_t seed, int k, DType kv) {
  dcp::props::CaseSpec s;
  s.tokens = 1;
  s.q_heads = 8;
  s.kv_heads = 1;
  s.head_dim = 128;
  s.v_dim = 128;
  s.seq = int64_t{1024} << (k % 3);
  s.sink = k % 2 == 1;
  s.seed = seed * 100000 + static_cast<uint64_t>(k);
  s.kv_dtype = kv;
  if (dcp::oracle::is_quantized(kv)) s.kv_scale = dcp::props::KvScale::per_head;
  return dcp::props::make_case(s);
}

struct Quantiles {
  double median, p90, max;
};

Quantiles quantiles(std::vector<double> x) {
  if (x.empty()) return {0, 0, 0};
  std::sort(x.begin(), x.end());
  auto at = [&](double q) { return x[static_cast<size_t>(q * static_cast<double>(x.size() - 1))]; };
  return {at(0.5), at(0.9), x.back()};
}

struct Tally {
  std::vector<double> o, o_stat, lse, lse_stat, partial_o;  // per-case largest err/bound
};

dcp::oracle::ResultCheck checked(const dcp::oracle::Case& c, dcp::oracle::DcpResult r, bool exact) {
  if (!exact) r.output_claim.layout.reset();
  auto chk = dcp::oracle::check_result(c, r);
  if (!chk) {
    std::fprintf(stderr, "bound_tightness: %s\n", chk.status().message().c_str());
    std::exit(2);
  }
  return *chk;
}

// A correct result judged: the output's O and LSE ratios at both tiers and the partials' largest
// O ratio.
void judge(const dcp::oracle::Case& c, const dcp::oracle::DcpResult& r, bool exact, Tally& t) {
  const dcp::oracle::ResultCheck chk = checked(c, r, exact);
  const dcp::oracle::Comparison& out = chk.parts[0].cmp;
  t.o.push_back(out.o_worst.ratio);
  t.o_stat.push_back(out.o_worst_stat.ratio);
  t.lse.push_back(out.lse_worst.ratio);
  t.lse_stat.push_back(out.lse_worst_stat.ratio);
  double worst = 0.0;
  for (size_t p = 1; p < chk.parts.size(); ++p)
    worst = std::max(worst, chk.parts[p].cmp.o_worst.ratio);
  if (r.dcp_size > 1) t.partial_o.push_back(worst);
}

std::string cell(const std::vector<double>& x) {
  if (x.empty()) return "-";
  const Quantiles q = quantiles(x);
  char s[64];
  std::snprintf(s, sizeof s, "%.2g/%.2g/%.2g", q.median, q.p90, q.max);
  return s;
}

// The correct pipelines' err/bound at both tiers, the merge bounded for any partition and from
// the exact partials.
void tightness_table(int cases, int seed) {
  const char* row = "%-16s %-6s %-22s %-22s %-22s %-22s %s\n";
  std::printf(row, "pipeline", "merge", "O err/bound", "O err/stat", "LSE err/bound",
              "LSE err/stat", "partial O err/bound");
  for (const Pipeline& p : pipelines()) {
    for (const bool exact : {false, true}) {
      if (exact && p.m.shards == 1) continue;
      Tally t;
      for (int k = 0; k < cases; ++k) {
        const dcp::oracle::Case c = decode_case(static_cast<uint64_t>(seed), k, p.kv);
        ModelConfig m = p.m;
        m.seed = static_cast<uint64_t>(k);
        judge(c, dcp::props::model_result(c, m, true), exact, t);
      }
      std::printf(row, p.name,
                  p.m.shards == 1 ? "-"
                  : exact         ? "exact"
                                  : "any",
                  cell(t.o).c_str(), cell(t.o_stat).c_str(), cell(t.lse).c_str(),
                  cell(t.lse_stat).c_str(), cell(t.partial_o).c_str());
    }
  }
}

// Every bug of the catalogue planted in the model, in the merged pipelines: on how many cases
// the output alone (the layout's exact partials) is FAILED, and FAILED or SUSPECT.
void kill_table(int cases, int seed) {
  std::printf("%-24s", "mutant (output only)");
  for (const Pipeline& p : pipelines())
    if (p.m.shards > 1) std::printf(" %-22s", (std::string(p.name) + " FAILED+SUSPECT").c_str());
  std::printf("\n");
  for (const dcp::mutants::MutantInfo& info : dcp::mutants::kMutantCatalogue) {
    if (!(info.where & dcp::mutants::kInModel)) continue;
    std::printf("%-24s", std::string(info.name).c_str());
    for (const Pipeline& p : pipelines()) {
      if (p.m.shards == 1) continue;
      int failed = 0, flagged = 0;
      for (int k = 0; k < cases; ++k) {
        const dcp::oracle::Case c = decode_case(static_cast<uint64_t>(seed), k, p.kv);
        ModelConfig m = p.m;
        m.seed = static_cast<uint64_t>(k);
        m.bug = info.id;
        const dcp::oracle::ResultCheck chk =
            checked(c, dcp::props::model_result(c, m, false), true);
        failed += chk.pass() ? 0 : 1;
        flagged += chk.pass_statistical() ? 0 : 1;
      }
      char s[48];
      std::snprintf(s, sizeof s, "%d+%d/%d", failed, flagged - failed, cases);
      std::printf(" %-22s", s);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bound_tightness: the derived bounds' tightness and what they catch"};
  int cases = 60, seed = 1;
  app.add_option("--cases", cases, "Cases per pipeline")->check(CLI::Range(1, 100000));
  app.add_option("--seed", seed, "Seed of the cases")->check(CLI::Range(1, 100000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "bound_tightness: %s\n", e.what());
    return 2;
  }
  std::printf("# bound_tightness: %d cases (T 1, Hq 8, Hkv 1, D 128, S 1K-4K, N(0,1)), seed %d\n",
              cases, seed);
  std::printf(
      "# correct results: per-case largest err/bound (sound) and err/stat "
      "(statistical), median/p90/max\n");
  tightness_table(cases, seed);
  std::printf("# planted bugs, judged from the output alone: FAILED + SUSPECT (only) / cases\n");
  kill_table(cases, seed);
  return 0;
}
