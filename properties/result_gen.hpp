// result_gen.hpp — result files (oracle/case_file.hpp, DcpResult) produced by implementations,
// for testing `dcp-verify check`: the fp32 implementation model (correct, or with a planted bug)
// and the production host path, each with its partials and the arithmetic it claims.
//
//   ModelConfig m;  m.shards = 4;  m.bug = Bug::merge_unweighted_mean;
//   oracle::DcpResult r = model_result(c, m, /*partials=*/true);   // check_result must fail it
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/dcp_step.hpp"
#include "oracle/case.hpp"
#include "oracle/case_file.hpp"
#include "oracle/status.hpp"
#include "properties/fp32_model.hpp"

namespace dcp::props {

// The model's output and (when partials) every shard's partial; the claim is claim_of(m), with
// the sink on shard 0 and the partials exchanged in fp32.
oracle::DcpResult model_result(const oracle::Case& c, const ModelConfig& m, bool partials);

// The host path on one DCP group (cfg.tp_size must equal cfg.layout.ranks, so every rank holds
// all Hq gathered heads); the claim is host_claim's.
oracle::Expected<oracle::DcpResult> host_result(const oracle::Case& c, const gpu::DcpConfig& cfg,
                                                const std::vector<int64_t>& chunks, bool partials);

}  // namespace dcp::props
