// suite.hpp — the property suite a DCP backend must pass, as named RapidCheck property bodies.
//
// The same bodies run under GoogleTest (properties/test_*_properties.cpp, at the RapidCheck tier
// of the build) and under `dcp-verify properties` (any seed and case count, with a reproduce
// line). A body draws its inputs with *gen and asserts with RC_ macros; the backend runs the
// production path on one case.
//
//   for (const SuiteProperty& p : property_suite(nullptr))   // nullptr: the host threads path
//     rc::detail::checkProperty(rc::detail::toProperty(p.body), {p.name, p.what}, params);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/footprint.hpp"

namespace dcp::props {

struct SuiteProperty {
  std::string name;            // short id for --only and reproduce lines, e.g. "dcp-path"
  std::string what;            // one line: what it asserts
  std::function<void()> body;  // a RapidCheck property body
};

// The DCP path (output and every rank's partial within the derived bound) over random N, TP,
// layouts, chunked writes, variants, dtypes, bases, combine strategies, q paths, orders, tiles
// and split-KV; the absorbed-MLA slice against the unabsorbed oracle; and the token layout and
// KV writes against brute force.
// `lim`: what the DCP-path property draws (dcp_setup.hpp; the defaults: everything).
std::vector<SuiteProperty> property_suite(const DcpBackend& backend, const DcpLimits& lim = {});

// What the DCP properties draw: dcp-path's setups, dcp-fp8's, dcp-batch's (call inside a
// RapidCheck body; the same seed draws the same setups as the property).
enum class DcpDraw { path, fp8, batch };
DcpSetup draw_dcp(DcpDraw what);
// How the engines test DCP: the step's output against the same backend's output at DCP = 1 (the
// same TP size, N = 1), |got - expected| <= atol + rtol |expected| with the tolerances of vLLM's
// DCP kernel test (test_dcp_a2a.py): atol = rtol = 1e-5 where every format of the step is f32,
// else 3e-2, as for its 16-bit runs (SGLang's and FlashInfer's tests use 1e-2). Not a property of
// the suite (a fixed tolerance proves nothing about the arithmetic): `dcp-verify mutants` runs it
// beside the suite, on the cases dcp-path, dcp-fp8 and dcp-batch draw, to show which bugs only
// the properties find. This runs the setup at its N and at N = 1 and compares the outputs: the
// difference the fixed tolerance flags, in one line (a step error at either size too), or nullopt.
std::optional<std::string> fixed_tolerance_flags(const DcpBackend& backend, const DcpSetup& s);

// What one case of any property costs at most, for commands that plan `cases` of them: the
// largest footprint over every shape the DCP generators can draw within `lim` (rc_gen.hpp:
// gen_dcp_setup and draw_dcp_batch_setup, each count at its joint maximum, every interleave and
// page size), and a setup that attains it (tests/footprint runs it and measures its peak).
struct SuiteFootprint {
  Footprint most;
  DcpSetup worst;
};
SuiteFootprint suite_case_footprint(const DcpLimits& lim = {});

// The shape of the case the running body drew, in one line ("S=40 N=3 I=2 T=1 Hq=4 ..."). Each
// body sets it once its inputs are drawn; a runner that sees the body fail keeps it, and the last
// one kept is the shrunk counterexample's.
const std::string& current_case();

// The end of current_case() where the backend did not finish the case (an implementation's level,
// or the production path's own guard, reported an error): nothing was compared.
inline constexpr std::string_view kBackendErrorTag = " | backend error";

// Which tier of the derived bound the DCP-path and MLA bodies assert (docs/tolerances.md §10):
// sound, or statistical, which fails a SUSPECT comparison too. The command line's default is
// sound; the GoogleTest wrappers assert statistical, so a correct backend is inside both.
enum class BoundTier { sound, statistical };
void set_property_bound(BoundTier tier);
BoundTier property_bound();

// The bodies, one by one (the GoogleTest wrappers call these).
// kind: the caches drawn (value formats: dcp-path; fp8 with scales: dcp-fp8).
void dcp_path_property(const DcpBackend& backend, const DcpLimits& lim = {},
                       CacheKind kind = CacheKind::values);
// A decode batch of 2-4 requests over one paged pool with a shared prefix, some of them retired
// before the step, their pages reused (check_dcp_batch).
void dcp_batch_property(const DcpBackend& backend, const DcpLimits& lim = {});
void mla_slice_property();
void layout_bijection_property();
void layout_count_property();
void kv_write_property();

}  // namespace dcp::props
