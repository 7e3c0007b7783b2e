// run_cmd.hpp — `dcp-verify run`: the production DCP path against the oracle, one row per case.
//
// With no case flags it runs the representative sweep (several N, layouts, variants, both
// combine strategies, gather and replicate-q, GQA and MLA-latent shapes); with flags it runs one
// configured case (or --cases K of them, seeds seed .. seed + K - 1). Every row is judged on the
// assembled output and on every rank's partial, each within its derived bound.
//
//   RunOptions opt;  opt.dcp_size = 4;  opt.comm_backend = "a2a";
//   int code = run_dcp(opt, std::cout, std::cerr);   // 0 all pass, 1 a violation, 2 bad input
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "tools/command.hpp"

namespace dcp::tools {

struct RunOptions {
  std::string backend = "host";
  std::string comm = "threads";
  std::optional<std::string> preset;
  std::optional<int64_t> dcp_size, tp_size, interleave, seq, tokens, heads, kv_heads, head_dim,
      v_dim, window, topk, splits, tile;
  std::optional<double> softcap;
  std::optional<std::string> comm_backend, lse_base, dtype, out_dtype, order;
  bool sink = false, replicate_q = false, latent = false, quiet = false;
  int64_t cases = 1;
  uint64_t seed = 1;
  // True when any flag that shapes the case was given (otherwise: the default sweep).
  bool configured() const;
};

int run_dcp(const RunOptions& opt, std::ostream& out, std::ostream& err);

// Registers `dcp-verify run` and its flags.
Command add_run_command(CLI::App& app);

}  // namespace dcp::tools
