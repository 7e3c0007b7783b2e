// batch.hpp — a varlen batch of decode requests in one case file and one result file
// (docs/format.md, "Batches"), split into one case and one result per request.
//
// A batch case holds cu_seqlens_q I64 [B+1] and cu_seqlens_k I64 [B+1] (prefix sums from 0 over
// the requests' query tokens and keys, as engines pass them) beside q [T_total, Hq, Dk] and
// k, v [S_total, Hkv, ...]; q_pos [T_total] and topk [T_total, K] hold positions within each
// request. sink, k_scale, v_scale and the metadata are the batch's, shared by every request. A
// result's o, lse and partials hold T_total rows in the same order, its owner map S_total keys.
//
//   Expected<std::vector<StFile>> cases = split_case_file(case_file, "c.st");  // B files
//   Expected<std::vector<StFile>> results = split_result_file(result_file, case_file, "r.st");
//   // cases->at(b) and results->at(b) are request b's, read with case_from_file / result_from_file
// A file without cu_seqlens_* is one request: both return it unchanged.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "oracle/safetensors.hpp"
#include "oracle/status.hpp"

namespace dcp::oracle {

// The batch's prefix sums: cu_q [B+1] over query tokens, cu_k [B+1] over keys; empty for a file
// that is one request. Checks they come as a pair, are I64 [B+1] with B >= 1, start at 0, have at
// least one query token per request, never decrease, and end at q's and k's first dimensions.
struct BatchOffsets {
  std::vector<int64_t> cu_q, cu_k;
  int64_t requests() const { return cu_q.empty() ? 1 : static_cast<int64_t>(cu_q.size()) - 1; }
};
Expected<BatchOffsets> batch_offsets(const StFile& case_file, std::string_view source);

// One case file per request: q, q_pos, topk sliced by cu_q; k, v by cu_k; the rest copied.
Expected<std::vector<StFile>> split_case_file(const StFile& case_file, std::string_view source);

// One result file per request of `case_file`'s batch: o and lse (either lse_layout) and the
// partials sliced by cu_q, owner by cu_k, the metadata copied.
Expected<std::vector<StFile>> split_result_file(const StFile& result_file, const StFile& case_file,
                                                std::string_view source);

}  // namespace dcp::oracle
