// model_cmd.hpp — `dcp-verify model`: the design's cost model of one DCP decode layer.
//
// Per decode layer and per rank it compares attention under TP alone (the rank's H_loc query
// heads over all S context tokens) with attention under DCP (its group's Hg = N H_loc heads over
// the rank's ceil(S / N) tokens) plus DCP's communication (the query AllGather unless
// --replicate-q, and the ag_rs or a2a combine), and reports where DCP pays:
//
//   T_attn(S) - T_attn(S/N) > T_comm        (the design's payoff criterion)
//
// Attention time is a roofline (the larger of KV bytes / HBM bandwidth and FLOPs / tensor-core
// peak); communication time is a latency per collective plus bytes / link bandwidth. The model
// ignores overlap of communication with compute, kernel launch overheads, the local combine
// kernel, the extra q-projection GEMM of --replicate-q, and any efficiency below the given peaks
// (pass achieved figures as the hardware flags to model them). The formulas and the sources of
// the default hardware figures are in model_cmd.cpp.
//
//   $ dcp-verify model --preset k3-mla                 # a sweep of S = 1K .. 1M
//   $ dcp-verify model --preset llama3-70b --seq 131072 --batch 16 --comm-backend ag_rs
#pragma once

#include "tools/command.hpp"

namespace dcp::tools {

// Registers `dcp-verify model` and its flags.
Command add_model_command(CLI::App& app);

}  // namespace dcp::tools
