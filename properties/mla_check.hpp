// mla_check.hpp — the absorbed-MLA slice (gpu/mla_slice.hpp) against the unabsorbed oracle
// (oracle/mla.hpp), from a small spec and a seed.
//
//   MlaSpec spec;  spec.heads = 8;  spec.rope = 4;  spec.apply_rope = true;
//   DcpCheck chk = check_mla(spec, cfg);   // out [T, Hq, Dvh] and lse [T, Hq] within the bound
#pragma once

#include <cstdint>
#include <string>

#include "gpu/dcp_step.hpp"
#include "oracle/mla.hpp"
#include "properties/dcp_bridge.hpp"

namespace dcp::props {

struct MlaSpec {
  int64_t tokens = 1, heads = 4, q_lora = 16, nope = 8, rope = 4, kv_lora = 16, v_head = 8;
  int64_t seq = 64;
  bool apply_rope = true;
  bool explicit_pos = false;  // random query positions in [0, S + 2) instead of S-T .. S-1
  bool causal = true;
  oracle::DType kv_dtype = oracle::DType::bf16;
  oracle::LseBase lse_base = oracle::LseBase::e;
  uint64_t seed = 0;
};

oracle::MlaCase make_mla_case(const MlaSpec& s);

// Runs run_mla_threads with cfg (cfg.out_dtype must be f32) and compares with the oracle.
DcpCheck check_mla(const MlaSpec& s, const gpu::DcpConfig& cfg);

std::string describe(const MlaSpec& s);

}  // namespace dcp::props
