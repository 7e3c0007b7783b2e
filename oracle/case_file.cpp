#include "oracle/case_file.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

namespace dcp::oracle {
namespace {

const std::set<std::string> kTensors = {"q", "k", "v", "q_pos", "sink", "topk"};
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

Expected<int64_t> parse_int(std::string_view source, const std::string& key,
                            const std::string& text) {
  int64_t x = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return DCP_ERROR(source, ": metadata '", key, "' = \"", text, "\"; expected an integer");
  }
  return x;
}

Expected<Tensor<double>> float_tensor(std::string_view source, const StFile& f,
                                      const std::string& name, DType* dtype) {
  const StTensor& t = f.tensors.at(name);
  if (t.dtype == DType::i64) {
    return DCP_ERROR(source, ": tensor '", name, "': dtype I64; expected F32, F16 or BF16");
  }
  if (t.dtype == DType::f64) {
    return DCP_ERROR(source, ": tensor '", name,
                     "': dtype F64; inputs are F32, F16 or BF16 (the oracle takes their values "
                     "as exact)");
  }
  *dtype = t.dtype;
  Tensor<double> out;
  out.shape = t.shape;
  out.data = t.values;
  return out;
}

}  // namespace

Expected<Case> case_from_file(const StFile& f, std::string_view source) {
  for (const auto& [name, t] : f.tensors) {
    if (!kTensors.count(name)) {
      return DCP_ERROR(source, ": unknown tensor '", name,
                       "'; a case holds q, k, v, q_pos, sink, topk");
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
  auto k = float_tensor(source, f, "k", &c.kv_dtype);
  if (!k) return k.status();
  c.k = std::move(*k);
  if (f.tensors.count("v")) {
    DType vd;
    auto v = float_tensor(source, f, "v", &vd);
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
  if (f.tensors.count("sink")) {
    const StTensor& t = f.tensors.at("sink");
    if (t.dtype != DType::f32 || t.shape.size() != 1) {
      return DCP_ERROR(source, ": tensor 'sink': ", dtype_name(t.dtype), " ", shape_string(t.shape),
                       "; expected F32 [Hq]");
    }
    c.sink = t.values;
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
  const Status st = validate(c);
  if (!st) return Status::error(std::string(source) + ": " + st.message(), __FILE__, __LINE__);
  return c;
}

Expected<Case> load_case(const std::string& path) {
  auto f = read_safetensors(path);
  if (!f) return f.status();
  return case_from_file(*f, path);
}

namespace {
std::string number_text(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);  // shortest round-trip form
  return std::string(buf, r.ptr);
}
}  // namespace

StFile case_to_file(const Case& c) {
  StFile f;
  f.tensors["q"] = StTensor{c.q_dtype, c.q.shape, c.q.data, {}};
  f.tensors["k"] = StTensor{c.kv_dtype, c.k.shape, c.k.data, {}};
  if (!c.shared_latent()) f.tensors["v"] = StTensor{c.kv_dtype, c.v.shape, c.v.data, {}};
  if (!c.q_pos.empty()) {
    f.tensors["q_pos"] = StTensor{DType::i64, {static_cast<int64_t>(c.q_pos.size())}, {}, c.q_pos};
  }
  if (c.has_sink()) {
    f.tensors["sink"] = StTensor{DType::f32, {static_cast<int64_t>(c.sink.size())}, c.sink, {}};
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
  return f;
}

Status save_attention(const std::string& path, const Attention& a) {
  return write_safetensors(path, attention_to_file(a));
}

}  // namespace dcp::oracle
