// example_impl.cpp — a complete dcp-verify plug-in (include/dcp_verify/impl.h): a small fp32 DCP
// implementation of both levels, written the way a team's own kernel library would wrap its
// kernels, and judged by `dcp-verify properties --impl ./libdcpv_example.so`.
//
//   partial   per (token, head): the rank's visible tokens (causal, window and top-k masks on
//             global positions), scores in fp32, a two-pass softmax (max, then the sum of
//             exponentials), O = sum w v / sum w and LSE = max + log(sum w) in the kernel's base
//   combine   per (token, head): the max-shifted LSE merge of the N partials
//   step      the whole step: every rank's partial over the tokens it owns (copied out of the
//             model-wide cache, as a rank holds them), then their merge, head by head
//
// Built three times by CMake: libdcpv_example.so; libdcpv_example_bug.so with DCPV_EXAMPLE_BUG
// defined, which plants a bug engines have shipped: the causal mask compares strictly (key pos <
// query pos), so every query loses its own token; and libdcpv_example_fails.so, whose partial
// level reports an error, as a failed kernel launch would, and whose step level never returns.
// The ctest plugin.* tests prove the first passes the property suite, the second is caught with
// a shrunk case, and the third's rows fail with its message and no err/bound, and its hung step
// ends the process after --timeout.
#include <dcp_verify/impl.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace {

// log2(e), the factor a base-2 kernel scales natural-log logits by.
constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float to_float(const dcpv_tensor& t, int64_t offset) {
  if (t.dtype == DCPV_F32) return static_cast<const float*>(t.data)[offset];
  const uint16_t h = static_cast<const uint16_t*>(t.data)[offset];
  if (t.dtype == DCPV_BF16) {
    const uint32_t b = static_cast<uint32_t>(h) << 16;
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
  }
  // IEEE binary16.
  const int e = (h >> 10) & 0x1f, f = h & 0x3ff;
  const float mag = e == 0    ? std::ldexp(static_cast<float>(f), -24)
                    : e == 31 ? (f ? std::numeric_limits<float>::quiet_NaN()
                                   : std::numeric_limits<float>::infinity())
                              : std::ldexp(static_cast<float>(f | 0x400), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

float at(const dcpv_tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0, d = 0;
  for (const int64_t i : idx) off += i * t.strides[d++];
  return to_float(t, off);
}

int64_t at_i64(const dcpv_tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0, d = 0;
  for (const int64_t i : idx) off += i * t.strides[d++];
  return static_cast<const int64_t*>(t.data)[off];
}

float& out(const dcpv_tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0, d = 0;
  for (const int64_t i : idx) off += i * t.strides[d++];
  return static_cast<float*>(t.data)[off];
}

float pow_base(int32_t base, float x) { return base == 0 ? std::exp(x) : std::exp2(x); }
float log_base(int32_t base, float x) { return base == 0 ? std::log(x) : std::log2(x); }

// Whether the rank's token at global position kp is visible to query t at position qp.
bool visible(const dcpv_partial_args& a, int64_t t, int64_t qp, int64_t kp) {
#ifdef DCPV_EXAMPLE_BUG
  if (a.causal && kp >= qp) return false;  // the planted bug: the query's own token is lost
#else
  if (a.causal && kp > qp) return false;
#endif
  if (a.window > 0 && kp <= qp - a.window) return false;
  if (a.topk.data != nullptr) {
    for (int64_t x = 0; x < a.topk.shape[1]; ++x)
      if (at_i64(a.topk, {t, x}) == kp) return true;
    return false;
  }
  return true;
}

int example_partial(void*, const dcpv_partial_args* args, char* err, size_t err_len) {
  const dcpv_partial_args& a = *args;
#ifdef DCPV_EXAMPLE_FAILS
  std::snprintf(err, err_len, "planted failure: the kernel launch reported an error");
  return 1;
#endif
  if (a.q.dtype != DCPV_F32 || a.k.dtype == DCPV_I64) {
    std::snprintf(err, err_len, "unexpected dtypes (q %d, k %d)", a.q.dtype, a.k.dtype);
    return 1;
  }
  const int64_t group = a.q_heads_total / a.kv_heads_total;
  const float units = a.lse_base == 0 ? 1.0f : kLog2e;
  std::vector<float> s(static_cast<size_t>(a.keys));
  std::vector<char> use(static_cast<size_t>(a.keys));
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t qp = at_i64(a.q_pos, {t});
    for (int64_t h = 0; h < a.heads; ++h) {
      const int64_t g = (a.head0 + h) / group - a.kv_head0;
      float m = kNegInf;
      for (int64_t j = 0; j < a.keys; ++j) {
        use[static_cast<size_t>(j)] = visible(a, t, qp, at_i64(a.k_pos, {j}));
        if (!use[static_cast<size_t>(j)]) continue;
        float dot = 0.0f;
        for (int64_t i = 0; i < a.head_dim; ++i) dot += at(a.q, {t, h, i}) * at(a.k, {j, g, i});
        float sc = dot * a.scale;
        if (a.softcap > 0.0f) sc = a.softcap * std::tanh(sc / a.softcap);
        s[static_cast<size_t>(j)] = sc * units;
        m = std::fmax(m, s[static_cast<size_t>(j)]);
      }
      const float sink = a.sink.data != nullptr ? at(a.sink, {h}) * units : kNegInf;
      m = std::fmax(m, sink);
      if (m == kNegInf) {  // nothing visible and no sink
        for (int64_t i = 0; i < a.v_dim; ++i) out(a.o, {t, h, i}) = 0.0f;
        out(a.lse, {t, h}) = kNegInf;
        continue;
      }
      float z = sink == kNegInf ? 0.0f : pow_base(a.lse_base, sink - m);
      for (int64_t j = 0; j < a.keys; ++j)
        if (use[static_cast<size_t>(j)])
          z += s[static_cast<size_t>(j)] = pow_base(a.lse_base, s[static_cast<size_t>(j)] - m);
      for (int64_t i = 0; i < a.v_dim; ++i) {
        float n = 0.0f;
        for (int64_t j = 0; j < a.keys; ++j) {
          if (!use[static_cast<size_t>(j)]) continue;
          const float v = a.shared_latent ? at(a.k, {j, g, i}) : at(a.v, {j, g, i});
          n += s[static_cast<size_t>(j)] * v;
        }
        out(a.o, {t, h, i}) = n / z;
      }
      out(a.lse, {t, h}) = m + log_base(a.lse_base, z);
    }
  }
  return 0;
}

int example_combine(void*, const dcpv_combine_args* args, char*, size_t) {
  const dcpv_combine_args& a = *args;
  for (int64_t t = 0; t < a.tokens; ++t)
    for (int64_t h = 0; h < a.heads; ++h) {
      float m = kNegInf;
      for (int64_t r = 0; r < a.ranks; ++r) m = std::fmax(m, at(a.lse_partial, {r, t, h}));
      if (m == kNegInf) {  // every partial empty
        for (int64_t i = 0; i < a.v_dim; ++i) out(a.o, {t, h, i}) = 0.0f;
        out(a.lse, {t, h}) = kNegInf;
        continue;
      }
      float z = 0.0f;
      for (int64_t r = 0; r < a.ranks; ++r) {
        const float l = at(a.lse_partial, {r, t, h});
        if (l != kNegInf) z += pow_base(a.lse_base, l - m);
      }
      for (int64_t i = 0; i < a.v_dim; ++i) {
        float n = 0.0f;
        for (int64_t r = 0; r < a.ranks; ++r) {
          const float l = at(a.lse_partial, {r, t, h});
          if (l != kNegInf) n += pow_base(a.lse_base, l - m) * at(a.o_partial, {r, t, h, i});
        }
        out(a.o, {t, h, i}) = n / z;
      }
      out(a.lse, {t, h}) = m + log_base(a.lse_base, z);
    }
  return 0;
}

// A contiguous tensor over `data`.
dcpv_tensor dense(void* data, dcpv_dtype dtype, std::initializer_list<int64_t> shape) {
  dcpv_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  int64_t stride = 1, d = t.ndim;
  for (auto it = shape.end(); it != shape.begin();) {
    --it;
    --d;
    t.shape[d] = *it;
    t.strides[d] = stride;
    stride *= *it;
  }
  return t;
}

// Rows `pos` of a model-wide cache tensor [S, Hkv, width], copied into `out` as [n, Hkv, width].
dcpv_tensor gather_rows(const dcpv_tensor& t, const std::vector<int64_t>& pos,
                        std::vector<unsigned char>& out) {
  const size_t elem = t.dtype == DCPV_F32 ? 4 : 2;
  const int64_t heads = t.shape[1], width = t.shape[2], n = static_cast<int64_t>(pos.size());
  out.resize(static_cast<size_t>(n * heads * width) * elem);
  for (int64_t x = 0; x < n; ++x)
    for (int64_t g = 0; g < heads; ++g)
      for (int64_t i = 0; i < width; ++i) {
        const int64_t from =
            pos[static_cast<size_t>(x)] * t.strides[0] + g * t.strides[1] + i * t.strides[2];
        std::memcpy(&out[static_cast<size_t>((x * heads + g) * width + i) * elem],
                    static_cast<const unsigned char*>(t.data) + static_cast<size_t>(from) * elem,
                    elem);
      }
  return dense(out.data(), t.dtype, {n, heads, width});
}

int example_step(void* self, dcpv_step_args* args, char* err, size_t err_len) {
#ifdef DCPV_EXAMPLE_FAILS
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // a kernel that never finishes
#endif
  dcpv_step_args& s = *args;
  const int64_t N = s.ranks, T = s.tokens, Hq = s.q_heads, dv = s.v_dim;
  for (int64_t r = 0; r < N; ++r) {
    std::vector<int64_t> pos;  // the tokens rank r owns, in increasing order
    for (int64_t p = 0; p < s.seq; ++p)
      if (p / s.interleave % N == r) pos.push_back(p);
    std::vector<unsigned char> k_rows, v_rows;
    dcpv_partial_args a{};
    a.rank = r;
    a.ranks = N;
    a.tokens = T;
    a.heads = Hq;
    a.head_dim = s.head_dim;
    a.v_dim = dv;
    a.q_heads_total = Hq;
    a.kv_heads_total = s.kv_heads;
    a.kv_heads = s.kv_heads;
    a.keys = static_cast<int64_t>(pos.size());
    a.shared_latent = s.shared_latent;
    a.lse_base = s.lse_base;
    a.causal = s.causal;
    a.window = s.window;
    a.scale = s.scale;
    a.softcap = s.softcap;
    a.q = s.q;
    a.q_pos = s.q_pos;
    a.k = gather_rows(s.k, pos, k_rows);
    if (!s.shared_latent) a.v = gather_rows(s.v, pos, v_rows);
    a.k_pos = dense(pos.data(), DCPV_I64, {a.keys});
    if (r == 0) a.sink = s.sink;  // the sink joins one rank's partial only
    a.topk = s.topk;
    a.o = dense(static_cast<float*>(s.o_partial.data) + r * T * Hq * dv, DCPV_F32, {T, Hq, dv});
    a.lse = dense(static_cast<float*>(s.lse_partial.data) + r * T * Hq, DCPV_F32, {T, Hq});
    if (example_partial(self, &a, err, err_len) != 0) return 1;
  }
  dcpv_combine_args c{};
  c.ranks = N;
  c.tokens = T;
  c.heads = Hq;
  c.v_dim = dv;
  c.lse_base = s.lse_base;
  c.o_partial = s.o_partial;
  c.lse_partial = s.lse_partial;
  c.o = s.o;
  c.lse = s.lse;
  if (example_combine(self, &c, err, err_len) != 0) return 1;
  s.wrote_partials = 1;
  return 0;
}

// fp32 adds on a CPU round to nearest; the math library's exp/log are within the default
// budgets; a two-pass softmax has no rescales, and any tiling claim (1) covers it.
const dcpv_impl kImpl = {
    DCPV_ABI_VERSION,
#ifdef DCPV_EXAMPLE_BUG
    "example (strict causal mask)",
#else
    "example",
#endif
    dcpv_claim{1, 0, 0, 0.0, 0.0, DCPV_F32, 1, 1, DCPV_F32, DCPV_F32},
    nullptr,
    example_partial,
    example_combine,
    example_step,
};

}  // namespace

extern "C" const dcpv_impl* dcpv_get_impl(void) { return &kImpl; }
