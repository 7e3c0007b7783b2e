// How close the derived bounds sit to the errors correct kernels make, and how small a bug they
// see from the output alone: the fp32 implementation model (properties/fp32_model.hpp) on
// decode-sized cases, judged by `check_result` as a result file would be, with the merge bounded
// for any partition of the keys (sum_j P_j |v_j|) or from the layout's exact partials
// (docs/tolerances.md §5). Prints, per pipeline and bound, the median / 90th percentile / largest
// per-case err/bound of the output's O and LSE and of the partials' O, and the share of bugged
// runs FAILED from the output alone.
//
//   build/bin/bound_tightness --cases 60 --seed 1
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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
};

// A decode kernel tiles 128 keys; the 16-bit pipeline is FlashAttention-style (P cast to bf16)
// with bf16 partials merged by a bf16 reduce-scatter and a bf16 output.
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
  return {{"fp32 N=1", f32}, {"fp32 N=8", f32_dcp}, {"bf16 N=8 rs", bf16}};
}

// Case k: one decode token, 8 query heads on one KV head of dim 128, N(0, 1) inputs, 1K-4K keys.
dcp::oracle::Case decode_case(uint64_t seed, int k) {
  dcp::props::CaseSpec s;
  s.tokens = 1;
  s.q_heads = 8;
  s.kv_heads = 1;
  s.head_dim = 128;
  s.v_dim = 128;
  s.seq = int64_t{1024} << (k % 3);
  s.seed = seed * 100000 + static_cast<uint64_t>(k);
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
  std::vector<double> o, lse, partial_o;
  int caught_drop = 0, caught_mean = 0, bugged = 0;
};

// One result judged: the output's O and LSE ratios and the partials' largest O ratio.
void judge(const dcp::oracle::Case& c, dcp::oracle::DcpResult r, bool exact, Tally& t) {
  if (!exact) r.output_claim.layout.reset();
  auto chk = dcp::oracle::check_result(c, r);
  if (!chk) {
    std::fprintf(stderr, "bound_tightness: %s\n", chk.status().message().c_str());
    std::exit(2);
  }
  t.o.push_back(chk->parts[0].cmp.o_worst.ratio);
  t.lse.push_back(chk->parts[0].cmp.lse_worst.ratio);
  double worst = 0.0;
  for (size_t p = 1; p < chk->parts.size(); ++p)
    worst = std::max(worst, chk->parts[p].cmp.o_worst.ratio);
  if (r.dcp_size > 1) t.partial_o.push_back(worst);
}

// Whether a bugged model's output (no partials) is FAILED.
bool caught(const dcp::oracle::Case& c, ModelConfig m, Bug bug, bool exact) {
  m.bug = bug;
  dcp::oracle::DcpResult r = dcp::props::model_result(c, m, false);
  if (!exact) r.output_claim.layout.reset();
  auto chk = dcp::oracle::check_result(c, r);
  return chk && !chk->pass();
}

int parse_int(const char* flag, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1 || v > 100000) {
    std::fprintf(stderr, "bound_tightness: %s %s; expected an integer in [1, 100000]\n", flag,
                 text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  int cases = 60, seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--cases" || a == "--seed") && i + 1 < argc) {
      (a == "--cases" ? cases : seed) = parse_int(argv[i], argv[i + 1]);
      ++i;
    } else {
      std::fprintf(stderr, "bound_tightness: unknown argument '%s'; expected --cases N, --seed N\n",
                   argv[i]);
      return 2;
    }
  }
  std::printf("# bound_tightness: %d cases (T 1, Hq 8, Hkv 1, D 128, S 1K-4K, N(0,1)), seed %d\n",
              cases, seed);
  std::printf("# per-case max err/bound: median / p90 / max; bugs FAILED from the output alone\n");
  std::printf("%-12s %-9s %-26s %-26s %-20s %-10s %-10s\n", "pipeline", "merge", "O", "LSE",
              "partial O", "drop_token", "unweighted");
  for (const Pipeline& p : pipelines()) {
    for (const bool exact : {false, true}) {
      if (exact && p.m.shards == 1) continue;
      Tally t;
      for (int k = 0; k < cases; ++k) {
        const dcp::oracle::Case c = decode_case(static_cast<uint64_t>(seed), k);
        ModelConfig m = p.m;
        m.seed = static_cast<uint64_t>(k);
        judge(c, dcp::props::model_result(c, m, true), exact, t);
        if (m.shards > 1) {
          ++t.bugged;
          t.caught_drop += caught(c, m, Bug::drop_token, exact) ? 1 : 0;
          t.caught_mean += caught(c, m, Bug::merge_unweighted_mean, exact) ? 1 : 0;
        }
      }
      auto cell = [](const std::vector<double>& x) {
        const Quantiles q = quantiles(x);
        char s[64];
        std::snprintf(s, sizeof s, "%.3g / %.3g / %.3g", q.median, q.p90, q.max);
        return std::string(s);
      };
      auto share = [&](int n) {
        char s[32];
        std::snprintf(s, sizeof s, "%d/%d", n, t.bugged);
        return std::string(t.bugged ? s : "-");
      };
      std::printf("%-12s %-9s %-26s %-26s %-20s %-10s %-10s\n", p.name,
                  p.m.shards == 1 ? "-"
                  : exact         ? "exact"
                                  : "any",
                  cell(t.o).c_str(), cell(t.lse).c_str(),
                  t.partial_o.empty() ? "-" : cell(t.partial_o).c_str(),
                  share(t.caught_drop).c_str(), share(t.caught_mean).c_str());
    }
  }
  return 0;
}
