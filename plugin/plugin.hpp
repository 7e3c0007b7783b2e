// plugin.hpp — a DCP implementation of another team, loaded from a C plug-in
// (include/dcp_verify/impl.h), run as a backend of the property suite and judged by its claim.
//
// The plug-in's levels replace the production path's at the device seam: a host device whose
// partial attention and a2a combine call the plug-in (partial: every rank's all-heads attention
// over the rank's own tokens; combine: the merge of a rank's N received partials, on a2a steps),
// inside the production step (gpu/device_step.hpp) unchanged around them. What the plug-in does not
// provide the production path does, in its default arithmetic. The claim the step is judged by is
// the plug-in's for its levels and the production path's for the rest.
//
//   oracle::Expected<Plugin> p = load_plugin("./libmine.so");
//   props::DcpBackend b = plugin_backend(*p, deadline);        // each level call within deadline
//   props::DcpCheck chk = props::check_dcp(c, cfg, chunks, b);   // names the level and the rank
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dcp_verify/impl.h"
#include "oracle/status.hpp"
#include "properties/dcp_bridge.hpp"

namespace dcp::plugin {

struct Plugin {
  std::string path;
  std::shared_ptr<void> handle;  // the dlopen handle, closed with the last copy
  // Its levels and claim in version 1's terms (a version-2 plug-in's copied into v2_fields).
  const dcpv_impl* impl = nullptr;
  std::shared_ptr<const dcpv_impl> v2_fields;
  // Its ABI version (1 to 4); version 2 and later only: the paged level (it runs in place of
  // partial), the format it dequantizes K and V into, the features it says it lacks
  // (DCPV_LACKS_*) and the page layout it asks for.
  int32_t abi = DCPV_ABI_VERSION;
  dcpv_paged_fn paged = nullptr;
  dcpv_dtype kv_dequant = DCPV_F32;
  uint32_t lacks = 0;
  dcpv_page_layout page_layout = DCPV_PAGES_NHD;
  bool has_partial() const { return impl->partial != nullptr; }
  bool has_combine() const { return impl->combine != nullptr; }
  bool has_step() const { return impl->step != nullptr; }
  bool has_paged() const { return paged != nullptr; }
  // Whether it computes a rank's partial itself: a partial or a paged level.
  bool attends() const { return has_partial() || has_paged(); }
  // The levels it provides, joined by '+': "paged+combine", "step", ...
  std::string levels() const;
  // The features its ABI version predates (version 3's for a plug-in of version 1 or 2, version
  // 4's for one of version 1 to 3).
  uint32_t uncarried() const;
  // The features it lacks, said or predated, as `properties --without` names them; those its
  // version predates.
  std::vector<std::string> lacked_features() const;
  std::vector<std::string> uncarried_features() const;
};

// Opens the shared library (a regular file; never unloaded) and checks what it exports:
// dcpv_get_impl_v2 or else dcpv_get_impl, its ABI version, at least one level, and a claim (and
// version 2's fields) in range.
// One-line errors naming the path and what was expected. Loading (its constructors, then
// dcpv_get_impl) is watched as a level call is: allowed `limit`, and a crash or exit() in it ends
// the process as one in a level does.
oracle::Expected<Plugin> load_plugin(const std::string& path, std::chrono::milliseconds limit);

// The configuration the plug-in's step runs under: the production path's kernels in their default
// arithmetic (the plug-in states its own) and no split-KV of theirs where the plug-in's partial
// runs; a paged level's cache always paged (pages of kPagedLevelRows rows, rounded up to a
// multiple of the interleave, where the case draws none). The plug-in's combine runs where the step
// merges a rank's N partials in one place, after a2a's All-to-All; ag_rs has no such place (its sum
// is the reduce-scatter's), so there the production combine runs.
gpu::DcpConfig plugin_config(const Plugin& p, gpu::DcpConfig cfg);
// vLLM's default block size.
inline constexpr int64_t kPagedLevelRows = 16;

// What the step claims: the plug-in's claim for its levels, the production path's for the rest.
oracle::Arithmetic plugin_claim(const Plugin& p, const gpu::DcpConfig& cfg, bool partial);

// A level call that has not returned within `deadline` cannot be stopped: its thread is in the
// plug-in's own code. The process then ends at once with one line on stderr naming the
// implementation, the level and its rank (the step level has none), and this status
// (tools/command.hpp's kExitTimeout, as timeout(1) reports a command that ran out of time),
// rather than hang; the last words (below), where a command set them, write its report first.
inline constexpr int kExitLevelTimeout = 124;

// A level (or the loading) that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, abort()) or calls exit()
// ends the process with one line on stderr naming the implementation, the level, its rank and the
// cause, and this status: the implementation failed, whatever status it asked exit() for. After a
// crash the last words, where set, write the command's report first; after exit() they cannot
// (exit() has already destroyed what it destroys first). A stack overflow in a level is beyond
// this (the signal has no stack to run on).
inline constexpr int kExitLevelCrash = 1;

// What a command writes before a level ends the process (a crash or a timeout): its
// report of what finished and the case in flight, as ERROR naming `cause` (the line printed on
// stderr, without "dcp-verify: "). They run once, on a thread of their own (a crashed level's
// thread is parked, a hung one left where it is), within kLastWordsSeconds, after which SIGALRM
// ends the process as it was going to end anyway (a crash inside malloc, say, may leave a lock
// they need). An empty function removes them; set them only around the levels' calls, over state
// that outlives those calls.
using LastWords = std::function<void(const std::string& cause)>;
void set_last_words(LastWords words);
// Removes the last words when the frame they refer to is left, however it is left.
struct LastWordsScope {
  LastWordsScope() = default;
  LastWordsScope(const LastWordsScope&) = delete;
  LastWordsScope& operator=(const LastWordsScope&) = delete;
  ~LastWordsScope() { set_last_words({}); }
};
inline constexpr unsigned kLastWordsSeconds = 10;

// The whole TP group on threads, each rank's device calling the plug-in's partial and combine
// levels, each call and each collective allowed at most `deadline`; judged by plugin_claim.
props::DcpBackend plugin_backend(const Plugin& p, std::chrono::milliseconds deadline);

// The plug-in's step level: the whole decode step in one call (allowed at most `deadline`), from
// the model-wide inputs (values in their storage format) and the layout; its output, and every
// rank's partial where it returns them, judged by its claim for the partial and the merge alike.
props::DcpBackend plugin_step_backend(const Plugin& p, std::chrono::milliseconds deadline);
oracle::Arithmetic plugin_step_claim(const Plugin& p, const gpu::DcpConfig& cfg, bool partial);

}  // namespace dcp::plugin
