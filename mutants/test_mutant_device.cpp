// The mutant device with its bug off equals the production step bit for bit: every step mutant's
// code path (its copies of the production kernels: a merge, an online softmax, a KV write, key
// lists, per-head attention) run with no bug in it, on the setups the property suite draws, gives
// the production step's output, LSE and every rank's partial, bit for bit. So a mutant dies of its
// bug, never of a difference in its copy.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpu/run_threads.hpp"
#include "mutants/catalogue.hpp"
#include "mutants/mutant_device.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/rc_gen.hpp"

namespace dcp::mutants {
namespace {

// The first element where a and b differ in their bits (NaNs included), or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  return -1;
}

// The production step and m's path with the bug off, on one drawn setup (a batch one in three).
void path_equals_production(Mutant m) {
  const bool batch = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
  const props::DcpSetup s =
      batch ? props::draw_dcp_batch_setup(props::DcpLimits{}) : *props::gen_dcp_setup({});
  gpu::DcpInputs in;
  if (s.batch.empty()) {
    in = props::to_dcp_inputs(props::make_case(s.spec, props::KvHolding::stored), s.chunks);
  } else {
    const auto b = props::to_dcp_batch_inputs(props::batch_cases(s), {s.shared_prefix, s.retired});
    RC_PRE(static_cast<bool>(b));
    in = *b;
  }
  const gpu::Result<gpu::GroupRun> want = gpu::run_dcp_threads(in, s.cfg);
  const gpu::Result<gpu::GroupRun> got = gpu::run_dcp_threads(in, s.cfg, mutant_step(m, false));
  RC_ASSERT(want.ok() == got.ok());
  if (!want.ok()) return;
  const auto same = [&](const char* what, const std::vector<float>& a,
                        const std::vector<float>& b) {
    const int64_t at = first_difference(a, b);
    if (at >= 0)
      RC_FAIL(std::string(mutant_info(m).name) + " with its bug off: " + what + " differs at " +
              std::to_string(at) + " (" + std::to_string(a.size()) + " vs " +
              std::to_string(b.size()) + " elements)");
  };
  same("o", want->o, got->o);
  same("lse", want->lse, got->lse);
  for (size_t r = 0; r < want->partial_o.size(); ++r) {
    same("partial_o", want->partial_o[r], got->partial_o[r]);
    same("partial_lse", want->partial_lse[r], got->partial_lse[r]);
  }
}

TEST(MutantDevice, EveryPathWithItsBugOffEqualsTheProductionStep) {
  int64_t paths = 0;
  for (const MutantInfo& x : kMutantCatalogue) {
    if (!planted_in_step(x.id)) continue;
    ++paths;
    SCOPED_TRACE(std::string(x.name));
    EXPECT_TRUE(rc::check(std::string(x.name) + " with its bug off",
                          [m = x.id] { path_equals_production(m); }));
  }
  EXPECT_GT(paths, 0);
}

}  // namespace
}  // namespace dcp::mutants
