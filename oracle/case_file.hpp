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

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "oracle/attention.hpp"
#include "oracle/case.hpp"
#include "oracle/safetensors.hpp"
#include "oracle/status.hpp"
#include "oracle/tolerance.hpp"

namespace dcp::oracle {

// How a case file is read: K and V left in the file's bytes (KvTensor, held as stored).
inline const StReadOptions kCaseReadOptions{.in_place = {"k", "v"}};

// Builds and validates a case from a parsed file; `source` names the file in messages. K and V
// read in place stay so (the case then keeps the file's mapping alive).
Expected<Case> case_from_file(const StFile& file, std::string_view source);
// The same, taking the tensors' values out of the file instead of copying them.
Expected<Case> case_from_file(StFile&& file, std::string_view source);
Expected<Case> load_case(const std::string& path);

StFile case_to_file(const Case& c);
Status save_case(const std::string& path, const Case& c);

// An external implementation's result for a case (docs/format.md, "Result file"): the output,
// optionally every DCP rank's partial, and the arithmetic it claims, read from the tensors'
// dtypes and the metadata. Values are held exactly as doubles.
struct DcpResult {
  Tensor<double> o;                           // [T, Hq, Dv]
  Tensor<double> lse;                         // [T, Hq] in the case's base
  std::optional<Tensor<double>> o_partial;    // [N, T, Hq, Dv] each rank's O_r
  std::optional<Tensor<double>> lse_partial;  // [N, T, Hq] each rank's L_r, the case's base
  int64_t dcp_size = 1;                       // N; partials of N ranks (x splits) were merged
  int64_t interleave = 1;                     // I; key p lives on rank floor(p / I) mod N
  std::vector<int64_t> owner;                 // [S] the rank of each key; empty: N and I decide
  int64_t splits = 1;                         // split-KV pieces merged inside each rank
  std::optional<int64_t> sink_rank = 0;  // the rank whose partial holds the sink; nullopt: merge
  Arithmetic output_claim;               // what the output was computed with (shards = N splits)
  Arithmetic partial_claim;              // what each partial was computed with (shards = splits)
  // Where the partials' format came from (o_partial's dtype, the metadata or the default rule),
  // for the claim line.
  std::string partial_format_from = "o_partial's dtype";
};

// Reads a result for case c: shapes must match the case, dtypes F64/F32/F16/BF16, metadata
// accum, p_cast, merge_accum, partial_dtype, dcp_size, interleave, splits, sink_rank, lse_base
// (must equal the case's), exp_rel_err, log_rel_err, tile, lse_layout (t_h or h_t: lse [Hq, T],
// lse_partial [N, Hq, T]), format and x_*, and the tensor owner (I64 [S], each key's rank, in
// place of interleave); anything else is an error
// naming the key. Without partials, their format is partial_dtype, else o's dtype when that is
// bf16 or f16, else f32 (partial_format_from says which).
Expected<DcpResult> result_from_file(const StFile& file, const Case& c, std::string_view source);
Expected<DcpResult> load_result(const std::string& path, const Case& c);

// The file of a result: o, lse and the partials when present, each stored in the format its
// claim names, and every metadata key written out. result_from_file reads back the same claim
// except what files do not record: truncating_mma (the reader assumes tensor-core adds that may
// truncate, the looser choice), the intrinsic budgets (the defaults), and partial_lse when there
// are no partials (fp32).
StFile result_to_file(const DcpResult& r, const Case& c);

// A format as a result file's metadata names it, its row's format_text (dtype.hpp): "f32",
// "bf16", "f8_e4m3", ... ("f64" for a reference's accum).
std::string format_text(DType d);

// o [T, Hq, Dv] and lse [T, Hq] as F64, metadata lse_base, accum "f64" and p_cast "none" (so
// that, read back as a result, the reference claims exactly what it is).
StFile attention_to_file(const Attention& a);
Status save_attention(const std::string& path, const Attention& a);

}  // namespace dcp::oracle
