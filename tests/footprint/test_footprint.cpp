// The footprint (properties/footprint.hpp) is an upper bound of what a check really takes: each
// case runs check_dcp in a child process (fork), and the child's peak resident memory, read by
// wait4, must not exceed the bound. The cases are chosen so that each large term of the bound
// dominates in one of them (the KV copies, the ranks' caches and write buffers, the oracle's
// per-row states, its visible-key lists, the tile scratch), at a few hundred MB, well above the
// process's baseline. The ratio measured / bound is printed for each.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"
#include "oracle/tolerance.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/footprint.hpp"
#include "properties/suite.hpp"

namespace dcp::props {
namespace {

// Peak resident bytes of a child that runs `work` (which must succeed).
template <class Work>
double measured_peak_bytes(Work work) {
  const pid_t pid = fork();
  if (pid == 0) _exit(work() ? 0 : 1);
  int status = 0;
  rusage use{};
  EXPECT_EQ(wait4(pid, &status, 0, &use), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return static_cast<double>(use.ru_maxrss) * 1024.0;  // ru_maxrss is in KiB on Linux
}

double check_peak_bytes(const DcpSetup& s) {
  return measured_peak_bytes([&] { return check_dcp_setup(s).pass; });
}

CaseSpec shape(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t dk, int64_t dv, int64_t seq,
               uint64_t seed) {
  return CaseSpec{.tokens = tokens,
                  .q_heads = heads,
                  .kv_heads = kv_heads,
                  .head_dim = dk,
                  .v_dim = dv,
                  .seq = seq,
                  .seed = seed};
}

DcpSetup setup(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t dk, int64_t dv, int64_t seq,
               int64_t n, int64_t tp, bool latent = false) {
  DcpSetup s;
  s.spec = shape(tokens, heads, kv_heads, dk, dv, seq, 5);
  s.spec.shared_latent = latent;
  s.cfg.layout = {n, 1};
  s.cfg.tp_size = tp;
  s.chunks = make_chunks(seq, 5);
  return s;
}

// One line per case: the peak, the bound, their ratio and the bound's largest term.
void print_peak(const char* what, double got, const Footprint& f) {
  std::printf("  %-34s peak %8.1f MiB  bound %8.1f MiB  peak/bound %.2f  (largest: %s)\n", what,
              got / (1 << 20), f.bytes / (1 << 20), got / f.bytes, f.largest.c_str());
}

void expect_within(const char* what, const DcpSetup& s) {
  const Footprint f = dcp_check_footprint(s);
  const double got = check_peak_bytes(s);
  print_peak(what, got, f);
  EXPECT_LE(got, f.bytes) << what << ": " << describe(s);
}

TEST(Footprint, BoundsThePeakMemoryOfACheck) {
  expect_within("K and V copies (S 100000)", setup(1, 2, 2, 64, 64, 100000, 2, 2));
  expect_within("caches and writes (8 ranks, 8 KV)", setup(1, 8, 8, 64, 64, 30000, 8, 8));
  expect_within("MLA latent on 8 ranks", setup(1, 8, 1, 576, 512, 20000, 8, 8, true));
  expect_within("oracle row states (T 64, Hq 256)", setup(64, 256, 8, 32, 256, 100, 4, 8));
  expect_within("visible-key lists (T 512)", setup(512, 1, 1, 1, 1, 30000, 1, 1));
  DcpSetup tile = setup(1, 4, 1, 8, 8, 100, 2, 4);
  tile.cfg.tile = int64_t{1} << 24;  // 64 MiB of scratch on each of 4 ranks
  expect_within("tile scratch (--tile 2^24)", tile);
  // A batch in one step: every request's case, the concatenated inputs and the pool at once.
  DcpSetup batch = setup(2, 8, 2, 64, 64, 30000, 4, 4);
  batch.cfg.page_size = 16;
  batch.batch = {30000, 20000, 10000};
  batch.shared_prefix = 8000;
  batch.chunks = {30000};
  expect_within("a batch of 3 over a paged pool", batch);
}

// The property suite's plan (suite_case_footprint): the largest footprint of any shape the DCP
// generators draw, attained by a setup they can draw. That setup, run, stays within it, and the
// default suite plans within 8 GiB (it was refused on machines with less than 18.8 GiB free while a
// batch's requests were counted as one KV write of all their keys, each rounded up to whole
// virtual pages).
TEST(Footprint, BoundsTheWorstCaseThePropertySuiteDraws) {
  const SuiteFootprint plan = suite_case_footprint();
  const double got = check_peak_bytes(plan.worst);
  print_peak("the property suite's largest draw", got, plan.most);
  std::printf("  (%s)\n", describe(plan.worst).c_str());
  EXPECT_LE(got, plan.most.bytes) << describe(plan.worst);
  EXPECT_LE(plan.most.bytes, 8.0 * (1 << 30)) << describe(plan.worst);
}

// The certify tier holds MPFR numbers of 266 bits: its merge states dominate a case with many
// rows of a wide V over few keys.
TEST(Footprint, BoundsThePeakMemoryOfACertifyReference) {
  const oracle::Case c = make_case(shape(64, 64, 1, 8, 256, 4, 3));
  const Footprint f = judge_footprint(c, 1, oracle::Tier::certify);
  const double got =
      measured_peak_bytes([&] { return oracle::reference(c, oracle::Tier::certify).ok(); });
  print_peak("certify merge states (T 64, Hq 64)", got, f);
  EXPECT_LE(got, f.bytes);
}

// A claimed N is not bounded by its case (a result file's dcp_size): the bound of a layout with
// far more ranks than keys holds a state per rank that holds keys, not per rank claimed (500,000
// ranks times Dv = 256 doubles were 1 GiB a row, and a dcp_size of 30 million ran the machine
// out of memory).
TEST(Footprint, BoundsThePeakMemoryOfABoundOverMoreRanksThanKeys) {
  const oracle::Case c = make_case(shape(4, 8, 1, 16, 256, 64, 5));
  oracle::Arithmetic a;
  a.shards = 500'000;
  a.layout = oracle::Ownership{a.shards, 1, {}};
  const Footprint f = judge_footprint(c, 1, oracle::Tier::fast);
  const double got = measured_peak_bytes([&] {
    const auto ref = oracle::reference(c);
    return ref.ok() && oracle::derive_bound(c, *ref, a).ok();
  });
  print_peak("bound over 500,000 claimed ranks", got, f);
  EXPECT_LE(got, f.bytes);
}

// A case file's K and V are read in place: `dcp-verify reference` holds the file's bytes (mapped)
// and the oracle's small state, within the footprint and within the long-context target of
// 1.5 x the file + 256 MiB (the case held as doubles would take about 4 x the file).
TEST(Footprint, BoundsThePeakMemoryOfAReferenceReadInPlace) {
  const auto path = std::filesystem::temp_directory_path() / "dcp_footprint_in_place.safetensors";
  {
    const CaseSpec spec{.q_heads = 32,  // a 134 MB bf16 file
                        .kv_heads = 8,
                        .head_dim = 128,
                        .v_dim = 128,
                        .seq = 32768,
                        .q_dtype = oracle::DType::bf16,
                        .kv_dtype = oracle::DType::bf16,
                        .seed = 7};
    ASSERT_TRUE(oracle::save_case(path.string(), make_case(spec)).ok());
  }  // the generated case (as doubles) is freed before the child is forked
  const double file = static_cast<double>(std::filesystem::file_size(path));
  Footprint f = file_footprint(file, FileRead::case_in_place);
  double got = 0;
  {
    auto c = oracle::load_case(path.string());
    ASSERT_TRUE(c.ok()) << c.status().message();
    f.bytes += judge_footprint(*c, 1, oracle::Tier::fast).bytes;
  }
  got = measured_peak_bytes([&] {
    auto c = oracle::load_case(path.string());
    return c.ok() && oracle::reference(*c).ok();
  });
  std::filesystem::remove(path);
  std::printf("  %-34s peak %8.1f MiB  bound %8.1f MiB  peak/bound %.2f  peak/file %.2f\n",
              "reference, K and V in place", got / (1 << 20), f.bytes / (1 << 20), got / f.bytes,
              got / file);
  EXPECT_LE(got, f.bytes);
  EXPECT_LE(got, 1.5 * file + 256.0 * (1 << 20));
}

// `run` generates K and V as their stored bytes (KvHolding::stored); the production path writes
// from those bytes and each rank's cache keeps its rows in the same format, so a run takes about
// twice the KV bytes: within the footprint and the long-context target of 2 x the KV bytes in
// their storage format + 256 MiB (fp32 caches beside a case of doubles took about 6 x).
TEST(Footprint, BoundsThePeakMemoryOfARunInStorageFormat) {
  DcpSetup s = setup(1, 8, 8, 128, 128, 65536, 8, 8);  // 268 MB of bf16 K and V
  s.spec.q_dtype = s.spec.kv_dtype = oracle::DType::bf16;
  const Footprint f = dcp_check_footprint(s, KvHolding::stored);
  const double got = measured_peak_bytes(
      [&] { return check_dcp(make_case(s.spec, KvHolding::stored), s.cfg, s.chunks).pass; });
  const double kv = 65536.0 * 8 * (128 + 128) * 2;
  std::printf("  %-34s peak %8.1f MiB  bound %8.1f MiB  peak/bound %.2f  peak/KV %.2f\n",
              "run, K and V as bf16", got / (1 << 20), f.bytes / (1 << 20), got / f.bytes,
              got / kv);
  EXPECT_LE(got, f.bytes);
  EXPECT_LE(got, 2.0 * kv + 256.0 * (1 << 20));
}

}  // namespace
}  // namespace dcp::props
