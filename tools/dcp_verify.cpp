// dcp-verify — the command line of the DCP verification suite.
//
//   dcp-verify                                   the default job: selfcheck
//   dcp-verify selfcheck [--seed N]              oracle tiers, shard merge, derived bounds
//   dcp-verify reference --case C --out R [--tier fast|certify]
//
// Exit status: 0 success, 1 a check failed, 2 bad input or usage (one line on stderr).
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"
#include "tools/selfcheck.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;

int run_reference(const std::string& case_path, const std::string& out_path,
                  const std::string& tier) {
  auto c = dcp::oracle::load_case(case_path);
  if (!c) {
    std::cerr << "dcp-verify reference: " << c.status().message() << "\n";
    return kExitBadInput;
  }
  auto ref = dcp::oracle::reference(
      *c, tier == "certify" ? dcp::oracle::Tier::certify : dcp::oracle::Tier::fast);
  if (!ref) {
    std::cerr << "dcp-verify reference: " << ref.status().message() << "\n";
    return kExitBadInput;
  }
  const auto st = dcp::oracle::save_attention(out_path, *ref);
  if (!st) {
    std::cerr << "dcp-verify reference: " << st.message() << "\n";
    return kExitBadInput;
  }
  std::cout << "reference: " << case_path << " -> " << out_path << "  o "
            << dcp::oracle::shape_string(ref->o.shape) << "  lse "
            << dcp::oracle::shape_string(ref->lse.shape) << " (base "
            << dcp::oracle::lse_base_name(ref->base) << ", tier " << tier << ")\n";
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dcp-verify: reference and verification suite for Decode Context Parallelism"};
  app.set_version_flag("--version", std::string("dcp-verify ") + DCP_VERSION);
  app.require_subcommand(0, 1);

  dcp::tools::SelfcheckOptions self;
  auto* selfcheck =
      app.add_subcommand("selfcheck",
                         "Check the oracle: fast vs certify tier, shard merge, fp32 model vs bound "
                         "(the default job)");
  selfcheck->add_option("--seed", self.seed, "Seed for the cases and shard layouts");
  selfcheck->add_flag("--quiet", self.quiet, "Print failing rows and the summary only");

  std::string case_path, out_path, tier = "fast";
  auto* reference = app.add_subcommand(
      "reference", "Compute a case's exact attention: o [T, Hq, Dv] and lse [T, Hq] as F64");
  reference->add_option("--case", case_path, "Case file (safetensors, docs/format.md)")->required();
  reference->add_option("--out", out_path, "Output file (safetensors)")->required();
  reference->add_option("--tier", tier, "fast (double-double) or certify (MPFR, 266 bits)")
      ->check(CLI::IsMember({"fast", "certify"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "dcp-verify: " << e.what() << " (see --help)\n";
    return kExitBadInput;
  }

  if (*reference) return run_reference(case_path, out_path, tier);
  return dcp::tools::run_selfcheck(self, std::cout);
}
