// dcp_setup.hpp — one DCP property case: a case spec, a production-path configuration and the
// KV write sequence, with a JSON form for pinned counterexamples (fixtures/dcp/pinned.json).
//
//   DcpSetup s = *gen_dcp_setup(DcpLimits{});        // rc_gen.hpp
//   DcpCheck chk = check_dcp(make_case(s.spec), s.cfg, s.chunks);
//   nlohmann::json j = to_json(s);                      // pin it if it ever fails
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/dcp_step.hpp"
#include "oracle/status.hpp"
#include "properties/case_gen.hpp"

namespace dcp::props {

struct DcpSetup {
  CaseSpec spec;
  gpu::DcpConfig cfg;
  std::vector<int64_t> chunks;  // KV write lengths summing to spec.seq
};

// A partition of [0, seq) into chunk lengths from a seed: a mix of decode appends (length 1) and
// prefill chunks of random length, so chunks start at arbitrary offsets.
std::vector<int64_t> make_chunks(int64_t seq, uint64_t seed);

std::string describe(const DcpSetup& s);

nlohmann::json to_json(const DcpSetup& s);
oracle::Expected<DcpSetup> setup_from_json(const nlohmann::json& j);

}  // namespace dcp::props

namespace dcp::props {
// RapidCheck prints a failing setup with this.
inline void showValue(const DcpSetup& s, std::ostream& os) { os << describe(s); }
}  // namespace dcp::props
