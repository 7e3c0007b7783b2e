// probe_path.hpp — the probe on the production path in a given arithmetic, for the probe's tests
// (properties/test_probe.cpp, tests/probe/test_probe_claims.cpp): its report, or an empty one
// with the failure recorded.
#pragma once

#include <gtest/gtest.h>

#include "properties/probe.hpp"

namespace dcp::props {

inline ProbeReport probe_path(const gpu::KernelMath& m, int64_t tile) {
  oracle::Expected<ProbeReport> r = probe(production_target(m, tile));
  EXPECT_TRUE(r) << r.status().message();
  return r ? *r : ProbeReport{};
}

}  // namespace dcp::props
