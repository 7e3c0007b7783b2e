#include "oracle/case.hpp"

#include <algorithm>
#include <cmath>
#include <span>

namespace dcp::oracle {
namespace {

// Every element of `data` (shape [rows, heads, width]) finite and, divided by its row's scale
// (`scales`: none, or of `grain`: kv_tensor.hpp), a value of dtype.
Status check_values(const Shape& shape, std::span<const double> data, const char* name, DType dtype,
                    const std::vector<double>& scales, ScaleGrain grain = ScaleGrain::head) {
  const int64_t width = shape.size() == 3 ? shape[2] : 1, heads = shape.size() == 3 ? shape[1] : 1;
  const int64_t rows = shape.empty() ? 1 : shape[0];
  for (size_t i = 0; i < data.size(); ++i) {
    const double x = data[i];
    if (!std::isfinite(x)) {
      return DCP_ERROR("tensor '", name, "': element ", i, " is ", x, "; inputs must be finite");
    }
    if (scales.empty()) {
      if (!representable(dtype, x))
        return DCP_ERROR("tensor '", name, "': element ", i, " = ", x, " is not a ",
                         dtype_name(dtype), " value");
      continue;
    }
    const int64_t r = static_cast<int64_t>(i) / width;
    const double scale =
        scales[scale_index(grain, scales.size(), r / heads, r % heads, rows, heads)];
    // x / scale is exact when x is a stored value times the scale; the product checks it is.
    if (!representable(dtype, x / scale) || (x / scale) * scale != x) {
      return DCP_ERROR("tensor '", name, "': element ", i, " = ", x, " is not a ",
                       dtype_name(dtype), " value times its scale");
    }
  }
  return {};
}

// Keys or values: as doubles, check_values; as stored, in kv_dtype (so each is a value of it times
// the scale, exactly) and finite.
Status check_kv(const KvTensor& t, const char* name, DType dtype, const std::vector<double>& scales,
                ScaleGrain grain) {
  if (!t.is_stored()) {
    if (static_cast<int64_t>(t.data.size()) != t.numel()) {
      return DCP_ERROR("tensor '", name, "': holds ", t.data.size(), " values; its shape ",
                       shape_string(t.shape), " needs ", t.numel());
    }
    return check_values(t.shape, t.data, name, dtype, scales, grain);
  }
  if (t.stored_dtype() != dtype) {
    return DCP_ERROR("tensor '", name, "': stored as ", dtype_name(t.stored_dtype()),
                     "; expected the case's kv dtype ", dtype_name(dtype));
  }
  const int64_t i = first_nonfinite(t.stored_dtype(), t.stored_bytes(), t.numel());
  if (i >= 0) {
    double x;
    widen_stored(t.stored_dtype(), t.stored_bytes() + i * dtype_bytes(dtype), 1, 1.0, &x);
    return DCP_ERROR("tensor '", name, "': element ", i, " is ", x, "; inputs must be finite");
  }
  return {};
}

// A dequantization scale of its grain (kv_tensor.hpp), finite fp32 values > 0.
Status check_scale(const std::vector<double>& s, const char* name, ScaleGrain grain, int64_t S,
                   int64_t Hkv) {
  if (s.empty()) return {};
  const auto n = static_cast<int64_t>(s.size());
  if (grain == ScaleGrain::head && n != 1 && n != Hkv) {
    return DCP_ERROR("tensor '", name, "': ", n, " values; expected 1 (per tensor) or Hkv = ", Hkv,
                     " (per KV head)");
  }
  if (grain == ScaleGrain::token && n != S && n != S * Hkv) {
    return DCP_ERROR("tensor '", name, "': ", n, " values by token; expected S = ", S,
                     " (per token) or S x Hkv = ", S * Hkv, " (per token and KV head)");
  }
  for (size_t g = 0; g < s.size(); ++g) {
    if (!(std::isfinite(s[g]) && s[g] > 0.0) || !representable(DType::f32, s[g])) {
      return DCP_ERROR("tensor '", name, "': element ", g, " = ", s[g],
                       "; expected a finite F32 value > 0");
    }
  }
  return {};
}

// F64 inputs are for cases the oracle derives itself (the decompressed MLA slice); case files
// still take F32, F16 or BF16 only (case_file.cpp). K and V may also hold a quantized cache's
// codes (I8).
bool is_input_float(DType t) { return is_float(t); }

}  // namespace

Status validate(const Case& c) {
  if (c.q.rank() != 3) {
    return DCP_ERROR("tensor 'q': expected 3 dimensions [T, Hq, Dk], got ",
                     shape_string(c.q.shape));
  }
  if (c.k.rank() != 3) {
    return DCP_ERROR("tensor 'k': expected 3 dimensions [S, Hkv, Dk], got ",
                     shape_string(c.k.shape));
  }
  const int64_t T = c.q.dim(0), Hq = c.q.dim(1), Dk = c.q.dim(2);
  const int64_t S = c.k.dim(0), Hkv = c.k.dim(1);
  if (T < 1) return DCP_ERROR("tensor 'q': T = ", T, "; expected at least one query token");
  if (Hq < 1 || Dk < 1)
    return DCP_ERROR("tensor 'q': shape ", shape_string(c.q.shape), " has an empty dimension");
  if (Hkv < 1) return DCP_ERROR("tensor 'k': Hkv = ", Hkv, "; expected at least 1");
  if (c.k.dim(2) != Dk) {
    return DCP_ERROR("tensor 'k': head dim ", c.k.dim(2), " != q's head dim ", Dk);
  }
  if (Hq % Hkv != 0) {
    return DCP_ERROR("tensor 'k': Hq = ", Hq, " is not a multiple of Hkv = ", Hkv);
  }
  if (!is_input_float(c.q_dtype)) {
    return DCP_ERROR("tensor 'q': dtype ", dtype_name(c.q_dtype), "; expected ",
                     float_dtype_names());
  }
  if (!is_input_float(c.kv_dtype) && !is_quantized(c.kv_dtype)) {
    return DCP_ERROR("tensor 'k': dtype ", dtype_name(c.kv_dtype), "; expected ", kv_dtype_names());
  }
  DCP_TRY(check_scale(c.k_scale, "k_scale", c.kv_scale_grain, S, Hkv));
  DCP_TRY(check_scale(c.v_scale, "v_scale", c.kv_scale_grain, S, Hkv));
  if (c.kv_scale_grain == ScaleGrain::token && !c.k_scale.empty() && !c.v_scale.empty() &&
      c.v_scale.size() != c.k_scale.size()) {
    return DCP_ERROR("tensor 'v_scale': ", c.v_scale.size(),
                     " values by token; expected k_scale's ", c.k_scale.size(),
                     " (both per token, or both per token and KV head)");
  }
  if (c.shared_latent() && !c.v_scale.empty()) {
    return DCP_ERROR(
        "tensor 'v_scale': given for a shared latent, whose V is K (k_scale scales "
        "both)");
  }
  if (c.shared_latent()) {
    if (c.v_dim < 1 || c.v_dim > Dk) {
      return DCP_ERROR("metadata 'v_dim': ", c.v_dim, " for a shared latent; expected 1..", Dk,
                       " (V is the first v_dim components of k)");
    }
  } else {
    if (c.v.rank() != 3 || c.v.dim(0) != S || c.v.dim(1) != Hkv) {
      return DCP_ERROR("tensor 'v': shape ", shape_string(c.v.shape), "; expected [", S, ", ", Hkv,
                       ", Dv]");
    }
    if (c.v.dim(2) < 1) return DCP_ERROR("tensor 'v': Dv = 0; expected at least 1");
    if (c.v_dim != c.v.dim(2)) {
      return DCP_ERROR("metadata 'v_dim': ", c.v_dim, " != v's last dimension ", c.v.dim(2));
    }
  }
  DCP_TRY(check_values(c.q.shape, c.q.data, "q", c.q_dtype, {}));
  DCP_TRY(check_kv(c.k, "k", c.kv_dtype, c.k_scale, c.kv_scale_grain));
  if (!c.shared_latent()) DCP_TRY(check_kv(c.v, "v", c.kv_dtype, c.v_scale, c.kv_scale_grain));

  if (!c.q_pos.empty()) {
    if (static_cast<int64_t>(c.q_pos.size()) != T) {
      return DCP_ERROR("tensor 'q_pos': ", c.q_pos.size(), " positions; expected T = ", T);
    }
    for (int64_t t = 0; t < T; ++t) {
      if (c.q_pos[t] < 0) {
        return DCP_ERROR("tensor 'q_pos': element ", t, " = ", c.q_pos[t],
                         "; positions must be >= 0");
      }
    }
  } else if (S < T) {
    // The default positions S-T .. S-1 would be negative.
    return DCP_ERROR("tensor 'q_pos': absent, and the default S-T..S-1 is negative (S = ", S,
                     ", T = ", T, "); give q_pos");
  }
  if (c.scale && !(std::isfinite(*c.scale) && *c.scale > 0.0)) {
    return DCP_ERROR("metadata 'scale': ", *c.scale, "; expected a finite value > 0");
  }
  if (c.window < 0) return DCP_ERROR("metadata 'window': ", c.window, "; expected >= 0");
  if (!(std::isfinite(c.softcap) && c.softcap >= 0.0)) {
    return DCP_ERROR("metadata 'softcap': ", c.softcap, "; expected a finite value >= 0");
  }
  // The largest distance between a query and a key, max over queries of max(i, S - 1 - i) (0
  // without keys).
  double distance = 0.0;
  for (int64_t t = 0; t < T && S > 0; ++t) {
    const double i = static_cast<double>(c.query_pos(t));
    distance = std::max({distance, i, static_cast<double>(S - 1) - i});
  }
  constexpr double kMaxRate = 0.5 * 3.4028234663852886e38;  // half of fp32's largest finite
  for (const HeadVector& hv : kHeadVectors) {
    const std::vector<double>& x = c.*hv.values;
    if (x.empty()) continue;
    if (static_cast<int64_t>(x.size()) != Hq) {
      return DCP_ERROR("tensor '", hv.name, "': ", x.size(), " values; expected Hq = ", Hq);
    }
    for (int64_t h = 0; h < Hq; ++h) {
      if (!std::isfinite(x[h])) {
        return DCP_ERROR("tensor '", hv.name, "': element ", h, " is ", x[h], "; expected finite");
      }
      if (!representable(DType::f32, x[h])) {
        return DCP_ERROR("tensor '", hv.name, "': element ", h, " = ", x[h],
                         " is not an F32 value");
      }
      if (hv.per_position && distance > 0.0 && std::fabs(x[h]) * distance > kMaxRate) {
        return DCP_ERROR("tensor '", hv.name, "': element ", h, " = ", x[h],
                         " times distances up to ", distance,
                         " leaves fp32's range; expected |value| <= ", kMaxRate / distance);
      }
    }
  }
  if (c.has_topk()) {
    if (c.topk.rank() != 2 || c.topk.dim(0) != T) {
      return DCP_ERROR("tensor 'topk': shape ", shape_string(c.topk.shape), "; expected [", T,
                       ", K]");
    }
    const int64_t K = c.topk.dim(1);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> seen;
      for (int64_t x = 0; x < K; ++x) {
        const int64_t j = c.topk.at({t, x});
        if (j == -1) continue;
        if (j < 0 || j >= S) {
          return DCP_ERROR("tensor 'topk': element [", t, ", ", x, "] = ", j,
                           "; expected a key position in [0, ", S, ") or -1 for padding");
        }
        seen.push_back(j);
      }
      std::sort(seen.begin(), seen.end());
      const auto dup = std::adjacent_find(seen.begin(), seen.end());
      if (dup != seen.end()) {
        return DCP_ERROR("tensor 'topk': row ", t, " selects key ", *dup,
                         " twice; a selection is a set");
      }
    }
  }
  return {};
}

std::vector<int64_t> visible_keys(const Case& c, int64_t t) {
  const int64_t S = c.seq();
  const int64_t p = c.query_pos(t);
  auto visible = [&](int64_t j) {
    if (j < 0 || j >= S) return false;
    if (c.causal && j > p) return false;
    if (c.window > 0 && j <= p - c.window) return false;
    return true;
  };
  std::vector<int64_t> keys;
  if (c.has_topk()) {
    for (int64_t x = 0; x < c.topk.dim(1); ++x) {
      const int64_t j = c.topk.at({t, x});
      if (j != -1 && visible(j)) keys.push_back(j);
    }
    std::sort(keys.begin(), keys.end());
  } else {
    for (int64_t j = 0; j < S; ++j) {
      if (visible(j)) keys.push_back(j);
    }
  }
  return keys;
}

}  // namespace dcp::oracle
