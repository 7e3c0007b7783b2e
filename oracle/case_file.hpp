// case_file.hpp — cases and results as safetensors files (docs/format.md).
//
// A case file holds tensors q [T, Hq, Dk], k [S, Hkv, Dk], v [S, Hkv, Dv] (omitted for a shared
// latent, with metadata v_dim), q_pos I64 [T], sink F32 [Hq], topk I64 [T, K] (-1 = padding),
// and string metadata scale, causal ("1"/"0", default "1"), window, softcap, lse_base ("e"/"2",
// default "e"), v_dim. "format" (written by the Python package) and keys starting with "x_" are
// free annotations; anything else unknown is an error, so a misspelt option never silently
// changes the case.
//
//   Expected<Case> c = load_case("case.safetensors");     // validated
//   DCP_TRY(save_attention("ref.safetensors", *ref));      // o [T, Hq, Dv], lse [T, Hq] as F64
#pragma once

#include <string>
#include <string_view>

#include "oracle/attention.hpp"
#include "oracle/case.hpp"
#include "oracle/safetensors.hpp"
#include "oracle/status.hpp"

namespace dcp::oracle {

// Builds and validates a case from a parsed file; `source` names the file in messages.
Expected<Case> case_from_file(const StFile& file, std::string_view source);
Expected<Case> load_case(const std::string& path);

StFile case_to_file(const Case& c);
Status save_case(const std::string& path, const Case& c);

// o [T, Hq, Dv] and lse [T, Hq] as F64, metadata lse_base.
StFile attention_to_file(const Attention& a);
Status save_attention(const std::string& path, const Attention& a);

}  // namespace dcp::oracle
