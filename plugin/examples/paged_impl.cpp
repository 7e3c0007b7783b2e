// paged_impl.cpp — a complete version-4 dcp-verify plug-in (include/dcp_verify/impl.h): a paged
// decode kernel, called as an engine calls one, judged by `dcp-verify properties --impl
// ./libdcpv_paged_example.so`.
//
//   paged   per request, token and head: the rank's rows read through the request's block table
//           from the pool (vLLM's layout, [pages, page_size, kv_heads, D]) in its storage format,
//           each element dequantized here (fp8 and 16-bit formats decoded, times its k_scale or
//           v_scale: its KV head's, its slot's by token, or its page's by page), each row's
//           position derived from
//           the DCP layout (row r of rank k: floor(r / I) I N + k I + r mod I) for the masks and
//           ALiBi's bias, scores in fp32, a two-pass softmax, O = sum w v / sum w and
//           LSE = max + log(sum w)
//
// It provides no combine: the production path merges. Built three times by CMake:
// libdcpv_paged_example.so; libdcpv_paged_example_bug.so with DCPV_PAGED_BUG, which plants a bug
// engines have shipped, named by the environment variable DCPV_PAGED_BUG: k_scale_twice (the
// default; fp8 paths: the K scale once folded into the softmax scale and once in the
// dequantization) or alibi_local (ALiBi's bias on the rank-local row instead of the token's
// position: DCP's local-index bug class); and libdcpv_paged_example_bad.so with DCPV_PAGED_BAD,
// which hands the loader a field out of range, named by the environment variable DCPV_PAGED_BAD
// (layout, dequant, lacks, lacks_v2: a version-3 bit in a version-2 plug-in, version, both: a
// partial level beside paged, null: no implementation; or in range: no_softcap, saying it lacks
// the soft-cap, v2: the same kernel as version 2, which knows no ALiBi and no scales by token,
// v3: as version 3, which knows no scales by page).
// The ctest plugin.* tests prove the first passes the property suite (fp8 caches, scales by
// token and by page, ALiBi and decode batches included), the second is caught with a shrunk
// case, and the third is refused in one line.
#include <dcp_verify/impl.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t offset(const dcpv_dltensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0, d = 0;
  for (const int64_t i : idx) off += i * t.strides[d++];
  return off;
}

// An fp8 code's value: `mantissa` bits, exponent bias `bias`; E4M3FN has no infinity (S.1111.111
// is NaN), E5M2 is IEEE-like.
float fp8_value(uint8_t code, int mantissa, int bias, bool e4m3fn) {
  const int exp_bits = 7 - mantissa;
  const int e = (code >> mantissa) & ((1 << exp_bits) - 1), m = code & ((1 << mantissa) - 1);
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const int top = (1 << exp_bits) - 1;
  if (e4m3fn && e == top && m == (1 << mantissa) - 1)
    return std::numeric_limits<float>::quiet_NaN();
  if (!e4m3fn && e == top)
    return m == 0 ? sign * std::numeric_limits<float>::infinity()
                  : std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), 1 - bias - mantissa);
  return sign * std::ldexp(static_cast<float>(m | (1 << mantissa)), e - bias - mantissa);
}

// Whether this plug-in reads a pool of t's dtype: the formats of ABI version 2 as released (a
// later one, handed over only where --kv-dtypes names it, is refused by name instead).
bool readable(const dcpv_dltensor& t) {
  const uint8_t code = t.dtype.code, bits = t.dtype.bits;
  return (code == DCPV_DL_FLOAT && (bits == 32 || bits == 16)) ||
         (code == DCPV_DL_BFLOAT && bits == 16) || code == DCPV_DL_FLOAT8_E4M3FN ||
         code == DCPV_DL_FLOAT8_E5M2 || (code == DCPV_DL_INT && bits == 8);
}

// Element `off` of a tensor of any of the pool's storage formats, as a float.
float stored(const dcpv_dltensor& t, int64_t off) {
  const uint8_t code = t.dtype.code;
  if (code == DCPV_DL_FLOAT && t.dtype.bits == 32) return static_cast<const float*>(t.data)[off];
  if (code == DCPV_DL_FLOAT8_E4M3FN)
    return fp8_value(static_cast<const uint8_t*>(t.data)[off], 3, 7, true);
  if (code == DCPV_DL_FLOAT8_E5M2)
    return fp8_value(static_cast<const uint8_t*>(t.data)[off], 2, 15, false);
  if (code == DCPV_DL_INT && t.dtype.bits == 8)  // an int8 code
    return static_cast<float>(static_cast<const int8_t*>(t.data)[off]);
  const uint16_t h = static_cast<const uint16_t*>(t.data)[off];
  if (code == DCPV_DL_BFLOAT) {
    const uint32_t b = static_cast<uint32_t>(h) << 16;
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
  }
  const int e = (h >> 10) & 0x1f, f = h & 0x3ff;  // IEEE binary16
  const float mag = e == 0    ? std::ldexp(static_cast<float>(f), -24)
                    : e == 31 ? (f ? std::numeric_limits<float>::quiet_NaN()
                                   : std::numeric_limits<float>::infinity())
                              : std::ldexp(static_cast<float>(f | 0x400), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

float f32(const dcpv_dltensor& t, std::initializer_list<int64_t> idx) {
  return static_cast<const float*>(t.data)[offset(t, idx)];
}
int64_t i64(const dcpv_dltensor& t, std::initializer_list<int64_t> idx) {
  return static_cast<const int64_t*>(t.data)[offset(t, idx)];
}
int32_t i32(const dcpv_dltensor& t, std::initializer_list<int64_t> idx) {
  return static_cast<const int32_t*>(t.data)[offset(t, idx)];
}
float& out(const dcpv_dltensor& t, std::initializer_list<int64_t> idx) {
  return static_cast<float*>(t.data)[offset(t, idx)];
}

// The scale of KV head g of the token in (page, slot), of the arguments' scale_grain: by head
// [kv_heads]; by token [pages, page_size] or by token and head [pages, page_size, kv_heads]; by
// page [pages, 1] or [pages, kv_heads]; absent: 1.
float scale_at(const dcpv_paged_args& a, const dcpv_dltensor& scale, int64_t page, int64_t slot,
               int64_t g) {
  if (scale.data == nullptr) return 1.0f;
  if (a.scale_grain == DCPV_SCALES_BY_HEAD) return f32(scale, {g});
  if (a.scale_grain == DCPV_SCALES_BY_PAGE) return f32(scale, {page, scale.shape[1] == 1 ? 0 : g});
  if (scale.ndim == 2) return f32(scale, {page, slot});
  return f32(scale, {page, slot, g});
}

// Component i of KV head g of request b's row r, dequantized: the pool's element times its scale.
float cached(const dcpv_paged_args& a, const dcpv_dltensor& pool, const dcpv_dltensor& scale,
             int64_t b, int64_t r, int64_t g, int64_t i) {
  const int64_t page = i32(a.block_table, {b, r / a.page_size}), slot = r % a.page_size;
  return stored(pool, offset(pool, {page, slot, g, i})) * scale_at(a, scale, page, slot, g);
}

#ifdef DCPV_PAGED_BUG
// Which planted bug (the environment's DCPV_PAGED_BUG, read once): true for ALiBi on the local
// row.
bool alibi_local_bug() {
  static const bool local = [] {
    const char* which = std::getenv("DCPV_PAGED_BUG");
    return which != nullptr && std::string(which) == "alibi_local";
  }();
  return local;
}
#endif

int paged(void*, const dcpv_paged_args* args, char* err, size_t err_len) {
  const dcpv_paged_args& a = *args;
  if (a.page_layout != DCPV_PAGES_NHD || a.k_cache.device.device_type != DCPV_DL_CPU) {
    std::snprintf(err, err_len, "expected an NHD pool in host memory");
    return 1;
  }
  if (!readable(a.k_cache) || (a.v_cache.data && !readable(a.v_cache))) {
    std::snprintf(err, err_len,
                  "k_cache: DLPack dtype code %d, %d bits, is not a format this "
                  "plug-in reads",
                  a.k_cache.dtype.code, a.k_cache.dtype.bits);
    return 1;
  }
  const int64_t group = a.q_heads_total / a.kv_heads_total, N = a.ranks, I = a.interleave;
  const float units = a.lse_base == 0 ? 1.0f : kLog2e;
  const auto pow_base = [&](float x) { return a.lse_base == 0 ? std::exp(x) : std::exp2(x); };
  const auto log_base = [&](float x) { return a.lse_base == 0 ? std::log(x) : std::log2(x); };
  for (int64_t b = 0; b < a.requests; ++b) {
    const int64_t n = i32(a.local_seq_lens, {b});
    std::vector<float> w(static_cast<size_t>(n));
    std::vector<char> use(static_cast<size_t>(n));
    for (int64_t t = i32(a.query_start_loc, {b}); t < i32(a.query_start_loc, {b + 1}); ++t) {
      const int64_t qp = i64(a.q_pos, {t});
      for (int64_t h = 0; h < a.heads; ++h) {
        const int64_t g = (a.head0 + h) / group - a.kv_head0;
        float m = kNegInf;
        for (int64_t r = 0; r < n; ++r) {
          const int64_t kp = r / I * I * N + a.rank * I + r % I;
          bool seen = (!a.causal || kp <= qp) && (a.window <= 0 || kp > qp - a.window);
          if (seen && a.topk.data != nullptr) {
            seen = false;
            for (int64_t x = 0; x < a.topk.shape[1]; ++x) seen = seen || i64(a.topk, {t, x}) == kp;
          }
          use[static_cast<size_t>(r)] = seen;
          if (!seen) continue;
          float dot = 0.0f;
          for (int64_t i = 0; i < a.head_dim; ++i)
            dot += f32(a.q, {t, h, i}) * cached(a, a.k_cache, a.k_scale, b, r, g, i);
          int64_t bias_pos = kp;  // ALiBi's distance is between positions
#ifdef DCPV_PAGED_BUG
          if (alibi_local_bug()) {
            bias_pos = r;                          // the rank-local row instead
          } else if (a.k_scale.data != nullptr) {  // the K scale a second time
            dot *= scale_at(a, a.k_scale, i32(a.block_table, {b, r / a.page_size}), r % a.page_size,
                            g);
          }
#endif
          float sc = dot * a.scale;
          if (a.softcap > 0.0f) sc = a.softcap * std::tanh(sc / a.softcap);
          if (a.alibi_slopes.data != nullptr)
            sc -= f32(a.alibi_slopes, {h}) * static_cast<float>(std::llabs(bias_pos - qp));
          w[static_cast<size_t>(r)] = sc * units;
          m = std::fmax(m, sc * units);
        }
        const float sink = a.sink.data != nullptr ? f32(a.sink, {h}) * units : kNegInf;
        m = std::fmax(m, sink);
        if (m == kNegInf) {  // nothing visible and no sink
          for (int64_t i = 0; i < a.v_dim; ++i) out(a.o, {t, h, i}) = 0.0f;
          out(a.lse, {t, h}) = kNegInf;
          continue;
        }
        float z = sink == kNegInf ? 0.0f : pow_base(sink - m);
        for (int64_t r = 0; r < n; ++r)
          if (use[static_cast<size_t>(r)])
            z += w[static_cast<size_t>(r)] = pow_base(w[static_cast<size_t>(r)] - m);
        for (int64_t i = 0; i < a.v_dim; ++i) {
          float num = 0.0f;
          for (int64_t r = 0; r < n; ++r) {
            if (!use[static_cast<size_t>(r)]) continue;
            // A shared latent's V is K's first v_dim components, scaled by k_scale.
            const float v = a.shared_latent ? cached(a, a.k_cache, a.k_scale, b, r, g, i)
                                            : cached(a, a.v_cache, a.v_scale, b, r, g, i);
            num += w[static_cast<size_t>(r)] * v;
          }
          out(a.o, {t, h, i}) = num / z;
        }
        out(a.lse, {t, h}) = m + log_base(z);
      }
    }
  }
  return 0;
}

// fp32 adds on a CPU round to nearest; the math library's exp and log; a two-pass softmax (any
// tiling); each element dequantized into fp32 (DCPV_F32).
const dcpv_impl_v2 kImpl = {
    DCPV_ABI_VERSION_4,
#ifdef DCPV_PAGED_BUG
    "paged example (K scale applied twice)",
#else
    "paged example",
#endif
    dcpv_claim{1, 0, 0, 0.0, 0.0, DCPV_F32, 1, 1, DCPV_F32, DCPV_F32},
    DCPV_F32,
    0,
    DCPV_PAGES_NHD,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    paged,
};

#ifdef DCPV_PAGED_BAD
int unused_partial(void*, const dcpv_partial_args*, char*, size_t) { return 1; }
#endif

}  // namespace

extern "C" const dcpv_impl_v2* dcpv_get_impl_v2(void) {
#if defined(DCPV_PAGED_BUG)
  static dcpv_impl_v2 planted = kImpl;
  if (alibi_local_bug()) planted.name = "paged example (ALiBi on the local row)";
  return &planted;
#elif defined(DCPV_PAGED_BAD)
  static dcpv_impl_v2 bad = kImpl;
  const char* what = std::getenv("DCPV_PAGED_BAD");
  const std::string field = what != nullptr ? what : "layout";
  if (field == "null") return nullptr;
  if (field == "layout") bad.page_layout = 7;
  if (field == "dequant") bad.kv_dequant = DCPV_I64;
  if (field == "lacks") bad.lacks = 1u << 20;
  if (field == "lacks_v2") bad.abi_version = DCPV_ABI_VERSION_2, bad.lacks = DCPV_LACKS_ALIBI;
  if (field == "v2") bad.abi_version = DCPV_ABI_VERSION_2;  // in range: knows neither
  if (field == "v3") bad.abi_version = DCPV_ABI_VERSION_3;  // in range: no scales by page
  if (field == "version") bad.abi_version = 5;
  if (field == "both") bad.partial = unused_partial;
  if (field == "no_softcap") bad.lacks = DCPV_LACKS_SOFTCAP;  // in range: a feature it lacks
  return &bad;
#else
  return &kImpl;
#endif
}
