#include "tools/reference_cmd.hpp"

#include <iostream>
#include <memory>
#include <string>

#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"

namespace dcp::tools {
namespace {

struct ReferenceOptions {
  std::string case_path, out_path, tier = "fast";
};

int run_reference(const ReferenceOptions& o) {
  auto c = oracle::load_case(o.case_path);
  if (!c) {
    std::cerr << "dcp-verify reference: " << c.status().message() << "\n";
    return kExitBadInput;
  }
  auto ref =
      oracle::reference(*c, o.tier == "certify" ? oracle::Tier::certify : oracle::Tier::fast);
  if (!ref) {
    std::cerr << "dcp-verify reference: " << ref.status().message() << "\n";
    return kExitBadInput;
  }
  if (const auto st = oracle::save_attention(o.out_path, *ref); !st) {
    std::cerr << "dcp-verify reference: " << st.message() << "\n";
    return kExitBadInput;
  }
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
  return {cmd, [o] { return run_reference(*o); }};
}

}  // namespace dcp::tools
