#include "tools/selfcheck.hpp"

#include <cstdio>
#include <iostream>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "harness/report.hpp"
#include "oracle/agreement.hpp"
#include "oracle/compare.hpp"
#include "properties/case_gen.hpp"
#include "properties/fp32_model.hpp"
#include "tools/command.hpp"
#include "tools/flags.hpp"

namespace dcp::tools {
namespace {

using oracle::dd;
using props::CaseSpec;

// Agreement the tiers and the shard merge must reach (docs/oracle.md derives both): the fast
// tier carries ~106 bits and loses at most a few to exp/log evaluation and summation.
constexpr double kTierBits = 100.0;
constexpr double kMergeBits = 90.0;
constexpr int64_t kShards = 4;

struct CheckRow {
  std::string name;
  CaseSpec spec;
};

std::vector<CheckRow> cases(uint64_t seed) {
  auto base = [&](uint64_t k) {
    return CaseSpec{.tokens = 2,
                    .q_heads = 4,
                    .kv_heads = 2,
                    .head_dim = 16,
                    .v_dim = 16,
                    .seq = 40,
                    .seed = seed * 1000 + k};
  };
  std::vector<CheckRow> rows;
  rows.push_back({"causal", base(1)});
  auto s = base(2);
  s.window = 9;
  rows.push_back({"window", s});
  s = base(3);
  s.sink = true;
  rows.push_back({"sink", s});
  s = base(4);
  s.softcap = 5.0;
  s.values = props::ValueStyle::wide;
  rows.push_back({"softcap", s});
  s = base(5);
  s.topk = 12;
  rows.push_back({"topk", s});
  s = base(6);
  s.kv_heads = 1;
  s.q_heads = 8;
  rows.push_back({"gqa 8:1", s});
  s = base(7);
  s.shared_latent = true;
  s.kv_heads = 1;
  s.head_dim = 24;
  s.v_dim = 16;
  rows.push_back({"latent", s});
  s = base(8);
  s.lse_base = oracle::LseBase::two;
  s.values = props::ValueStyle::peaked;
  rows.push_back({"base2 peaked", s});
  s = base(9);
  s.q_dtype = oracle::DType::bf16;
  s.kv_dtype = oracle::DType::bf16;
  s.explicit_pos = true;
  s.causal = true;
  rows.push_back({"bf16 q_pos", s});
  s = base(10);
  s.sink = true;
  s.window = 5;
  s.topk = 20;
  s.softcap = 8.0;
  rows.push_back({"all masks", s});
  return rows;
}

// What one case came to: the agreement of the tiers and of the shard merge, in bits, and the fp32
// model's err/bound (inf where no bound or comparison could be made).
struct RowVerdict {
  double tier_bits = 0.0, merge_bits = 0.0, ratio = INFINITY;
  bool ok = false;
};

// The three checks of one case, drawing its shard owners, merge seeds and model from rng.
RowVerdict check_row(const oracle::Case& c, std::mt19937_64& rng) {
  RowVerdict v;
  const auto fast = oracle::attend_rows<dd>(c, nullptr, true);
  const auto cert = oracle::attend_rows<oracle::certify_real>(c, nullptr, true);
  v.tier_bits = oracle::agreement_bits(c, fast, cert);

  // Shards: a random owner per position; the sink goes to shard 0 only.
  std::vector<int64_t> owner(c.seq());
  for (auto& o : owner) o = static_cast<int64_t>(rng() % kShards);
  std::vector<oracle::MergeState<dd>> merged(fast.size());
  std::vector<std::vector<oracle::MergeState<dd>>> shard_rows;
  for (int64_t r = 0; r < kShards; ++r) {
    shard_rows.push_back(oracle::attend_rows<dd>(
        c, [&](int64_t p) { return owner[p] == r; }, r == 0));
  }
  for (size_t x = 0; x < fast.size(); ++x) {
    std::vector<oracle::MergeState<dd>> parts;
    for (auto& sr : shard_rows) parts.push_back(sr[x]);
    merged[x] = oracle::reduce(parts, oracle::ReductionTree::random, rng(), c.v_dim);
  }
  v.merge_bits = oracle::agreement_bits(c, merged, fast);

  props::ModelConfig m;
  m.shards = kShards;
  m.interleave = 1 + static_cast<int64_t>(rng() % 3);
  m.merge = rng() % 2 ? props::Merge::a2a : props::Merge::ag_rs;
  m.seed = rng();
  const auto model = props::run_fp32_model(c, m);
  const auto ref = oracle::to_attention(c, fast);
  const auto bound = oracle::derive_bound(c, ref, props::claim_of(m));
  bool model_ok = false;
  if (bound) {
    const auto cmp = oracle::compare(model.o, model.lse, ref, *bound);
    if (cmp) {
      v.ratio = cmp->max_ratio();
      model_ok = cmp->pass();
    }
  }
  v.ok = v.tier_bits >= kTierBits && v.merge_bits >= kMergeBits && model_ok;
  return v;
}

}  // namespace

int run_selfcheck(const SelfcheckOptions& opt, std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line,
                "# dcp-verify selfcheck: oracle tiers, shard merge and derived "
                "bounds  (seed %llu)\n",
                static_cast<unsigned long long>(opt.seed));
  out << line;
  const Table t(2, {{"case", 13, Align::left, 0},
                    {"T", 4},
                    {"Hq", 4},
                    {"Hkv", 4},
                    {"Dk", 4},
                    {"S", 4},
                    {"tier-bits", 9, Align::right, 2},
                    {"merge-bits", 10},
                    {"fp32 e/b", 9},
                    {"verdict", 0, Align::left, 2}});
  t.print_header(out);
  int failures = 0;
  std::mt19937_64 rng(opt.seed);
  for (const CheckRow& row : cases(opt.seed)) {
    const oracle::Case c = props::make_case(row.spec);
    const RowVerdict v = check_row(c, rng);
    failures += v.ok ? 0 : 1;
    if (opt.quiet && v.ok) continue;
    t.print_row(out, {row.name, std::to_string(c.tokens()), std::to_string(c.q_heads()),
                      std::to_string(c.kv_heads()), std::to_string(c.head_dim()),
                      std::to_string(c.seq()), cell("%.1f", v.tier_bits),
                      cell("%.1f", v.merge_bits), cell("%.2e", v.ratio), v.ok ? "OK" : "FAILED"});
    if (!v.ok) out << "    reproduce: " << props::describe(row.spec) << "\n";
  }
  std::snprintf(line, sizeof line,
                "# required: tier-bits >= %.0f, merge-bits >= %.0f, fp32 err/bound <= 1\n",
                kTierBits, kMergeBits);
  out << line;
  out << "# selfcheck: " << (failures ? "FAILED" : "OK") << " (" << failures << " of "
      << cases(opt.seed).size() << " cases failed; reproduce with --seed " << opt.seed << ")\n";
  return failures ? kExitFail : kExitOk;
}

Command add_selfcheck_command(CLI::App& app) {
  auto o = std::make_shared<SelfcheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "selfcheck", "Check the oracle: fast vs certify tier, shard merge, fp32 model vs bound");
  cmd->add_option("--seed", o->seed, "Seed for the cases and shard layouts")->check(seed_value());
  add_switch(cmd, "--quiet", o->quiet, "Print failing rows and the summary only");
  return {cmd, [o](const harness::Limits&) { return run_selfcheck(*o, std::cout); }};
}

}  // namespace dcp::tools
