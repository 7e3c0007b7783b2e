#include "tools/reference_cmd.hpp"

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"
#include "properties/footprint.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

struct ReferenceOptions {
  std::string case_path, out_path, tier = "fast";
};

int run_reference(const ReferenceOptions& o, const Limits& lim) {
  auto bad = [](const std::string& why) { return refuse("reference", why, std::cerr); };
  if (const auto why = output_error({"--out", o.out_path}, {{"--case", o.case_path}}))
    return bad(*why);
  const props::Footprint file = props::file_footprint(file_bytes(o.case_path), props::FileRead::case_in_place);
  if (const auto why = over_limits(file, lim)) return bad("--case " + o.case_path + ": " + *why);
  auto c = oracle::load_case(o.case_path);
  if (!c) return bad(c.status().message());
  const oracle::Tier tier = o.tier == "certify" ? oracle::Tier::certify : oracle::Tier::fast;
  props::Footprint judge = props::judge_footprint(*c, 1, tier);
  judge.bytes += file.bytes;
  if (const auto why = over_limits(judge, lim)) return bad("--case " + o.case_path + ": " + *why);
  // A progress line on a terminal, and Ctrl-C honoured between blocks of keys (fast tier).
  InterruptGuard guard;
  std::optional<Progress> progress;
  oracle::Watch watch;
  watch.progress = [&](int64_t done, int64_t total) {
    if (!progress) progress.emplace("reference", total);
    progress->update(done);
  };
  watch.stop = [] { return interrupted(); };
  auto ref = oracle::reference(*c, tier, watch);
  if (progress) progress->clear();
  if (!ref && interrupted()) {
    std::cout << "# reference: INTERRUPTED (" << ref.status().message() << "); " << o.out_path
              << " not written\n";
    return kExitInterrupted;
  }
  if (!ref) return bad(ref.status().message());
  if (const auto st = oracle::save_attention(o.out_path, *ref); !st) return bad(st.message());
  std::cout << "reference: " << o.case_path << " -> " << o.out_path << "  o "
            << oracle::shape_string(ref->o.shape) << "  lse "
            << oracle::shape_string(ref->lse.shape) << " (base " << oracle::lse_base_name(ref->base)
            << ", tier " << o.tier << ")\n";
  return kExitOk;
}

}  // namespace

Command add_reference_command(CLI::App& app) {
  auto o = std::make_shared<ReferenceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "reference", "Compute a case's exact attention: o [T, Hq, Dv] and lse [T, Hq] as F64");
  cmd->add_option("--case", o->case_path, "Case file (safetensors, docs/format.md)")->required();
  cmd->add_option("--out", o->out_path, "Output file (safetensors)")->required();
  cmd->add_option("--tier", o->tier, "fast (double-double) or certify (MPFR, 266 bits)")
      ->check(CLI::IsMember({"fast", "certify"}))
      ->capture_default_str();
  return {cmd, [o](const Limits& lim) { return run_reference(*o, lim); }};
}

}  // namespace dcp::tools
