#include "oracle/case_file.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

namespace dcp::oracle {
namespace {

// A case's tensors: q, k, v, q_pos, the per-head vectors (case.hpp, kHeadVectors), topk, k_scale
// and v_scale, in the order an unknown name's message lists them.
const std::vector<std::string>& tensor_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"q", "k", "v", "q_pos"};
    for (const HeadVector& hv : kHeadVectors) n.push_back(hv.name);
    for (const char* x : {"topk", "k_scale", "v_scale"}) n.push_back(x);
    return n;
  }();
  return names;
}
// "format" is written by the safetensors Python package ("pt", "np"); it carries no meaning here.
const std::set<std::string> kMetadata = {"scale",    "causal", "window", "softcap",
                                         "lse_base", "v_dim",  "format"};

Expected<double> parse_real(std::string_view source, const std::string& key,
                            const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double x = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || !std::isfinite(x)) {
    return DCP_ERROR(source, ": metadata '", key, "' = \"", text, "\"; expected a finite number");
  }
  return x;
}

std::string number_text(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

Expected<int64_t> parse_int(std::string_view source, const std::string& key,
                            const std::string& text) {
  int64_t x = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return DCP_ERROR(source, ": metadata '", key, "' = \"", text, "\"; expected an integer");
  }
  return x;
}

// The tensor's values, moved out of the file (K and V may also hold int8 codes: `kv`).
Expected<Tensor<double>> float_tensor(std::string_view source, StFile& f, const std::string& name,
                                      DType* dtype, bool kv = false) {
  StTensor& t = f.tensors.at(name);
  const auto input = [kv](DType d) {
    return d != DType::i64 && d != DType::f64 && (kv || d != DType::i8);
  };
  if (t.dtype == DType::i64 || (t.dtype == DType::i8 && !kv)) {
    return DCP_ERROR(source, ": tensor '", name, "': dtype ", dtype_name(t.dtype), "; expected ",
                     dtype_names(input));
  }
  if (t.dtype == DType::f64) {
    return DCP_ERROR(source, ": tensor '", name, "': dtype F64; inputs are ", dtype_names(input),
                     " (the oracle takes their values as exact)");
  }
  *dtype = t.dtype;
  Tensor<double> out;
  out.shape = t.shape;
  out.data = std::move(t.values);
  return out;
}

// K or V: left in the file's bytes when it was read in place (a case's K and V are most of its
// memory), else its values moved out of the file.
Expected<KvTensor> kv_tensor(std::string_view source, StFile& f, const std::string& name,
                             DType* dtype) {
  StTensor& t = f.tensors.at(name);
  if (t.bytes == nullptr || t.dtype == DType::i64 || t.dtype == DType::f64) {
    auto values = float_tensor(source, f, name, dtype, true);
    if (!values) return values.status();
    return KvTensor(std::move(*values));
  }
  *dtype = t.dtype;
  return KvTensor::stored(t.shape, t.dtype, t.bytes, t.keep, {});
}

// Stored keys and values times their row's scale: the case's dequantized, exact values (an fp8
// or bf16 value times an fp32 scale fits a double); in place, the scale goes with the bytes.
// Shapes that do not fit are left as they are, for validate to name.
void dequantize(Case& c) {
  const auto fits = [&c](const KvTensor& t, const std::vector<double>& s) {
    if (t.rank() != 3) return false;
    const auto n = static_cast<int64_t>(s.size());
    const bool sized = c.kv_scale_grain == ScaleGrain::head
                           ? n == 1 || n == t.dim(1)
                           : n == t.dim(0) || n == t.dim(0) * t.dim(1);
    return sized && (t.is_stored() || static_cast<int64_t>(t.data.size()) == t.numel());
  };
  if (fits(c.k, c.k_scale)) {
    if (c.k.is_stored())
      c.k.set_stored_scale(c.k_scale, c.kv_scale_grain);
    else
      for (int64_t i = 0; i < c.k.numel(); ++i) c.k.data[i] *= c.k_scale_at(i);
  }
  if (!c.shared_latent() && fits(c.v, c.v_scale)) {
    if (c.v.is_stored())
      c.v.set_stored_scale(c.v_scale, c.kv_scale_grain);
    else
      for (int64_t i = 0; i < c.v.numel(); ++i) c.v.data[i] *= c.v_scale_at(i);
  }
}

}  // namespace

Expected<Case> case_from_file(const StFile& f, std::string_view source) {
  return case_from_file(StFile(f), source);
}

Expected<Case> case_from_file(StFile&& f, std::string_view source) {
  for (const auto& [name, t] : f.tensors) {
    const std::vector<std::string>& known = tensor_names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      if (name == "cu_seqlens_q" || name == "cu_seqlens_k") {
        return DCP_ERROR(source, ": tensor '", name,
                         "': a batch of requests (docs/format.md, \"Batches\"); `dcp-verify "
                         "check` reads batches, this command one request");
      }
      std::string list;
      for (const std::string& n : known) list += (list.empty() ? "" : ", ") + n;
      return DCP_ERROR(source, ": unknown tensor '", name, "'; a case holds ", list);
    }
  }
  for (const auto& [key, value] : f.metadata) {
    if (!kMetadata.count(key) && key.rfind("x_", 0) != 0) {
      return DCP_ERROR(
          source, ": unknown metadata '", key,
          "'; expected scale, causal, window, softcap, lse_base, v_dim, format or x_*");
    }
  }
  for (const char* required : {"q", "k"}) {
    if (!f.tensors.count(required)) {
      return DCP_ERROR(source, ": missing tensor '", required, "'");
    }
  }
  Case c;
  auto q = float_tensor(source, f, "q", &c.q_dtype);
  if (!q) return q.status();
  c.q = std::move(*q);
  auto k = kv_tensor(source, f, "k", &c.kv_dtype);
  if (!k) return k.status();
  c.k = std::move(*k);
  if (f.tensors.count("v")) {
    DType vd;
    auto v = kv_tensor(source, f, "v", &vd);
    if (!v) return v.status();
    if (vd != c.kv_dtype) {
      return DCP_ERROR(source, ": tensor 'v': dtype ", dtype_name(vd), " differs from k's ",
                       dtype_name(c.kv_dtype), "; K and V share one dtype");
    }
    c.v = std::move(*v);
    if (f.metadata.count("v_dim")) {
      auto vdim = parse_int(source, "v_dim", f.metadata.at("v_dim"));
      if (!vdim) return vdim.status();
      c.v_dim = *vdim;
    } else {
      c.v_dim = c.v.rank() == 3 ? c.v.dim(2) : 0;
    }
  } else {
    if (!f.metadata.count("v_dim")) {
      return DCP_ERROR(source,
                       ": no tensor 'v' and no metadata 'v_dim'; a shared latent needs "
                       "v_dim (V = the first v_dim components of k)");
    }
    auto vdim = parse_int(source, "v_dim", f.metadata.at("v_dim"));
    if (!vdim) return vdim.status();
    c.v_dim = *vdim;
  }
  if (f.tensors.count("q_pos")) {
    const StTensor& t = f.tensors.at("q_pos");
    if (t.dtype != DType::i64 || t.shape.size() != 1) {
      return DCP_ERROR(source, ": tensor 'q_pos': ", dtype_name(t.dtype), " ",
                       shape_string(t.shape), "; expected I64 [T]");
    }
    c.q_pos = t.ints;
  }
  for (const HeadVector& hv : kHeadVectors) {
    if (!f.tensors.count(hv.name)) continue;
    const StTensor& t = f.tensors.at(hv.name);
    if (t.dtype != DType::f32 || t.shape.size() != 1) {
      return DCP_ERROR(source, ": tensor '", hv.name, "': ", dtype_name(t.dtype), " ",
                       shape_string(t.shape), "; expected F32 [Hq]");
    }
    c.*hv.values = t.values;
  }
  // A scale's rank says its grain: [] or [1] per tensor, [Hkv] per KV head; [S, 1] per token,
  // [S, Hkv] per token and KV head (a [S] vector would be ambiguous where S = Hkv).
  const char* grain_of = nullptr;
  for (const auto& [name, scale] :
       {std::pair{"k_scale", &c.k_scale}, std::pair{"v_scale", &c.v_scale}}) {
    if (!f.tensors.count(name)) continue;
    const StTensor& t = f.tensors.at(name);
    // An empty scale would read as no scale at all, and the kernel be blamed for the difference.
    if (t.dtype != DType::f32 || t.shape.size() > 2 || t.values.empty()) {
      return DCP_ERROR(source, ": tensor '", name, "': ", dtype_name(t.dtype), " ",
                       shape_string(t.shape), t.values.empty() ? " (no element)" : "",
                       "; expected F32 [] or [1] (per tensor), [Hkv], [S, 1] (per token) or "
                       "[S, Hkv]");
    }
    const ScaleGrain grain = t.shape.size() == 2 ? ScaleGrain::token : ScaleGrain::head;
    const Shape k_shape = f.tensors.count("k") ? f.tensors.at("k").shape : Shape{};
    if (grain == ScaleGrain::token && k_shape.size() == 3 &&
        (t.shape[0] != k_shape[0] || (t.shape[1] != 1 && t.shape[1] != k_shape[1])))
      return DCP_ERROR(source, ": tensor '", name, "': ", shape_string(t.shape),
                       "; expected [S, 1] ", "or [S, Hkv] = [", k_shape[0], ", ", k_shape[1],
                       "] by token");
    if (grain_of != nullptr && grain != c.kv_scale_grain)
      return DCP_ERROR(source, ": tensor '", name, "': ", shape_string(t.shape), " is by ",
                       grain == ScaleGrain::token ? "token" : "head", "; '", grain_of,
                       "' is not (K and V scales share a grain)");
    grain_of = name;
    c.kv_scale_grain = grain;
    *scale = t.values;
  }
  if (f.tensors.count("topk")) {
    const StTensor& t = f.tensors.at("topk");
    if (t.dtype != DType::i64 || t.shape.size() != 2) {
      return DCP_ERROR(source, ": tensor 'topk': ", dtype_name(t.dtype), " ", shape_string(t.shape),
                       "; expected I64 [T, K]");
    }
    c.topk.shape = t.shape;
    c.topk.data = t.ints;
  }
  const auto& md = f.metadata;
  if (md.count("scale")) {
    auto x = parse_real(source, "scale", md.at("scale"));
    if (!x) return x.status();
    c.scale = *x;
  }
  if (md.count("causal")) {
    const std::string& s = md.at("causal");
    if (s != "0" && s != "1") {
      return DCP_ERROR(source, ": metadata 'causal' = \"", s, "\"; expected \"1\" or \"0\"");
    }
    c.causal = s == "1";
  }
  if (md.count("window")) {
    auto x = parse_int(source, "window", md.at("window"));
    if (!x) return x.status();
    c.window = *x;
  }
  if (md.count("softcap")) {
    auto x = parse_real(source, "softcap", md.at("softcap"));
    if (!x) return x.status();
    c.softcap = *x;
  }
  if (md.count("lse_base")) {
    const auto b = parse_lse_base(md.at("lse_base"));
    if (!b) {
      return DCP_ERROR(source, ": metadata 'lse_base' = \"", md.at("lse_base"),
                       "\"; expected \"e\" or \"2\"");
    }
    c.lse_base = *b;
  }
  dequantize(c);
  const Status st = validate(c);
  if (!st) return Status::error(std::string(source) + ": " + st.message(), __FILE__, __LINE__);
  return c;
}

Expected<Case> load_case(const std::string& path) {
  auto f = read_safetensors(path, kCaseReadOptions);
  if (!f) return f.status();
  return case_from_file(std::move(*f), path);
}

namespace {

const std::set<std::string> kResultTensors = {"o", "lse", "o_partial", "lse_partial", "owner"};
const std::set<std::string> kResultMetadata = {"accum",         "p_cast",
                                               "merge_accum",   "merge_lse_accum",
                                               "partial_dtype", "dcp_size",
                                               "interleave",    "splits",
                                               "sink_rank",     "lse_base",
                                               "exp_rel_err",   "log_rel_err",
                                               "tile",          "lse_layout",
                                               "format",        "accum_rounding",
                                               "ftz",           "merge_exp_rel_err",
                                               "kv_dequant",    "rescale_exp_rel_err",
                                               "merge_depth",   "exp_bias",
                                               "dot_lanes",     "merge_form"};

// The largest claimed relative error of an exp or log: beyond it a "function" is no longer one,
// and the first-order bound refuses long before (kappa > 0.1).
constexpr double kMaxIntrinsicRelErr = 0.5;

// exp_rel_err / log_rel_err: a decimal in [0, kMaxIntrinsicRelErr]; nullopt when absent.
Expected<std::optional<double>> intrinsic_error(std::string_view source, const StFile& f,
                                                const std::string& key) {
  if (!f.metadata.count(key)) return std::optional<double>();
  const std::string& text = f.metadata.at(key);
  auto x = parse_real(source, key, text);
  if (!x) return x.status();
  if (!(*x >= 0.0 && *x <= kMaxIntrinsicRelErr)) {
    return DCP_ERROR(source, ": metadata '", key, "' = \"", text,
                     "\"; expected a relative error in [0, ", kMaxIntrinsicRelErr, "]");
  }
  return std::optional<double>(*x);
}

// Which formats a metadata key may name besides the value formats (f32, f16, bf16): f64 (accum),
// fp8 (p_cast).
enum class Formats { half, with_f64, with_fp8 };

// The arithmetic formats a result's metadata may name, by their rows' format_text (dtype.hpp).
Expected<DType> parse_format(std::string_view source, const std::string& key,
                             const std::string& text, Formats extra) {
  const auto allowed = [extra](DType d) {
    if (d == DType::f64) return extra == Formats::with_f64;
    if (is_fp8(d)) return extra == Formats::with_fp8;
    return dtype_info(d)->role == Role::value;
  };
  std::vector<std::string_view> names;
  for (const DTypeInfo& d : kDTypes) {
    if (!allowed(d.value)) continue;
    if (d.format_text == text) return d.value;
    names.push_back(d.format_text);
  }
  return DCP_ERROR(source, ": metadata '", key, "' = \"", text, "\"; expected ",
                   choices_text(names));
}

Expected<int64_t> positive_int(std::string_view source, const StFile& f, const std::string& key,
                               int64_t dflt) {
  if (!f.metadata.count(key)) return dflt;
  auto x = parse_int(source, key, f.metadata.at(key));
  if (!x) return x.status();
  if (*x < 1) {
    return DCP_ERROR(source, ": metadata '", key, "' = \"", f.metadata.at(key),
                     "\"; expected an integer >= 1");
  }
  return *x;
}

// A float tensor of the result with the expected shape.
Expected<Tensor<double>> result_tensor(std::string_view source, const StFile& f,
                                       const std::string& name, const Shape& want, const char* dims,
                                       DType* dtype) {
  const StTensor& t = f.tensors.at(name);
  if (t.dtype == DType::i64 || t.dtype == DType::i8) {
    return DCP_ERROR(source, ": tensor '", name, "': dtype ", dtype_name(t.dtype), "; expected ",
                     float_dtype_names());
  }
  if (t.shape != want) {
    return DCP_ERROR(source, ": tensor '", name, "': shape ", shape_string(t.shape), "; expected ",
                     shape_string(want), " ", dims, " for this case");
  }
  *dtype = t.dtype;
  Tensor<double> out;
  out.shape = t.shape;
  out.data = t.values;
  return out;
}

// The owner map: I64 [S], every entry a rank in [0, N).
Expected<std::vector<int64_t>> owner_tensor(std::string_view source, const StTensor& t, int64_t S,
                                            int64_t ranks) {
  if (t.dtype != DType::i64)
    return DCP_ERROR(source, ": tensor 'owner': dtype ", dtype_name(t.dtype), "; expected I64");
  if (t.shape != Shape{S}) {
    return DCP_ERROR(source, ": tensor 'owner': shape ", shape_string(t.shape), "; expected [", S,
                     "] (one rank per key position)");
  }
  for (size_t p = 0; p < t.ints.size(); ++p) {
    if (t.ints[p] < 0 || t.ints[p] >= ranks) {
      return DCP_ERROR(source, ": tensor 'owner': element [", p, "] = ", t.ints[p],
                       "; expected a rank in [0, ", ranks, ") (metadata dcp_size)");
    }
  }
  return t.ints;
}

// lse_layout: "t_h" (lse [T, Hq], the default) or "h_t" (lse [Hq, T], lse_partial [N, Hq, T]).
// Whether the heads come first.
Expected<bool> lse_layout(std::string_view source, const StFile& f) {
  if (!f.metadata.count("lse_layout")) return false;
  const std::string& v = f.metadata.at("lse_layout");
  if (v == "t_h") return false;
  if (v == "h_t") return true;
  return DCP_ERROR(source, ": metadata 'lse_layout' = \"", v, "\"; expected t_h or h_t");
}

// [B, Hq, T] -> [B, T, Hq] (B = 1 drops to [T, Hq]).
Tensor<double> heads_first_to_tokens_first(const Tensor<double>& x, int64_t blocks) {
  const int64_t Hq = x.shape[x.shape.size() - 2], T = x.shape.back();
  Tensor<double> out;
  out.shape = x.shape.size() == 2 ? Shape{T, Hq} : Shape{blocks, T, Hq};
  out.data.resize(x.data.size());
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t t = 0; t < T; ++t)
        out.data[static_cast<size_t>((b * T + t) * Hq + h)] =
            x.data[static_cast<size_t>((b * Hq + h) * T + t)];
  return out;
}

}  // namespace

std::string format_text(DType d) {
  const DTypeInfo* row = dtype_info(d);
  return row ? std::string(row->format_text) : "?";
}

Expected<DcpResult> result_from_file(const StFile& f, const Case& c, std::string_view source) {
  for (const auto& [name, t] : f.tensors) {
    if (!kResultTensors.count(name)) {
      return DCP_ERROR(source, ": unknown tensor '", name,
                       "'; a result holds o, lse, o_partial, lse_partial, owner");
    }
  }
  for (const auto& [key, value] : f.metadata) {
    if (!kResultMetadata.count(key) && key.rfind("x_", 0) != 0) {
      return DCP_ERROR(source, ": unknown metadata '", key,
                       "'; expected accum, accum_rounding, ftz, p_cast, merge_accum, "
                       "merge_lse_accum, partial_dtype, dcp_size, interleave, splits, sink_rank, "
                       "lse_base, exp_rel_err, exp_bias, merge_exp_rel_err, "
                       "rescale_exp_rel_err, log_rel_err, tile, dot_lanes, kv_dequant, "
                       "merge_depth, merge_form, lse_layout, format or x_*");
    }
  }
  for (const char* required : {"o", "lse"}) {
    if (!f.tensors.count(required)) return DCP_ERROR(source, ": missing tensor '", required, "'");
  }
  const bool has_op = f.tensors.count("o_partial") > 0, has_lp = f.tensors.count("lse_partial") > 0;
  if (has_op != has_lp) {
    return DCP_ERROR(source, ": tensor '", has_op ? "o_partial" : "lse_partial", "' without '",
                     has_op ? "lse_partial" : "o_partial", "'; partials come as a pair");
  }
  const auto& md = f.metadata;
  const bool has_owner = f.tensors.count("owner") > 0;
  if (has_owner && md.count("interleave")) {
    return DCP_ERROR(source,
                     ": tensor 'owner' and metadata 'interleave' both given; the owner "
                     "map replaces the layout, so give one of them");
  }
  if (has_op) {
    for (const char* key : {"dcp_size", "interleave"}) {
      const bool interleave = std::string_view(key) == "interleave";
      if (!md.count(key) && !(has_owner && interleave)) {
        // An owner map says where each key lives, not how many ranks there are.
        return DCP_ERROR(source, ": partials given without metadata '", key, "'; the oracle needs ",
                         interleave ? "it (or tensor 'owner') to know each rank's keys"
                                    : "it to know how many partials there are (tensor 'owner' "
                                      "does not replace it)");
      }
    }
  }
  if (md.count("lse_base")) {
    const auto b = parse_lse_base(md.at("lse_base"));
    if (!b || *b != c.lse_base) {
      return DCP_ERROR(source, ": metadata 'lse_base' = \"", md.at("lse_base"),
                       "\"; the case's LSE base is \"", lse_base_name(c.lse_base), "\"");
    }
  }

  DcpResult r;
  const int64_t T = c.tokens(), Hq = c.q_heads(), dv = c.v_dim;
  auto n = positive_int(source, f, "dcp_size", 1);
  if (!n) return n.status();
  r.dcp_size = *n;
  auto il = positive_int(source, f, "interleave", 1);
  if (!il) return il.status();
  r.interleave = *il;
  auto sp = positive_int(source, f, "splits", 1);
  if (!sp) return sp.status();
  r.splits = *sp;
  // The merge counts its partials, N ranks of `splits` pieces and a sink, in int64.
  if (r.dcp_size > (std::numeric_limits<int64_t>::max() - 1) / r.splits) {
    return DCP_ERROR(source, ": metadata 'dcp_size' = ", r.dcp_size, " and 'splits' = ", r.splits,
                     "; expected at most 2^63 - 2 partials in all");
  }
  auto tile = positive_int(source, f, "tile", 1);
  if (!tile) return tile.status();
  // The dots' adds in this many lanes (absent: any order).
  int64_t dot_lanes = 0;
  if (md.count("dot_lanes")) {
    auto w = positive_int(source, f, "dot_lanes", 1);
    if (!w) return w.status();
    dot_lanes = *w;
  }
  // Partials merged two at a time as normalized states, at most this many merges deep (absent:
  // one merge of all of them).
  int64_t merge_depth = 0;
  if (md.count("merge_depth")) {
    auto d = positive_int(source, f, "merge_depth", 1);
    if (!d) return d.status();
    merge_depth = *d;
  }
  // The merge's form (absent: any): "scaled", a sum of exp(L_r - L) O_r that is the output.
  bool merge_scaled = false;
  if (md.count("merge_form")) {
    const std::string& form = md.at("merge_form");
    if (form != "scaled" && form != "any") {
      return DCP_ERROR(source, ": metadata 'merge_form' = \"", form,
                       "\"; expected \"scaled\" or \"any\"");
    }
    merge_scaled = form == "scaled";
  }
  if (md.count("sink_rank")) {
    const std::string& s = md.at("sink_rank");
    if (s == "merge") {
      r.sink_rank.reset();
    } else {
      auto x = parse_int(source, "sink_rank", s);
      if (!x || *x < 0 || *x >= r.dcp_size) {
        return DCP_ERROR(source, ": metadata 'sink_rank' = \"", s,
                         "\"; expected \"merge\" or a rank in [0, ", r.dcp_size, ")");
      }
      r.sink_rank = *x;
    }
  }

  if (has_owner) {
    auto own = owner_tensor(source, f.tensors.at("owner"), c.seq(), r.dcp_size);
    if (!own) return own.status();
    r.owner = std::move(*own);
  }
  auto lse_t_last = lse_layout(source, f);  // true: [Hq, T]
  if (!lse_t_last) return lse_t_last.status();

  Arithmetic a;
  a.tile = *tile;
  a.dot_lanes = dot_lanes;
  DType o_dtype, lse_dtype;
  auto o = result_tensor(source, f, "o", {T, Hq, dv}, "[T, Hq, Dv]", &o_dtype);
  if (!o) return o.status();
  r.o = std::move(*o);
  auto lse = *lse_t_last
                 ? result_tensor(source, f, "lse", {Hq, T}, "[Hq, T] (lse_layout h_t)", &lse_dtype)
                 : result_tensor(source, f, "lse", {T, Hq}, "[T, Hq]", &lse_dtype);
  if (!lse) return lse.status();
  r.lse = *lse_t_last ? heads_first_to_tokens_first(*lse, 1) : std::move(*lse);
  // "tf32": TF32 tensor cores, both operands of every product rounded to tf32, sums in f32.
  if (md.count("accum") && md.at("accum") == "tf32") {
    a.tf32 = true;
  } else if (md.count("accum")) {
    auto d = parse_format(source, "accum", md.at("accum"), Formats::with_f64);
    if (!d) return d.status();
    a.accum = *d;
  }
  // "1": results in a subnormal range may be flushed to zero (ftz); "0", the default: not.
  if (md.count("ftz")) {
    const std::string& v = md.at("ftz");
    if (v != "0" && v != "1")
      return DCP_ERROR(source, ": metadata 'ftz' = \"", v, "\"; expected \"0\" or \"1\"");
    a.ftz = v == "1";
  }
  // Tensor-core kernels feed P to the P.V product in V's format: a 16-bit KV cache implies P
  // rounded to it unless the metadata says otherwise ("none": P kept in the accumulator). An fp8
  // cache is read into q's format when q is 16-bit (V dequantized for a bf16 or f16 MMA), else
  // multiplied in fp8, P cast to V's fp8 format; an int8 cache is read into q's 16-bit format, or
  // dequantized into the fp32 accumulation (no P cast).
  const auto half = [](DType t) { return t == DType::bf16 || t == DType::f16; };
  if (half(c.kv_dtype)) a.p_cast = c.kv_dtype;
  if (is_fp8(c.kv_dtype)) a.p_cast = half(c.q_dtype) ? c.q_dtype : c.kv_dtype;
  if (c.kv_dtype == DType::i8 && half(c.q_dtype)) a.p_cast = c.q_dtype;  // int8 read into q's
  if (md.count("p_cast")) {
    if (md.at("p_cast") == "none") {
      a.p_cast.reset();
    } else {
      auto d = parse_format(source, "p_cast", md.at("p_cast"), Formats::with_fp8);
      if (!d) return d.status();
      a.p_cast = *d;
    }
  }
  if (md.count("merge_accum")) {
    auto d = parse_format(source, "merge_accum", md.at("merge_accum"), Formats::half);
    if (!d) return d.status();
    a.merge_accum = *d;
  }
  // The merge's weight sum (the merged LSE's and the denominator's), where it is not merge_accum:
  // a bf16 reduce-scatter of the outputs beside an fp32 LSE merge (docs/tolerances.md section 5).
  if (md.count("merge_lse_accum")) {
    auto d = parse_format(source, "merge_lse_accum", md.at("merge_lse_accum"), Formats::half);
    if (!d) return d.status();
    a.merge_lse_accum = *d;
  }
  // K and V dequantized into a format before the products, each element rounded once (an fp8
  // cache read into a bf16 MMA); "none" (the default): the dequantized values are exact.
  if (md.count("kv_dequant") && md.at("kv_dequant") != "none") {
    auto d = parse_format(source, "kv_dequant", md.at("kv_dequant"), Formats::half);
    if (!d) return d.status();
    a.kv_dequant = *d;
  }
  // "nearest": every add of the accumulation rounds to nearest (CPU and CUDA-core kernels); "any"
  // (the default) admits tensor cores that truncate. Only nearest roundings are the statistical
  // tier's random ones (docs/tolerances.md section 10).
  if (md.count("accum_rounding")) {
    const std::string& v = md.at("accum_rounding");
    if (v != "nearest" && v != "any")
      return DCP_ERROR(source, ": metadata 'accum_rounding' = \"", v,
                       "\"; expected \"nearest\" or \"any\"");
    a.truncating_mma = v == "any";
  }
  for (const auto& [key, field] :
       {std::pair{"exp_rel_err", &Arithmetic::exp_rel_err},
        std::pair{"exp_bias", &Arithmetic::exp_bias},
        std::pair{"log_rel_err", &Arithmetic::log_rel_err},
        std::pair{"merge_exp_rel_err", &Arithmetic::merge_exp_rel_err},
        std::pair{"rescale_exp_rel_err", &Arithmetic::rescale_exp_rel_err}}) {
    auto x = intrinsic_error(source, f, key);
    if (!x) return x.status();
    a.*field = *x;
  }
  // The partials' format: o_partial's dtype, the metadata, or o's 16-bit format (an engine
  // exchanges partials in its output dtype), else f32.
  if (md.count("partial_dtype")) {
    auto d = parse_format(source, "partial_dtype", md.at("partial_dtype"), Formats::with_fp8);
    if (!d) return d.status();
    a.partial_o = *d;
    r.partial_format_from = "metadata partial_dtype";
  } else if (!has_op) {
    const bool o_half = half(o_dtype);
    a.partial_o = o_half ? o_dtype : DType::f32;
    r.partial_format_from = o_half ? "o's dtype: no o_partial, no partial_dtype"
                                   : "f32: no o_partial, no partial_dtype";
  }
  if (has_op) {
    DType po, pl;
    auto op = result_tensor(source, f, "o_partial", {r.dcp_size, T, Hq, dv}, "[N, T, Hq, Dv]", &po);
    if (!op) return op.status();
    auto lp = *lse_t_last
                  ? result_tensor(source, f, "lse_partial", {r.dcp_size, Hq, T},
                                  "[N, Hq, T] (lse_layout h_t)", &pl)
                  : result_tensor(source, f, "lse_partial", {r.dcp_size, T, Hq}, "[N, T, Hq]", &pl);
    if (!lp) return lp.status();
    if (*lse_t_last) *lp = heads_first_to_tokens_first(*lp, r.dcp_size);
    if (md.count("partial_dtype") && po != a.partial_o) {
      return DCP_ERROR(source, ": metadata 'partial_dtype' = \"", md.at("partial_dtype"),
                       "\" but tensor 'o_partial' is ", dtype_name(po));
    }
    a.partial_o = po;
    a.partial_lse = pl;
    r.partial_format_from = "o_partial's dtype";
    r.o_partial = std::move(*op);
    r.lse_partial = std::move(*lp);
  }
  a.out = o_dtype;
  a.lse_out = lse_dtype;
  // N ranks of `splits` pieces each; a sink added at the merge is one more term of its sum.
  a.shards = r.dcp_size * r.splits + (!r.sink_rank && c.has_sink() ? 1 : 0);
  // Each rank's keys are one partial unless split-KV splits them further.
  if (r.splits == 1 && a.shards > 1) a.layout = Ownership{r.dcp_size, r.interleave, r.owner};
  a.merge_depth = merge_depth;
  a.merge_scaled = merge_scaled;
  r.output_claim = a;
  a.merge_depth = 0;  // split-KV pieces merge inside a rank as one merge
  a.merge_scaled = false;
  a.layout.reset();
  a.shards = r.splits;
  a.out = a.partial_o;
  a.lse_out = a.partial_lse;
  r.partial_claim = a;
  return r;
}

Expected<DcpResult> load_result(const std::string& path, const Case& c) {
  auto f = read_safetensors(path);
  if (!f) return f.status();
  return result_from_file(*f, c, path);
}

StFile result_to_file(const DcpResult& r, const Case& c) {
  StFile f;
  const Arithmetic& a = r.output_claim;
  f.tensors["o"] = StTensor{a.out, r.o.shape, r.o.data, {}};
  f.tensors["lse"] = StTensor{a.lse_out, r.lse.shape, r.lse.data, {}};
  if (r.o_partial && r.lse_partial) {
    f.tensors["o_partial"] = StTensor{a.partial_o, r.o_partial->shape, r.o_partial->data, {}};
    f.tensors["lse_partial"] =
        StTensor{a.partial_lse, r.lse_partial->shape, r.lse_partial->data, {}};
  } else {
    f.metadata["partial_dtype"] = format_text(a.partial_o);
  }
  f.metadata["accum"] = a.tf32 ? "tf32" : format_text(a.accum);
  f.metadata["ftz"] = a.ftz ? "1" : "0";
  f.metadata["p_cast"] = a.p_cast ? format_text(*a.p_cast) : "none";
  f.metadata["merge_accum"] = format_text(a.merge_accum);
  if (a.merge_lse_accum) f.metadata["merge_lse_accum"] = format_text(*a.merge_lse_accum);
  if (a.kv_dequant) f.metadata["kv_dequant"] = format_text(*a.kv_dequant);
  f.metadata["dcp_size"] = std::to_string(r.dcp_size);
  if (r.owner.empty()) {
    f.metadata["interleave"] = std::to_string(r.interleave);
  } else {
    f.tensors["owner"] = StTensor{DType::i64, {static_cast<int64_t>(r.owner.size())}, {}, r.owner};
  }
  f.metadata["splits"] = std::to_string(r.splits);
  f.metadata["sink_rank"] = r.sink_rank ? std::to_string(*r.sink_rank) : "merge";
  f.metadata["lse_base"] = std::string(lse_base_name(c.lse_base));
  f.metadata["tile"] = std::to_string(a.tile);
  if (a.dot_lanes > 0) f.metadata["dot_lanes"] = std::to_string(a.dot_lanes);
  f.metadata["accum_rounding"] = a.truncating_mma ? "any" : "nearest";
  if (a.exp_rel_err) f.metadata["exp_rel_err"] = number_text(*a.exp_rel_err);
  if (a.exp_bias) f.metadata["exp_bias"] = number_text(*a.exp_bias);
  if (a.merge_exp_rel_err) f.metadata["merge_exp_rel_err"] = number_text(*a.merge_exp_rel_err);
  if (a.merge_depth > 0) f.metadata["merge_depth"] = std::to_string(a.merge_depth);
  if (a.merge_scaled) f.metadata["merge_form"] = "scaled";
  if (a.rescale_exp_rel_err)
    f.metadata["rescale_exp_rel_err"] = number_text(*a.rescale_exp_rel_err);
  if (a.log_rel_err) f.metadata["log_rel_err"] = number_text(*a.log_rel_err);
  return f;
}

StFile case_to_file(const Case& c) {
  StFile f;
  f.tensors["q"] = StTensor{c.q_dtype, c.q.shape, c.q.data, {}};
  // Keys and values as stored: their bytes, or the doubles divided by their scale (exact,
  // case.hpp).
  auto stored = [](const KvTensor& t, DType dtype, auto scale_at) {
    if (t.is_stored())
      return StTensor::in_place(dtype, t.shape, t.stored_bytes(), t.stored_owner());
    std::vector<double> out = t.data;
    for (int64_t i = 0; i < t.numel(); ++i) out[i] /= scale_at(i);
    return StTensor{dtype, t.shape, std::move(out), {}};
  };
  f.tensors["k"] = stored(c.k, c.kv_dtype, [&](int64_t i) { return c.k_scale_at(i); });
  if (!c.shared_latent())
    f.tensors["v"] = stored(c.v, c.kv_dtype, [&](int64_t i) { return c.v_scale_at(i); });
  // A scale by token as [S, 1] or [S, Hkv] (its rank says its grain), else [1] or [Hkv].
  const auto scale_shape = [&c](const std::vector<double>& s) -> Shape {
    const auto n = static_cast<int64_t>(s.size());
    if (c.kv_scale_grain == ScaleGrain::head) return {n};
    return {c.seq(), n == c.seq() ? 1 : c.kv_heads()};
  };
  if (!c.k_scale.empty())
    f.tensors["k_scale"] = StTensor{DType::f32, scale_shape(c.k_scale), c.k_scale, {}};
  if (!c.v_scale.empty())
    f.tensors["v_scale"] = StTensor{DType::f32, scale_shape(c.v_scale), c.v_scale, {}};
  if (!c.q_pos.empty()) {
    f.tensors["q_pos"] = StTensor{DType::i64, {static_cast<int64_t>(c.q_pos.size())}, {}, c.q_pos};
  }
  for (const HeadVector& hv : kHeadVectors) {
    const std::vector<double>& x = c.*hv.values;
    if (!x.empty())
      f.tensors[hv.name] = StTensor{DType::f32, {static_cast<int64_t>(x.size())}, x, {}};
  }
  if (c.has_topk()) f.tensors["topk"] = StTensor{DType::i64, c.topk.shape, {}, c.topk.data};
  f.metadata["v_dim"] = std::to_string(c.v_dim);
  f.metadata["causal"] = c.causal ? "1" : "0";
  f.metadata["lse_base"] = std::string(lse_base_name(c.lse_base));
  if (c.scale) f.metadata["scale"] = number_text(*c.scale);
  if (c.window > 0) f.metadata["window"] = std::to_string(c.window);
  if (c.softcap > 0.0) f.metadata["softcap"] = number_text(c.softcap);
  return f;
}

Status save_case(const std::string& path, const Case& c) {
  return write_safetensors(path, case_to_file(c));
}

StFile attention_to_file(const Attention& a) {
  StFile f;
  f.tensors["o"] = StTensor{DType::f64, a.o.shape, a.o.data, {}};
  f.tensors["lse"] = StTensor{DType::f64, a.lse.shape, a.lse.data, {}};
  f.metadata["lse_base"] = std::string(lse_base_name(a.base));
  // Read as a result (`dcp-verify check`), the reference claims what it is: fp64 throughout.
  f.metadata["accum"] = "f64";
  f.metadata["p_cast"] = "none";
  return f;
}

Status save_attention(const std::string& path, const Attention& a) {
  return write_safetensors(path, attention_to_file(a));
}

}  // namespace dcp::oracle
