// The production DCP path on the host backend against the oracle: for random N, TP multiples,
// layouts, chunked KV writes, variants, dtypes, LSE bases, ag_rs/a2a, gather or replicate-q,
// reduction orders, tiles and split-KV, the assembled output and every rank's partial are within
// the bound the oracle derives. Pinned counterexamples (fixtures/dcp/pinned.json) run first.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "gpu/comm/comm_threads.hpp"
#include "gpu/host/host_device.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/pinned.hpp"
#include "properties/rc_gen.hpp"
#include "properties/suite.hpp"
#include "tests/support/collective_cases.hpp"

#ifndef DCP_FIXTURES_DIR
#error "DCP_FIXTURES_DIR must point at fixtures/"
#endif

namespace dcp::props {
namespace {

// Inside both tiers of the bound: a correct path is neither FAILED nor SUSPECT.
RC_GTEST_PROP(DcpHostPath, OutputAndEveryPartialWithinDerivedBound, ()) {
  set_property_bound(BoundTier::statistical);
  dcp_path_property(nullptr);
}

// The same with fp8 caches, their scales folded into the logit scale and the output.
RC_GTEST_PROP(DcpHostPath, Fp8CachesWithinDerivedBound, ()) {
  set_property_bound(BoundTier::statistical);
  dcp_path_property(nullptr, {}, CacheKind::fp8);
}

// A decode batch over one paged pool, sharing a prefix's pages: each request judged alone.
RC_GTEST_PROP(DcpHostPath, BatchWithSharedPrefixWithinDerivedBound, ()) {
  set_property_bound(BoundTier::statistical);
  dcp_batch_property(nullptr);
}

// suite_case_footprint enumerates the generators' extremes by hand (rc_gen.hpp's constants, beside
// the draws): every setup they draw, under the default ranges and under wider ones, must be within
// it, or `properties` could plan less memory than a case takes.
RC_GTEST_PROP(SuiteFootprint, CoversEveryDraw, ()) {
  static const std::vector<std::pair<DcpLimits, double>> plans = [] {
    DcpLimits wide{
        .max_dcp = 40, .max_groups = 5, .max_seq = 5000, .max_head_dim = 64, .max_v_dim = 48};
    std::vector<std::pair<DcpLimits, double>> out;
    for (const DcpLimits& lim : {DcpLimits{}, wide})
      out.emplace_back(lim, suite_case_footprint(lim).most.bytes);
    return out;
  }();
  const auto& [lim, most] = plans[*rc::gen::inRange<size_t>(0, plans.size())];
  const int which = *rc::gen::inRange(0, 3);
  const DcpSetup s = which == 2
                         ? draw_dcp_batch_setup(lim)
                         : *gen_dcp_setup(lim, which == 0 ? CacheKind::values : CacheKind::fp8);
  const Footprint f = dcp_check_footprint(s);
  RC_ASSERT(f.bytes <= most);
}

TEST(DcpHostPath, PinnedCounterexamples) {
  const auto replay = replay_pinned(std::string(DCP_FIXTURES_DIR) + "/dcp/pinned.json", nullptr);
  ASSERT_TRUE(replay.ok()) << replay.status().message();
  EXPECT_GT(replay->count, 0);
  for (const std::string& f : replay->failures) ADD_FAILURE() << f;
}

// One dominant token at each position in turn: losing or doubling any token, on any rank, moves
// the output by O(1). Exercises every (rank, row) slot of a small layout with interleave.
TEST(DcpHostPath, DominantTokenAtEveryPosition) {
  for (int64_t pos = 0; pos < 23; ++pos) {
    oracle::Case c = make_case(CaseSpec{.tokens = 2,
                                        .q_heads = 6,
                                        .kv_heads = 3,
                                        .head_dim = 8,
                                        .v_dim = 4,
                                        .seq = 23,
                                        .seed = static_cast<uint64_t>(pos)});
    c.causal = false;
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t h = 0; h < 6; ++h)
        for (int64_t d = 0; d < 8; ++d) c.q.at({t, h, d}) = 4.0 * c.k.at({pos, h / 2, d});
    gpu::DcpConfig cfg;
    cfg.tp_size = 6;
    cfg.layout = {3, 2};
    cfg.splits = 2;
    cfg.tile = 3;
    const DcpCheck chk = check_dcp(c, cfg, make_chunks(23, static_cast<uint64_t>(pos)));
    EXPECT_TRUE(chk.pass) << "dominant token at " << pos << "\n" << chk.report;
  }
}

// A watch on a check sees the oracle's whole work as one count (the output's reference and
// bound, then every shard's: four passes over the (row, key) pairs), forward only, ending at its
// total; stopped inside, the check has no verdict.
TEST(DcpHostPath, AWatchSeesTheWholeJudgementAndStopsIt) {
  CaseSpec spec{.q_heads = 8, .kv_heads = 2, .head_dim = 16, .v_dim = 16, .seq = 3000, .seed = 7};
  const oracle::Case c = make_case(spec);
  gpu::DcpConfig cfg;
  cfg.tp_size = 4;
  cfg.layout = {4, 1};
  int64_t last = 0, total = 0;
  oracle::Watch count;
  count.progress = [&](int64_t done, int64_t all) {
    EXPECT_GE(done, last);
    last = done;
    total = all;
  };
  const DcpCheck chk = check_dcp(c, cfg, {spec.seq}, nullptr, true, count);
  EXPECT_TRUE(chk.pass) << chk.report;
  EXPECT_FALSE(chk.interrupted);
  int64_t pairs = 0;
  for (int64_t t = 0; t < c.tokens(); ++t)
    pairs += static_cast<int64_t>(oracle::visible_keys(c, t).size()) * c.q_heads();
  EXPECT_EQ(total, 4 * pairs);
  EXPECT_EQ(last, total);

  // The stop is polled by the production step first (between its writes and kernels, and
  // between the attention's rows on every rank), then by the oracle.
  int step_polls = 0;
  bool judging = false;
  oracle::Watch counted;
  counted.progress = [&](int64_t, int64_t) { judging = true; };
  counted.stop = [&] {
    step_polls += judging ? 0 : 1;
    return false;
  };
  EXPECT_TRUE(check_dcp(c, cfg, {spec.seq}, nullptr, true, counted).pass);
  EXPECT_GE(step_polls, 4 * 3);  // every rank: its write, before its attention and its combine
  // After 1 poll: inside the production step; after step_polls + 1: inside the output's
  // reference; after step_polls + 20: past its 6 key blocks (3 per KV head, of at least 1024
  // keys) and its bound's 8 rows, inside a shard's judgement.
  for (const int after : {1, step_polls + 1, step_polls + 20}) {
    int polls = 0;
    oracle::Watch stop;
    stop.stop = [&] { return ++polls > after; };
    const DcpCheck cut = check_dcp(c, cfg, {spec.seq}, nullptr, true, stop);
    EXPECT_TRUE(cut.interrupted) << "stopped after " << after << " polls";
    EXPECT_FALSE(cut.pass);
    EXPECT_FALSE(cut.oracle_error);
    EXPECT_EQ(cut.report.find("the step stopped") != std::string::npos, after == 1) << cut.report;
  }
}

// Empty shards: S < N leaves ranks with no token; with no sink their partials must be exactly
// (-inf, 0) and the merge must not produce NaN.
TEST(DcpHostPath, EmptyShardsGiveNegInfAndZero) {
  CaseSpec spec{.q_heads = 4, .kv_heads = 1, .seq = 2, .causal = false};
  const oracle::Case c = make_case(spec);
  for (const auto strategy : {gpu::CommStrategy::ag_rs, gpu::CommStrategy::a2a}) {
    gpu::DcpConfig cfg;
    cfg.tp_size = 4;
    cfg.layout = {4, 1};
    cfg.strategy = strategy;
    const gpu::DcpInputs in = to_dcp_inputs(c, {2});
    gpu::Result<gpu::GroupRun> run = gpu::run_dcp_threads(in, cfg);
    ASSERT_TRUE(run.ok()) << run.status().message();
    for (int64_t r = 2; r < 4; ++r) {
      for (const float l : run->partial_lse[static_cast<size_t>(r)]) EXPECT_EQ(l, gpu::kEmptyLseF);
      for (const float o : run->partial_o[static_cast<size_t>(r)]) EXPECT_EQ(o, 0.0f);
    }
    const DcpCheck chk = judge_dcp(c, cfg, *run, {});
    EXPECT_TRUE(chk.pass) << chk.report;
  }
}

TEST(DcpHostPath, FullyMaskedRowsStayNegInfWithoutNaN) {
  CaseSpec spec{.tokens = 1, .q_heads = 2, .seq = 10, .window = 1};
  oracle::Case c = make_case(spec);
  c.q_pos = {12};  // window of 1 at position 12: no key in [0, 10) is visible
  for (const auto strategy : {gpu::CommStrategy::ag_rs, gpu::CommStrategy::a2a}) {
    gpu::DcpConfig cfg;
    cfg.tp_size = 2;
    cfg.layout = {2, 3};
    cfg.strategy = strategy;
    gpu::Result<gpu::GroupRun> run = gpu::run_dcp_threads(to_dcp_inputs(c, {}), cfg);
    ASSERT_TRUE(run.ok()) << run.status().message();
    for (const float l : run->lse) EXPECT_EQ(l, gpu::kEmptyLseF);
    for (const float o : run->o) EXPECT_EQ(o, 0.0f);
  }
}

TEST(DcpHostPath, BadConfigurationsAreOneLineErrors) {
  CaseSpec spec;
  spec.q_heads = 6;
  spec.kv_heads = 2;
  const oracle::Case c = make_case(spec);
  struct Bad {
    gpu::DcpConfig cfg;
    std::string needle;
  };
  std::vector<Bad> bad;
  gpu::DcpConfig b;
  b.tp_size = 6;
  b.layout = {4, 1};
  bad.push_back({b, "not a multiple of DcpLayout.ranks"});
  b.layout = {0, 1};
  bad.push_back({b, "DcpLayout.ranks: got 0"});
  b.layout = {2, 0};
  bad.push_back({b, "DcpLayout.interleave: got 0"});
  b.layout = {2, 1};
  b.tp_size = 4;
  bad.push_back({b, "AttentionDims.q_heads 6 is not a multiple of DcpConfig.tp_size 4"});
  b.tp_size = 2;
  b.strategy = gpu::CommStrategy::a2a;
  b.math.merge = gpu::StorageFormat::bf16;
  bad.push_back({b, "DcpConfig.math.merge: got bf16; a2a merges in fp32"});
  for (const Bad& x : bad) {
    gpu::Result<gpu::GroupRun> run = gpu::run_dcp_threads(to_dcp_inputs(c, {}), x.cfg);
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.status().message().find(x.needle), std::string::npos) << run.status().message();
    EXPECT_EQ(run.status().message().find('\n'), std::string::npos);
  }
  gpu::DcpConfig ok;
  ok.tp_size = 2;
  ok.layout = {2, 1};
  gpu::DcpInputs in = to_dcp_inputs(c, {});
  in.physical_rows = 2;  // the context needs 8 rows per rank
  gpu::Result<gpu::GroupRun> run = gpu::run_dcp_threads(in, ok);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("logical capacity 4"), std::string::npos)
      << run.status().message();
  in = to_dcp_inputs(c, {});
  in.k.numel -= 1;  // one element short
  run = gpu::run_dcp_threads(in, ok);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("tensor 'k'"), std::string::npos);
}

// A batch the path cannot run, or inputs that contradict themselves, is a one-line error naming
// the tensor or field; a batch setup survives its pinned JSON form.
TEST(DcpHostPath, BadBatchesAreOneLineErrors) {
  CaseSpec spec{.q_heads = 2, .kv_heads = 1, .seq = 40};
  const std::vector<oracle::Case> cases = make_batch_cases(spec, {40, 30}, {1, 2}, 20);
  gpu::DcpConfig cfg;
  cfg.tp_size = 2;
  cfg.layout = {2, 1};
  cfg.page_size = 4;
  const gpu::DcpInputs good = *to_dcp_batch_inputs(cases, {20});
  ASSERT_TRUE(gpu::run_dcp_threads(good, cfg).ok());
  const auto refused = [&](const gpu::DcpInputs& in, const gpu::DcpConfig& c,
                           const std::string& needle) {
    gpu::Result<gpu::GroupRun> run = gpu::run_dcp_threads(in, c);
    ASSERT_FALSE(run.ok()) << needle;
    EXPECT_NE(run.status().message().find(needle), std::string::npos) << run.status().message();
    EXPECT_EQ(run.status().message().find('\n'), std::string::npos);
  };
  gpu::DcpConfig flat = cfg;
  flat.page_size = 0;
  refused(good, flat, "DcpConfig.page_size: a batch keeps its requests in a paged pool");
  gpu::DcpInputs in = good;
  in.shared_prefix = 31;
  refused(in, cfg, "DcpInputs.shared_prefix: got 31; expected [0, 30]");
  in = good;
  in.cu_seqlens_k = {0, 40, 69};
  refused(in, cfg, "tensor 'cu_seqlens_k': ends at 69; expected the 70 keys of k");
  in = good;
  in.cu_seqlens_q = {0, 3, 3};
  refused(in, cfg, "tensor 'cu_seqlens_q': element [2] = 3; expected more than element [1]");
  in = good;
  in.retired = 2;
  refused(in, cfg, "DcpInputs.retired: got 2; expected [0, 2), a live request at least");
  in.retired = 1;  // request 0 retired, yet holding a query token
  refused(in, cfg, "tensor 'cu_seqlens_q': element [1] = 1; expected element [0]'s 0");
  // Request 1's prefix must be request 0's: the one copy the cache keeps says so.
  std::vector<oracle::Case> other = cases;
  other[1].k.data[5 * 8] += 1.0;  // position 5 (Hkv 1, Dk 8)
  refused(*to_dcp_batch_inputs(other, {20}), cfg,
          "tensor 'k': request 1 position 5 differs from request 0's inside the shared prefix");
  // Scales and sinks are the batch's: requests that disagree are refused before anything runs.
  other = cases;
  other[1].sink = {1.0, 2.0};
  const oracle::Expected<gpu::DcpInputs> mixed = to_dcp_batch_inputs(other, {20});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("request 1's sink differs"), std::string::npos);

  DcpSetup s;
  s.spec = spec;
  s.cfg = cfg;
  s.batch = {40, 30};
  s.shared_prefix = 20;
  s.chunks = {40};
  const oracle::Expected<DcpSetup> back = setup_from_json(to_json(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->batch, s.batch);
  EXPECT_EQ(back->shared_prefix, 20);
  EXPECT_TRUE(check_dcp_setup(*back).pass);
  s.retired = 1;
  const oracle::Expected<DcpSetup> retired = setup_from_json(to_json(s));
  ASSERT_TRUE(retired.ok()) << retired.status().message();
  EXPECT_EQ(retired->retired, 1);
  EXPECT_TRUE(check_dcp_setup(*retired).pass);
  s.retired = 2;
  EXPECT_NE(validate_setup(s, kJsonNames).message().find("retired 2: expected 0 .. 1"),
            std::string::npos);
  s.retired = 0;
  s.cfg.page_size = 0;
  const oracle::Status st = validate_setup(s, kJsonNames);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("batch: a batch in one step keeps its requests in a paged pool"),
            std::string::npos)
      << st.message();
}

// A retired request's pages are reused by the live ones with their stale rows: the live
// requests' outputs stay within their oracles' bounds, the rows nobody rewrote still hold the
// retired request's values, and only their `written` flags are cleared.
// A switch drawn late (ALiBi's) is written only when on, read back, refused when mistyped, and a
// setup that uses it passes on the host path (N = 4, I = 3: positions far from the rows).
TEST(DcpHostPath, AlibiRoundTripsThroughSetupFilesAndPasses) {
  DcpSetup s;
  s.spec = CaseSpec{.tokens = 2,
                    .q_heads = 8,
                    .kv_heads = 2,
                    .head_dim = 16,
                    .v_dim = 16,
                    .seq = 150,
                    .causal = false,
                    .explicit_pos = true,
                    .softcap = 20.0,
                    .alibi = true,
                    .seed = 5};
  s.cfg.tp_size = 4;
  s.cfg.layout = {4, 3};
  s.cfg.base = gpu::LseBase::two;
  s.chunks = {100, 50};
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j.at("spec").at("alibi"), true);
  const oracle::Expected<DcpSetup> back = setup_from_json(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->spec.alibi);
  const DcpCheck checked = check_dcp_setup(*back);
  EXPECT_TRUE(checked.pass) << checked.report;
  s.spec.alibi = false;
  EXPECT_FALSE(to_json(s).at("spec").contains("alibi"));  // as entries pinned before it
  nlohmann::json bad = j;
  bad["spec"]["alibi"] = "yes";
  const oracle::Expected<DcpSetup> refused = setup_from_json(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("spec.alibi"), std::string::npos)
      << refused.status().message();
}

// Scales by page (--kv-scale page|page_head): the case draws one scale for each (rank, page) of the
// setup's layout; the paged caches keep one a pool page (and KV head), stored by the KV write; the
// step gives the bits it gives with the same scales kept by token, and passes; a setup file names
// the grain and takes its pages from the configuration. Scales that differ within a rank's page,
// and scales by page without a paged cache, are one-line errors.
TEST(DcpHostPath, ScalesByPageGiveTheBitsOfTheSameScalesByToken) {
  for (const KvScale per : {KvScale::per_page, KvScale::per_page_head}) {
    DcpSetup s;
    s.spec = CaseSpec{.tokens = 2,
                      .q_heads = 4,
                      .kv_heads = 2,
                      .head_dim = 16,
                      .v_dim = 8,
                      .seq = 300,
                      .kv_dtype = oracle::DType::f8e4m3,
                      .kv_scale = per,
                      .explicit_pos = true,
                      .seed = 3};
    s.cfg.tp_size = 4;
    s.cfg.layout = {4, 2};
    s.cfg.page_size = 6;
    s.cfg.page_seed = 9;
    s.chunks = {120, 1, 179};
    follow_pages(s);
    ASSERT_TRUE(s.cfg.page_scales);
    EXPECT_EQ(s.spec.scale_pages.ranks, 4);
    EXPECT_EQ(s.spec.scale_pages.interleave, 2);
    EXPECT_EQ(s.spec.scale_pages.page_size, 6);
    ASSERT_TRUE(validate_setup(s, kJsonNames).ok()) << validate_setup(s, kJsonNames).message();
    const oracle::Case c = make_case(s.spec);
    ASSERT_EQ(c.kv_scale_grain, oracle::ScaleGrain::token);
    const int64_t heads = per == KvScale::per_page ? 1 : 2;
    ASSERT_EQ(c.k_scale.size(), static_cast<size_t>(300 * heads));
    const gpu::DcpLayout lay = s.cfg.layout;
    for (int64_t p = 0; p < 300; ++p)  // equal exactly where the (rank, page) is
      for (int64_t q = 0; q < 300; ++q) {
        const bool same = lay.owner(p) == lay.owner(q) && lay.row(p) / 6 == lay.row(q) / 6;
        EXPECT_EQ(c.k_scale_of(p, 0) == c.k_scale_of(q, 0), same) << p << " " << q;
      }
    const gpu::DcpInputs in = to_dcp_inputs(c, s.chunks);
    const gpu::Result<gpu::KvCacheSpec> cache = gpu::rank_cache_spec(in, s.cfg, 1);
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    EXPECT_EQ(cache->scale_grain, gpu::ScaleGrain::page);
    EXPECT_EQ(gpu::scale_entries(*cache), cache->pool_pages * heads);
    gpu::DcpConfig by_token = s.cfg;
    by_token.page_scales = false;
    const gpu::Result<gpu::GroupRun> paged = gpu::run_dcp_threads(in, s.cfg),
                                     tokens = gpu::run_dcp_threads(in, by_token);
    ASSERT_TRUE(paged.ok()) << paged.status().message();
    ASSERT_TRUE(tokens.ok()) << tokens.status().message();
    EXPECT_EQ(paged->o, tokens->o);
    EXPECT_EQ(paged->lse, tokens->lse);
    EXPECT_EQ(paged->partial_o, tokens->partial_o);
    const DcpCheck checked = check_dcp_setup(s);
    EXPECT_TRUE(checked.pass) << checked.report;
    const nlohmann::json j = to_json(s);
    EXPECT_EQ(j.at("spec").at("kv_scale"), per == KvScale::per_page ? "per_page" : "per_page_head");
    const oracle::Expected<DcpSetup> back = setup_from_json(j);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_TRUE(back->cfg.page_scales);
    EXPECT_EQ(back->spec.scale_pages.page_size, 6);
    EXPECT_EQ(make_case(back->spec).k_scale, c.k_scale);
  }
  // Scales by token that differ within a page, kept one a page.
  DcpSetup t;
  t.spec = CaseSpec{.q_heads = 2,
                    .kv_heads = 1,
                    .seq = 40,
                    .kv_dtype = oracle::DType::f8e4m3,
                    .kv_scale = KvScale::per_token,
                    .seed = 1};
  t.cfg.tp_size = 2;
  t.cfg.layout = {2, 1};
  t.cfg.page_size = 4;
  gpu::DcpConfig paged = t.cfg;
  paged.page_scales = true;
  const gpu::DcpInputs in = to_dcp_inputs(make_case(t.spec), {});
  const auto refusal = [&](const gpu::DcpConfig& cfg) {
    const gpu::Result<gpu::GroupRun> run = gpu::run_dcp_threads(in, cfg);
    return run.ok() ? std::string("ran") : run.status().message();
  };
  EXPECT_NE(refusal(paged).find("tensor 'k_scale': tokens 0 and 2 share rank 0's page 0"),
            std::string::npos)
      << refusal(paged);
  paged.page_size = 0;
  EXPECT_NE(refusal(paged).find("DcpConfig.page_scales: scales by page need a paged cache"),
            std::string::npos)
      << refusal(paged);
  t.spec.kv_scale = KvScale::per_page;
  t.cfg.page_size = 0;
  follow_pages(t);
  EXPECT_NE(
      validate_setup(t, kJsonNames)
          .message()
          .find("spec.kv_scale page: scales by page need a paged cache; set config.page_size"),
      std::string::npos)
      << validate_setup(t, kJsonNames).message();
}

TEST(DcpHostPath, ReusedPagesKeepStaleRowsAndTheLiveRequestsIgnoreThem) {
  CaseSpec spec{.q_heads = 2, .kv_heads = 1, .seq = 60};
  gpu::DcpConfig cfg;
  cfg.tp_size = 2;
  cfg.layout = {2, 1};
  cfg.page_size = 4;  // virtual pages of 8 slots
  const std::vector<oracle::Case> cases = make_batch_cases(spec, {60, 21, 13}, {1, 1, 1}, 10);
  const BatchSharing sharing{.shared_prefix = 10, .retired = 1};
  EXPECT_TRUE(check_dcp_batch(cases, sharing, cfg).pass);
  const gpu::DcpInputs in = *to_dcp_batch_inputs(cases, sharing);
  const gpu::PagePlan plan = *gpu::plan_pages(in, cfg);
  ASSERT_FALSE(plan.freed.empty());
  gpu::HostDevice dev(nullptr);
  gpu::Result<gpu::HostKvCache> cache = gpu::build_device_cache(dev, in, cfg, 0);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  // Pool rows of rank 0 the live requests write: their own pages' rows below their lengths.
  std::vector<char> live(static_cast<size_t>(cache->spec.pool_rows()), 0);
  for (int64_t b = 1; b < 3; ++b)
    for (int64_t r = 0; r < cfg.layout.count(0, in.request_seq(b)); ++r)
      live[static_cast<size_t>(cache->view(b).slot(r))] = 1;
  gpu::KvView pool = cache->view();  // addressed by pool row
  pool.block_table = nullptr;
  int64_t stale = 0;
  for (const int32_t page : plan.freed)
    for (int64_t x = 0; x < cfg.page_size; ++x) {
      const int64_t row = int64_t{page} * cfg.page_size + x;
      if (live[static_cast<size_t>(row)]) continue;
      EXPECT_EQ(cache->written[static_cast<size_t>(row)], 0) << "pool row " << row;
      stale += pool.key(row, 0, 0) != 0.0f ? 1 : 0;
    }
  EXPECT_GT(stale, 0);  // request 0's values, left where a live request does not write
}

// Every term of the kernels' arithmetic is stated: the path run with one KernelMath choice and
// judged with a claim that leaves it out (the default in its place) is FAILED or SUSPECT on
// decode-sized fp32 cases, while the claim that states it passes them all. (That each term's
// bound is sound is OutputAndEveryPartialWithinDerivedBound's.)
TEST(DcpHostPath, EveryKernelMathChoiceMustBeClaimed) {
  using gpu::StorageFormat;
  struct Choice {
    const char* name;
    gpu::KernelMath math;
    gpu::CommStrategy strategy;
  };
  const std::vector<Choice> choices = {
      {"exp poly3", {.exp = gpu::ExpImpl::poly3}, gpu::CommStrategy::a2a},
      {"P cast bf16", {.p_cast = StorageFormat::bf16}, gpu::CommStrategy::a2a},
      {"tf32", {.tf32 = true}, gpu::CommStrategy::a2a},
      {"partials bf16", {.partial = StorageFormat::bf16}, gpu::CommStrategy::a2a},
      {"reduce-scatter bf16", {.merge = StorageFormat::bf16}, gpu::CommStrategy::ag_rs}};
  constexpr int kCases = 3;
  for (const Choice& ch : choices) {
    int caught = 0;
    for (int i = 0; i < kCases; ++i) {
      CaseSpec spec;
      spec.tokens = 1, spec.q_heads = 8, spec.kv_heads = 2, spec.head_dim = 64, spec.v_dim = 64;
      spec.seq = 1000, spec.seed = static_cast<uint64_t>(100 + i);
      const oracle::Case c = make_case(spec);  // fp32 inputs, N(0, 1) values
      gpu::DcpConfig cfg;
      cfg.tp_size = 8, cfg.layout = {8, 1}, cfg.strategy = ch.strategy, cfg.math = ch.math;
      const gpu::Result<gpu::GroupRun> run =
          gpu::run_dcp_threads(to_dcp_inputs(c, make_chunks(spec.seq, spec.seed)), cfg);
      ASSERT_TRUE(run.ok()) << run.status().message();
      const DcpCheck claimed = judge_dcp(c, cfg, *run, {});
      EXPECT_TRUE(claimed.pass && claimed.pass_statistical) << ch.name << "\n" << claimed.report;
      gpu::DcpConfig unclaimed = cfg;
      unclaimed.math = {};
      const DcpCheck dropped = judge_dcp(c, unclaimed, *run, {});
      caught += dropped.pass_statistical ? 0 : 1;
    }
    EXPECT_GT(caught, 0) << ch.name << ": never caught when the claim leaves it out";
    std::cout << "[ caught   ] " << ch.name << " unclaimed: " << caught << " of " << kCases
              << " cases FAILED or SUSPECT\n";
  }
}

TEST(ThreadsCommunicator, CollectivesMoveBlocksByRankAndSumInEveryOrder) {
  constexpr int64_t kN = test_support::kCollectiveRanks, kCount = test_support::kCollectiveCount;
  for (const auto order :
       {gpu::ReduceOrder::sequential, gpu::ReduceOrder::pairwise, gpu::ReduceOrder::random}) {
    gpu::ThreadGroup group(kN);
    std::vector<test_support::CollectiveResults> got(kN);
    std::vector<gpu::GpuStatus> st(kN);
    std::vector<std::thread> th;
    for (int64_t r = 0; r < kN; ++r) {
      th.emplace_back([&, r] {
        gpu::Communicator& c = group.comm(r);
        test_support::CollectiveResults& out = got[static_cast<size_t>(r)];
        out.gathered.resize(kN * kCount);
        out.a2a.resize(kN * kCount);
        out.rs.resize(kCount);
        const std::vector<float> send = test_support::send_input(r);
        st[r] = c.all_gather(test_support::gather_input(r), out.gathered);
        if (st[r]) st[r] = c.all_to_all(send, out.a2a);
        if (st[r]) st[r] = c.reduce_scatter_sum(send, out.rs, {order, 7});
      });
    }
    for (auto& t : th) t.join();
    for (int64_t r = 0; r < kN; ++r) ASSERT_TRUE(st[r].ok()) << st[r].message();
    test_support::expect_collective_results(got);
  }
}

TEST(ThreadsCommunicator, AbortReleasesWaitingRanks) {
  gpu::ThreadGroup group(3);
  std::vector<gpu::GpuStatus> st(2);
  std::vector<std::thread> th;
  for (int64_t r = 0; r < 2; ++r) {
    th.emplace_back([&, r] {
      std::vector<float> mine(1, 1.0f), all(3);
      st[r] = group.comm(r).all_gather(mine, all);
    });
  }
  group.abort("rank 2 failed");  // rank 2 never arrives
  for (auto& t : th) t.join();
  for (const auto& s : st) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("rank 2 failed"), std::string::npos) << s.message();
  }
}

// A rank that never arrives (stopped, hung) ends the collective at the deadline, and the error
// names it: the deadline is the only way out, since nothing calls abort().
TEST(ThreadsCommunicator, DeadlineNamesTheRankThatDidNotArrive) {
  gpu::ThreadGroup group(3, std::chrono::milliseconds(200));
  std::vector<gpu::GpuStatus> st(2);
  std::vector<std::thread> th;
  for (int64_t r = 0; r < 2; ++r) {
    th.emplace_back([&, r] {
      std::vector<float> mine(1, 1.0f), all(3);
      st[r] = group.comm(r).all_gather(mine, all);
    });
  }
  for (auto& t : th) t.join();
  for (const auto& s : st) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(
        s.message().find("all_gather: rank 2 did not arrive within 0.2 s of the last arrival"),
        std::string::npos)
        << s.message();
  }
}

// The deadline counts from the last arrival: a group whose ranks keep arriving, each within the
// deadline of the one before but all of them over a longer span (ranks sharing one device, their
// shards of different lengths), meets; under a deadline from each rank's own arrival, rank 0
// would give up 1 s after it came, before rank 2 (1.2 s).
TEST(ThreadsCommunicator, DeadlineCountsFromTheLastArrival) {
  gpu::ThreadGroup group(3, std::chrono::milliseconds(1000));
  std::vector<gpu::GpuStatus> st(3);
  std::vector<std::thread> th;
  for (int64_t r = 0; r < 3; ++r) {
    th.emplace_back([&, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(600 * r));
      std::vector<float> mine(1, static_cast<float>(r)), all(3);
      st[r] = group.comm(r).all_gather(mine, all);
      if (st[r]) {
        EXPECT_EQ(all, (std::vector<float>{0.0f, 1.0f, 2.0f}));
      }
    });
  }
  for (auto& t : th) t.join();
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].message();
}

}  // namespace
}  // namespace dcp::props
