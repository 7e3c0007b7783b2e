// probe.hpp — measures a black-box DCP implementation's arithmetic with crafted cases and states
// it as a claim (the result files' words, docs/format.md): what a user would otherwise guess.
//
// Every experiment runs the implementation as the suite does (a DcpBackend: the production path,
// a C plug-in, the Python bridge), on inputs whose exact answer is known in closed form, all of
// them exact in bf16 so a kernel that narrows its inputs loses nothing:
//   pairs     two keys of logits 0 and a = -c x (x in [0, 4.5], c in [1, 1.23]) with V = -1 and
//             +1, after keys whose weight underflows to 0 (a vectorized kernel's vector path
//             runs): the LSE gives the kernel's own weight exp~(a) (to the LSE's resolution),
//             hence its exponential's error; the O, (P' - P'0) / l, tells whether P was rounded
//             before P.V (none, tf32, f16, bf16, fp8); the outputs' bits tell the partial's format;
//   sums      16,384 keys of logit 0: half the V columns sum exactly (a control), half carry low
//             bits that a truncating accumulator drops; their mean signed error tells nearest
//             from truncating adds where the output's format leaves it visible;
//   midpoints for a 16-bit output: exact outputs set midway between two of its values (the
//             kernel's factor P/l calibrated first on exact-sum columns): the side they round to
//             shows the sign of the sums' error;
//   tile      keys of two logits with the row's maximum at position j: keys in tiles before j's
//             are rescaled by a subnormal exp(-97) (or, through the LSE, by a coarse
//             exponential), keys in or after it weighted directly; the output as j moves steps at
//             the tile boundaries;
//   rescale   with the tile known, a key at logit 0 in the first tile and one at b > 0 in the
//             second: the LSE gives the rescale's exp~(-b), whose exponential may not be the
//             weights' (a library exp beside a vectorized polynomial);
//   dot lanes keys whose products cancel (+-2^22) around small ones (2^-4) laid out for 1, 2, 4
//             .. 32 lanes, at head dims 64, 128 and 256: in the kernel's order every partial sum
//             is exact and each key's logit too; in any other a small is dropped against a big;
//   merge     two ranks with partials of known LSE gaps (where the implementation merges itself):
//             the merged LSE gives the merge's exponential, the merged O its sums' format;
//   log       the pairs' LSEs, log~(1 + exp~(a)), rows of n keys of logit 0 (n in [2, 2048]),
//             log~(n), and where it merges, two ranks of one key each at logits 0 and a
//             (max + log~(1 + exp~(gap))) and N = 2 .. 8 equal ranks (L_r + log~(N)): the logs'
//             largest error, the exponentials' charged to it.
// A measurement is not a proof: the exponential's error is the largest seen over the arguments
// tried (the claim rounds it up to two digits), and each finding says what it rests on.
//
//   ProbeTarget t{backend, cfg, /*merge=*/true, "mine"};
//   oracle::Expected<ProbeReport> r = probe(t);
//   std::cout << probe_text(*r);      // findings, then the claim to paste
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpu/dcp_step.hpp"
#include "oracle/status.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/footprint.hpp"

namespace dcp::props {

struct ProbeReport;

struct ProbeTarget {
  DcpBackend backend;  // runs the implementation (nullptr: the production path)
  // The configuration it runs under: the production path's arithmetic (math, tile) where that is
  // what is probed, the LSE base the implementation is asked for, the combine (a plug-in's combine
  // level runs on a2a). The probe sets the layout, TP size and shapes of each experiment.
  gpu::DcpConfig cfg;
  bool attend = true;  // the partials are its own (a plug-in with a partial or step level)
  bool merge = true;   // the merge is its own (a plug-in with a combine or step level)
  // It has a step level the experiments do not run (beside its partial or combine levels, which
  // they do): the logs that step takes are not measured.
  bool unprobed_step = false;
  std::string label;  // shown in the report
  // Called as each experiment starts, with its name and the report so far: where a crashing
  // plug-in ends the process, the command's last words report what was measured before it.
  std::function<void(const std::string& experiment, const ProbeReport& so_far)> on_experiment;
};

// One measurement: what was measured, the finding, and what it rests on.
struct ProbeFinding {
  std::string what;
  std::string finding;
  std::string evidence;
};

// The claim the measurements support, in the result files' words. Defaults are the words'
// defaults; merge fields are meaningful only when the merge was probed.
struct ProbeClaim {
  std::string accum = "f32";           // "f32" or "tf32" (P rounded to tf32 before P.V)
  std::string accum_rounding = "any";  // "nearest" or "any"
  std::string p_cast = "none";         // "none", or a format word: "bf16", "f16", "f8_e4m3", ...
  std::string partial_dtype = "f32";   // a format word: "f32", "bf16", "f16", "f8_e4m3", ...
  double exp_rel_err = 0.0;            // 0: the default (2 ulp)
  double exp_bias = 0.0;               // its mean's bound, where below it; 0: not claimed
  int64_t tile = 1;                    // 1: any tiling
  int64_t dot_lanes = 0;               // the q.k dots' lanes; 0: any order
  // The rescales' own exponential where it is not the kernel's (0: within the default 2 ulp);
  // nullopt: the kernel's (exp_rel_err).
  std::optional<double> rescale_exp_rel_err;
  // Every log it takes (its partials' and its merge's), relative to max(1, |result|); 0: the
  // default budget.
  double log_rel_err = 0.0;
  bool ftz = false;                     // subnormal results flushed to zero
  bool merged = false;                  // the merge fields below were measured
  std::string merge_accum = "f32";      // "f32", "bf16" or "f16": the scaled outputs' sum
  std::string merge_lse_accum = "f32";  // "f32" or "bf16": the weights' sum
  double merge_exp_rel_err = 0.0;       // 0: the default (exp_rel_err's)
  // A 16-bit merge sum of exp(L_r - L) O_r that is the output (merge_form scaled); false: any form.
  bool merge_scaled = false;
};

struct ProbeReport {
  std::string label;
  std::string lse_base;  // "e" or "2"
  std::vector<ProbeFinding> findings;
  ProbeClaim claim;
  int64_t calls = 0;  // implementation steps run
};

// The production path in the arithmetic `math`, with online-softmax tiles of `tile` keys, on
// threads: an implementation whose claim is known (host_claim), for testing the probe on. A
// 16-bit merge sum is a reduce-scatter's (ag_rs); a2a merges in fp32.
ProbeTarget production_target(const gpu::KernelMath& math, int64_t tile);

// Runs the experiments of what the implementation computes itself (the partial's where
// target.attend, the merge's where target.merge; what it leaves to the production path keeps the
// claim's defaults, as the suite judges that part by the production path's own claim). An error
// names the experiment and carries the implementation's own message (a level that fails, a
// malformed output).
oracle::Expected<ProbeReport> probe(const ProbeTarget& target);

// The claim as result metadata (word, value) pairs and as one line of them ("accum f32
// accum_rounding nearest ..."); as a Python mapping for an implementation's `claim` (the plug-in
// ABI's fields, coarsened where the ABI has one word for two); and the report as text (findings,
// then both claims) and as JSON (docs/cli.md).
std::vector<std::pair<std::string, std::string>> claim_metadata(const ProbeClaim& c);
std::string claim_words(const ProbeClaim& c);
std::string claim_python(const ProbeClaim& c);
std::string probe_text(const ProbeReport& r);
std::string probe_findings_text(const ProbeReport& r);  // probe_text's header and findings only
nlohmann::json probe_json(const ProbeReport& r);        // schema dcp-verify/probe/1

// What a probe plans (footprint.hpp's units), whatever the implementation: its largest
// experiment's K and V (16,384 keys of 8 heads of 64) held four times over (the inputs, a rank's
// cache, a plug-in's copy, the bridge's), and the work of every step and of fitting the tiles.
Footprint probe_footprint();

// A relative error rounded up to two significant digits (1.234e-4 -> 1.3e-4): what a claim
// states for a measured largest error.
double round_up_2sig(double x);

}  // namespace dcp::props
