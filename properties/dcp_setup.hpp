// dcp_setup.hpp — one DCP property case: a case spec, a production-path configuration and the
// KV write sequence, with a JSON form for pinned counterexamples (fixtures/dcp/pinned.json).
//
//   DcpSetup s = *gen_dcp_setup(DcpLimits{});        // rc_gen.hpp
//   DcpCheck chk = check_dcp(make_case(s.spec), s.cfg, s.chunks);
//   nlohmann::json j = to_json(s);                      // pin it if it ever fails
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/dcp_step.hpp"
#include "oracle/status.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"

namespace dcp::props {

struct DcpSetup {
  CaseSpec spec;
  gpu::DcpConfig cfg;
  std::vector<int64_t> chunks;  // KV write lengths summing to spec.seq
  // A decode batch in one step over one paged pool (cfg.page_size > 0): request b holds batch[b]
  // keys and spec.tokens queries, its values from seed spec.seed + b, and every request's first
  // shared_prefix keys are request 0's (make_batch_cases). Empty: one request of spec.seq keys
  // written in `chunks`; a batch's requests write their own (DcpInputs' batch), and spec.seq is
  // the longest request's.
  std::vector<int64_t> batch;
  int64_t shared_prefix = 0;
  // Requests [0, retired) of the batch finished before the step: written, then their pages freed
  // and reused by the live ones (DcpInputs.retired); their queries are not run.
  int64_t retired = 0;
};

// Scales by page follow the setup's pages: spec.scale_pages from the layout and page size, and
// cfg.page_scales on (off for any other scales). Every setup is put through it once its spec and
// configuration are drawn or read (the generators, setup files, `run`); validate_setup refuses a
// setup where the two disagree.
void follow_pages(DcpSetup& s);

// Runs the setup on the backend and judges it (check_dcp, or check_dcp_batch for a batch).
DcpCheck check_dcp_setup(const DcpSetup& s, const DcpBackend& backend = nullptr,
                         const oracle::Watch& watch = {});
// A batch setup's requests (make_batch_cases).
std::vector<oracle::Case> batch_cases(const DcpSetup& s);

// The documented ranges of a setup (docs/cli.md, "Limits and caps"); memory is judged from the
// whole setup (footprint.hpp). They keep every count finite and every product of the layout
// inside int64_t.
inline constexpr int64_t kMaxRanks = gpu::kMaxGroupRanks;  // N and the TP size: a thread per rank
inline constexpr int64_t kMaxInterleave = 1 << 20;         // I (I N <= 2^30)
inline constexpr int64_t kMaxSeq = int64_t{1} << 40;       // S and W: positions below 2^41
inline constexpr int64_t kMaxExtent = 1 << 20;             // T, Hq, Hkv, Dk, Dv

// How a setup's fields are named to the user, for messages: the fields of a pinned-counterexample
// entry (kJsonNames), or the command-line flags that set them (tools/flags.hpp, kFlagNames).
struct SetupNames {
  const char *tokens, *q_heads, *kv_heads, *head_dim, *v_dim, *seq, *window, *softcap, *topk,
      *tp_size, *dcp_size, *interleave, *tile, *splits, *chunks, *merge, *page_size, *kv_scale,
      *batch, *shared_prefix, *retired;
};
inline constexpr SetupNames kJsonNames{
    "spec.tokens",      "spec.q_heads",   "spec.kv_heads",   "spec.head_dim",
    "spec.v_dim",       "spec.seq",       "spec.window",     "spec.softcap",
    "spec.topk",        "config.tp_size", "config.dcp_size", "config.interleave",
    "config.tile",      "config.splits",  "chunks",          "config.math.merge",
    "config.page_size", "spec.kv_scale",  "batch",           "shared_prefix",
    "retired"};

// Whether the production path can run the setup and the oracle can state it: every range
// above, the divisibility of heads and ranks, chunk writes of positive lengths summing to S, a
// 16-bit sum only in ag_rs's reduce-scatter, scales only for fp8 caches (the generator maps a
// scale's amax to the format's largest value: ~1e38 for 16- and 32-bit formats). The
// first violation, in one line naming the field as `names` calls it. (Generated setups may ask
// for more top-k positions or splits than there are keys, to exercise padding and empty splits;
// the command line refuses those as requests that make no sense, tools/run_cmd.cpp.)
oracle::Status validate_setup(const DcpSetup& s, const SetupNames& names);

// The most requests a batch holds (this many of kMaxSeq keys each still count their keys in
// int64_t).
inline constexpr int64_t kMaxBatch = 4096;

// The longest KV write make_chunks draws: a chunked prefill's chunk as engines size it (2K-8K
// tokens). Each rank holds one write's rows at a time, so this bounds the writes' memory at any
// context length (a 1M-token case is some 800 writes).
inline constexpr int64_t kMaxWriteChunk = 4096;

// A partition of [0, seq) into chunk lengths from a seed: a mix of decode appends (length 1) and
// prefill chunks of random length up to kMaxWriteChunk, so chunks start at arbitrary offsets.
std::vector<int64_t> make_chunks(int64_t seq, uint64_t seed);

std::string describe(const DcpSetup& s);

// What the DCP property draws (rc_gen.hpp, gen_dcp_setup): the largest N, TP groups, S, Dk and Dv,
// and the features and formats an implementation under test supports (`properties --max-seq
// --without --kv-dtypes ...`, and the Python package's ranges). A feature switched off is never
// drawn; with every default the draws are those of the suite's own runs.
struct DcpLimits {
  int64_t max_dcp = 64;    // N
  int64_t max_groups = 3;  // tp / N
  int64_t max_seq = 3000;  // S for the rare long-context cases
  int64_t max_head_dim = 32;
  int64_t max_v_dim = 16;
  // The features never drawn (kFeatures, case_gen.hpp), bit i for Feature i; batch: no batch
  // property (dcp-batch, several requests in one step).
  uint32_t lacks = 0;
  bool allows(Feature f) const { return (lacks >> static_cast<int>(f) & 1u) == 0; }
  void lack(Feature f) { lacks |= 1u << static_cast<int>(f); }
  std::vector<oracle::DType> q_dtypes = production_dtypes(false);  // F32, BF16, F16
  std::vector<oracle::DType> kv_dtypes = production_dtypes(true);  // every production format
  std::vector<oracle::LseBase> lse_bases{oracle::LseBase::e, oracle::LseBase::two};
  // Where not empty, the only N, Dk and Dv drawn, each at most its maximum above (a kernel built
  // for Dk in {64, 128}, groups of N a power of two); shrinking goes toward the first listed.
  std::vector<int64_t> dcp_sizes{}, head_dims{}, v_dims{};
};

// The caches a DCP property draws: the value formats (f32, bf16, f16) or the quantized ones (fp8,
// int8; with no scales, or scales per tensor, KV head or token), those of
// lim.kv_dtypes (in its order).
enum class CacheKind { values, fp8 };
std::vector<oracle::DType> cache_formats(const DcpLimits& lim, CacheKind kind);

// The largest maxima the command line accepts (each at least 1): what keeps one case within
// seconds and a few hundred megabytes (suite_case_footprint says how much exactly).
inline constexpr int64_t kMaxDrawnDcp = 256, kMaxDrawnGroups = 8, kMaxDrawnSeq = 1 << 16,
                         kMaxDrawnHeadDim = 256;

// The first field of the setup outside the limits, in one line ("uses softcap"); nullopt when it
// is inside them (a pinned entry is replayed only then).
std::optional<std::string> outside(const DcpSetup& s, const DcpLimits& lim);

// The setup as JSON: spec, config (with config.math, the kernels' arithmetic, only where it is not
// the default) and chunks.
nlohmann::json to_json(const DcpSetup& s);
// Reads to_json's form back. The first field missing, mistyped or unknown, or a value
// validate_setup refuses, is an error naming the field ("config.dcp_size: got 0; ...").
oracle::Expected<DcpSetup> setup_from_json(const nlohmann::json& j);

}  // namespace dcp::props

namespace dcp::props {
// RapidCheck prints a failing setup with this.
inline void showValue(const DcpSetup& s, std::ostream& os) { os << describe(s); }
}  // namespace dcp::props
