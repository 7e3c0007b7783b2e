// dcp-verify — the command line of the DCP verification suite.
//
//   dcp-verify                                   the default job: run (the sweep below)
//   dcp-verify run [flags]                       the production DCP path against the oracle
//   dcp-verify selfcheck [--seed N]              oracle tiers, shard merge, derived bounds
//   dcp-verify reference --case C --out R [--tier fast|certify]
//
// Exit status: 0 success, 1 a check failed, 2 bad input or usage (one line on stderr).
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "oracle/attention.hpp"
#include "oracle/case_file.hpp"
#include "tools/run_cmd.hpp"
#include "tools/selfcheck.hpp"
#ifdef DCP_HAVE_MPI
#include "gpu/comm_mpi.hpp"
#endif

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

  dcp::tools::RunOptions ro;
  auto* run = app.add_subcommand(
      "run",
      "Run the production DCP path (host backend) against the oracle: the default sweep, or one "
      "configured case (the default job)");
  run->add_option("--backend", ro.backend, "Backend: host")->capture_default_str();
  run->add_option("--comm", ro.comm, "Communicator: threads (in-process) or mpi (under mpirun)")
      ->capture_default_str();
  run->add_option("--preset", ro.preset,
                  "Model preset: k3-mla (96 heads, 576/512 latent, TP8xDCP8)");
  run->add_option("--dcp-size", ro.dcp_size, "N, ranks in a DCP group");
  run->add_option("--tp-size", ro.tp_size,
                  "Attention TP size, a multiple of N (default N; mpi: world)");
  run->add_option("--interleave", ro.interleave,
                  "I, tokens per block dealt to a rank (1: round-robin)");
  run->add_option("--comm-backend", ro.comm_backend, "Combine: ag_rs or a2a");
  run->add_flag("--replicate-q", ro.replicate_q,
                "Every rank projects all its group's query heads (no q gather)");
  run->add_option("--seq", ro.seq, "S, context length (tokens)");
  run->add_option("--tokens", ro.tokens, "T, query tokens per step");
  run->add_option("--heads", ro.heads, "Hq, query heads of the model");
  run->add_option("--kv-heads", ro.kv_heads, "Hkv, KV heads (divides Hq)");
  run->add_option("--head-dim", ro.head_dim, "Dk");
  run->add_option("--v-dim", ro.v_dim, "Dv");
  run->add_flag("--latent", ro.latent, "Shared latent: V is the first Dv components of K (MLA)");
  run->add_option("--dtype", ro.dtype, "Storage of q and KV: f32, f16 or bf16 (default bf16)");
  run->add_option("--out-dtype", ro.out_dtype, "Storage of the output: f32, f16 or bf16");
  run->add_option("--window", ro.window, "Sliding window W (0: none)");
  run->add_option("--softcap", ro.softcap, "Logit softcap c (0: none)");
  run->add_flag("--sink", ro.sink, "Per-head sink logits");
  run->add_option("--topk", ro.topk, "Top-k sparse attention with K selected positions (0: dense)");
  run->add_option("--lse-base", ro.lse_base, "The kernel's LSE base: e or 2");
  run->add_option("--order", ro.order, "Combine reduction order: seq, pair or rand");
  run->add_option("--splits", ro.splits, "Split-KV pieces inside a rank");
  run->add_option("--tile", ro.tile, "Online-softmax tile, keys");
  run->add_option("--cases", ro.cases, "Configured cases to run (seeds seed, seed+1, ...)");
  run->add_option("--seed", ro.seed, "Seed of the case values and chunk writes")
      ->capture_default_str();
  run->add_flag("--quiet", ro.quiet, "Print failing rows and the summary only");

  dcp::tools::SelfcheckOptions self;
  auto* selfcheck = app.add_subcommand(
      "selfcheck", "Check the oracle: fast vs certify tier, shard merge, fp32 model vs bound");
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
  if (*selfcheck) return dcp::tools::run_selfcheck(self, std::cout);
  if (ro.comm == "mpi") {
#ifdef DCP_HAVE_MPI
    if (const auto st = dcp::gpu::mpi_init(&argc, &argv); !st) {
      std::cerr << "dcp-verify run: " << st.message() << "\n";
      return kExitBadInput;
    }
    const int code = dcp::tools::run_dcp(ro, std::cout, std::cerr);
    dcp::gpu::mpi_finalize();
    return code;
#endif
  }
  return dcp::tools::run_dcp(ro, std::cout, std::cerr);
}
