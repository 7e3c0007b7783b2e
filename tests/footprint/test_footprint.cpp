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
#include <string>

#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/footprint.hpp"

namespace dcp::props {
namespace {

// Peak resident bytes of a child that runs check_dcp on the setup (and whether it passed).
double measured_peak_bytes(const DcpSetup& s) {
  const pid_t pid = fork();
  if (pid == 0) {
    const DcpCheck chk = check_dcp(make_case(s.spec), s.cfg, s.chunks);
    _exit(chk.pass ? 0 : 1);
  }
  int status = 0;
  rusage use{};
  EXPECT_EQ(wait4(pid, &status, 0, &use), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(s);
  return static_cast<double>(use.ru_maxrss) * 1024.0;  // ru_maxrss is in KiB on Linux
}

DcpSetup setup(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t dk, int64_t dv, int64_t seq,
               int64_t n, int64_t tp, bool latent = false) {
  DcpSetup s;
  s.spec.tokens = tokens;
  s.spec.q_heads = heads;
  s.spec.kv_heads = kv_heads;
  s.spec.head_dim = dk;
  s.spec.v_dim = dv;
  s.spec.seq = seq;
  s.spec.shared_latent = latent;
  s.spec.seed = 5;
  s.cfg.layout = {n, 1};
  s.cfg.tp_size = tp;
  s.chunks = make_chunks(seq, 5);
  return s;
}

void expect_within(const char* what, const DcpSetup& s) {
  const Footprint f = dcp_check_footprint(s);
  const double got = measured_peak_bytes(s);
  std::printf("  %-34s peak %8.1f MiB  bound %8.1f MiB  peak/bound %.2f  (largest: %s)\n", what,
              got / (1 << 20), f.bytes / (1 << 20), got / f.bytes, f.largest.c_str());
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
}

}  // namespace
}  // namespace dcp::props
