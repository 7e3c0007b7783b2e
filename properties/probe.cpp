#include "properties/probe.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "gpu/kernels/kernel_math.hpp"
#include "gpu/run_threads.hpp"
#include "oracle/case_file.hpp"
#include "oracle/dtype.hpp"
#include "oracle/text.hpp"
#include "oracle/tolerance.hpp"

namespace dcp::props {
namespace {

using oracle::DType;

// Every experiment's head width: what kernels take (64 or 128), the used components first.
constexpr int64_t kDim = 64;
constexpr double kU32 = 0x1p-24;  // fp32's unit roundoff
// The default exponential claim, exp_rel_err 0: 2 ulp of fp32, 2 * 2^-23 relative.
constexpr double kDefaultExp = 0x1p-22;
// An exponential's largest error lies between the arguments tried: its claim is the largest seen
// and a quarter more (PyTorch's bf16 CPU path: 1.1e-4 seen over 4,000 arguments, 1.125e-4 its
// largest over every fp32 argument, emulated bit for bit).
constexpr double kExpMargin = 1.25;
// The component that pads a short row with keys of no weight (Grid::pad_far): logit -200, whose
// exponential underflows to 0 in fp32 in either base (2^-288.5).
constexpr int64_t kFar = kDim - 1;
constexpr float kFarLogit = -200.0f;
// Rows of two keys are padded to this many: a multiple of every vector width.
constexpr int64_t kPaddedKeys = 64;
// A sample whose resolution is coarser than this says nothing about an exponential's error.
constexpr double kUsefulResolution = 2e-5;
// A rescale exponential is stated apart from the weights' where its claim is this many times
// finer (a library exp beside a polynomial: 2.4e-7 beside 1.4e-4) or coarser at all; between, the
// kernel's claim covers it.
constexpr double kRescaleFiner = 4.0;

// The spacing of the values of a format with `bits` significand bits at |x| (its ulp), with
// fp32's subnormal spacing as the floor (the probe reads fp32 values).
double ulp_bits(double x, int bits) {
  if (x == 0.0 || !std::isfinite(x)) return std::ldexp(1.0, -149);
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - bits, -149));
}
int significand_bits(DType f) { return oracle::dtype_info(f)->man_bits + 1; }
double ulp_of(DType f, double x) { return ulp_bits(x, significand_bits(f)); }

// x rounded to fp32 toward zero: a truncating accumulator's add (x exact in double).
double truncate_f32(double x) {
  float r = static_cast<float>(x);
  if (std::fabs(static_cast<double>(r)) > std::fabs(x)) r = std::nextafter(r, 0.0f);
  return r;
}

// bf16-exact inputs: a kernel that narrows q, K and V to bf16 computes on the same values.
float bf16(double x) { return static_cast<float>(oracle::round_to(DType::bf16, x)); }

std::string sci(double x, int digits = 2) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, x);
  return buf;
}
std::string fixed(double x, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}
// A claimed error as the result files write it (two significant digits, shortest form).
std::string claim_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", x);
  return buf;
}

// The narrowest format all values are exactly in: an fp8 one, bf16, f16 or f32.
DType holding_format(const std::vector<float>& xs) {
  const std::vector<DType> narrow = oracle::narrow_floats_finest_first();
  for (auto f = narrow.rbegin(); f != narrow.rend(); ++f) {
    const auto holds = [f](float x) { return oracle::round_to(*f, x) == static_cast<double>(x); };
    if (std::all_of(xs.begin(), xs.end(), holds)) return *f;
  }
  return DType::f32;
}

// A format as the result files' metadata words name it.
std::string format_word(DType f) { return oracle::format_text(f); }

// One experiment's inputs: T query tokens, H query heads over H KV heads (no GQA), S keys, every
// vector `dim` wide (kDim unless an experiment needs other widths); no mask (not causal, no
// window), scale 1, every query at the last position.
struct Grid {
  int64_t tokens, heads, keys, dim;
  std::vector<float> q, k, v;  // [T, H, dim], [S, H, dim], [S, H, dim]
  Grid(int64_t t, int64_t h, int64_t s, int64_t width = kDim)
      : tokens(t),
        heads(h),
        keys(s),
        dim(width),
        q(static_cast<size_t>(t * h * width)),
        k(static_cast<size_t>(s * h * width)),
        v(static_cast<size_t>(s * h * width)) {}
  float& qa(int64_t t, int64_t h, int64_t c) {
    return q[static_cast<size_t>((t * heads + h) * dim + c)];
  }
  float& ka(int64_t j, int64_t h, int64_t c) {
    return k[static_cast<size_t>((j * heads + h) * dim + c)];
  }
  float& va(int64_t j, int64_t h, int64_t c) {
    return v[static_cast<size_t>((j * heads + h) * dim + c)];
  }
  // Keys [0, S - 2) of every head at logit kFarLogit, V 0: their weights vanish when the row's
  // two keys, the last, move its maximum up (the rescale underflows to exactly 0), and a
  // vectorized kernel runs the row through its vector path. The two keys share a tile of any size
  // above 1, so no rescale falls between them.
  void pad_far() {
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < heads; ++h) qa(t, h, kFar) = 1.0f;
    for (int64_t j = 0; j + 2 < keys; ++j)
      for (int64_t h = 0; h < heads; ++h) ka(j, h, kFar) = kFarLogit;
  }
  int64_t first() const { return keys - 2; }  // the row's key of logit 0 (the other: first() + 1)
  gpu::DcpInputs inputs() && {
    gpu::DcpInputs in;
    in.dims = {tokens, heads, heads, dim, dim, false};
    in.q = std::move(q);
    in.k = gpu::KvSource(std::move(k));
    in.v = gpu::KvSource(std::move(v));
    in.q_pos.assign(static_cast<size_t>(tokens), keys - 1);
    in.seq = keys;
    in.scale = 1.0f;
    in.causal = false;
    return in;
  }
};

// What one run returned: rank r's partial (O [T, H, dim], LSE [T, H] as stored, in the base's
// units) and the merged output, for ranks = 1 the partial where the backend returns it.
struct Outputs {
  std::vector<std::vector<float>> partial_o, partial_lse;
  std::vector<float> o, lse;
  // Rank 0's partial where the backend returned the partials, else the output (one rank: the
  // same values through a merge of one).
  const std::vector<float>& rank0_o() const { return partial_o.empty() ? o : partial_o[0]; }
  const std::vector<float>& rank0_lse() const { return partial_lse.empty() ? lse : partial_lse[0]; }
};

class Prober {
 public:
  explicit Prober(const ProbeTarget& t) : t_(t) {}

  double ln_base() const { return t_.cfg.base == gpu::LseBase::e ? 1.0 : std::log(2.0); }

  oracle::Expected<Outputs> run(const char* experiment, Grid g, int64_t ranks) {
    const int64_t T = g.tokens, H = g.heads, D = g.dim;
    gpu::DcpConfig cfg = t_.cfg;
    cfg.layout = {ranks, 1};
    cfg.tp_size = ranks;
    cfg.page_size = 0;
    const gpu::DcpInputs in = std::move(g).inputs();
    ++calls_;
    gpu::Result<gpu::GroupRun> r = t_.backend ? t_.backend(in, cfg) : gpu::run_dcp_threads(in, cfg);
    if (!r) return DCP_ERROR("experiment '", experiment, "': ", r.status().message());
    Outputs out;
    const size_t no = static_cast<size_t>(T * H * D), nl = static_cast<size_t>(T * H);
    if (r->o.size() != no || r->lse.size() != nl)
      return DCP_ERROR("experiment '", experiment, "': the output has ", r->o.size(), " O and ",
                       r->lse.size(), " LSE elements; expected ", no, " and ", nl);
    out.o = std::move(r->o);
    out.lse = std::move(r->lse);
    for (size_t i = 0; i < r->partial_o.size() && i < r->partial_lse.size(); ++i)
      if (r->partial_o[i].size() == no && r->partial_lse[i].size() == nl) {
        out.partial_o.push_back(std::move(r->partial_o[i]));
        out.partial_lse.push_back(std::move(r->partial_lse[i]));
      }
    if (static_cast<int64_t>(out.partial_o.size()) != ranks)
      out.partial_o.clear(), out.partial_lse.clear();
    // Every exact value of every experiment is finite: a NaN or an infinity is the
    // implementation's failure, never a measurement.
    for (const auto& [name, xs] : {std::pair{"O", &out.o}, std::pair{"LSE", &out.lse}})
      for (size_t i = 0; i < xs->size(); ++i)
        if (!std::isfinite((*xs)[i]))
          return DCP_ERROR("experiment '", experiment, "': the implementation's ", name,
                           " element ", i, " is ", (*xs)[i], " where the exact value is finite");
    return out;
  }

  int64_t calls() const { return calls_; }

 private:
  const ProbeTarget& t_;
  int64_t calls_ = 0;
};

// A weight measured through an LSE: ln l = L, with l = w0 + p, w0 (the kernel's own weight of the
// row's maximum) known to r0. p's relative error e = p_obs / p - 1 and the resolution r of that:
// l's own fp32 rounding and its log's (2u), the LSE's storage (half an ulp of its format, and one
// more for the log's result: 1.5 ulp), and w0's uncertainty.
struct Weight {
  double a = 0, p = 0, p_obs = 0, e = 0, r = 0;
};
// `shift`: the row's maximum, in natural units, where the LSE is not relative to it (a merge's).
Weight weight_of(double a, double lse_stored, double ln_base, double w0, double r0,
                 DType lse_format, double shift = 0.0) {
  Weight w;
  w.a = a;
  w.p = std::exp(a);
  const double l = std::exp(lse_stored * ln_base - shift);
  w.p_obs = l - w0;
  w.e = w.p_obs / w.p - 1.0;
  w.r = (l * (2.0 * kU32 + 1.5 * ulp_of(lse_format, lse_stored) * ln_base) + r0 * w0) / w.p;
  return w;
}

// What a set of measured weights says of an exponential: the claim (0: within the default) and the
// evidence line. e0: its exp(0)'s error, where measured.
// The spans of arguments over which an exponential's mean error is measured for its bias: ln 2,
// one period of the argument reduction x = k ln 2 + r that exp and exp2 polynomials share. A span
// needs kBiasSpanSamples resolved arguments to say anything.
constexpr double kBiasSpan = 0.6931471805599453;
constexpr double kBiasSpanSamples = 16.0;

// The largest |mean error| over the spans [-(b + 1) kBiasSpan, -b kBiasSpan) of the arguments,
// plus that span's mean resolution, over the resolved weights (finer than kUsefulResolution).
double largest_span_mean(const std::vector<Weight>& ws) {
  std::map<int64_t, std::array<double, 3>> spans;  // span: the errors' sum, resolutions', count
  for (const Weight& w : ws) {
    if (w.r > kUsefulResolution) continue;
    auto& b = spans[static_cast<int64_t>(std::floor(-w.a / kBiasSpan))];
    b[0] += w.e, b[1] += w.r, b[2] += 1.0;
  }
  double out = 0.0;
  for (const auto& [span, b] : spans)
    if (b[2] >= kBiasSpanSamples) out = std::max(out, (std::fabs(b[0]) + b[1]) / b[2]);
  return out;
}

struct ExpVerdict {
  double claim = 0.0;
  double bias = 0.0;  // the bound on its mean error (exp_bias), where below the claim; 0: none
  std::string evidence;
};
ExpVerdict judge_exp(const std::vector<Weight>& ws, std::optional<double> e0, double r0,
                     const char* what, bool bias_too = false) {
  const double e_zero = e0.value_or(0.0);
  double worst = std::fabs(e_zero), at = 0.0, sum = 0.0, res = r0, lo = 0.0;
  bool within_default = std::fabs(e_zero) <= kDefaultExp + r0;
  int64_t n = 0;
  for (const Weight& w : ws) {
    if (w.r > kUsefulResolution) continue;
    ++n;
    sum += w.e;
    lo = std::min(lo, w.a);
    res = std::max(res, w.r);
    within_default = within_default && std::fabs(w.e) <= kDefaultExp + w.r;
    if (std::fabs(w.e) > worst) worst = std::fabs(w.e), at = w.a;
  }
  ExpVerdict v;
  std::ostringstream ev;
  if (n == 0) {
    // No row resolves the exponential (a 16-bit LSE): the largest error each row admits.
    double admitted = std::fabs(e_zero) + r0;
    for (const Weight& w : ws) admitted = std::max(admitted, std::fabs(w.e) + w.r);
    v.claim = round_up_2sig(kExpMargin * admitted);
    v.evidence = "not resolved: every row's resolution is coarser than " + sci(kUsefulResolution) +
                 " (the LSE's format); the largest error the rows admit, " + sci(admitted) +
                 ", claimed with a quarter's margin";
    return v;
  }
  ev << "largest |error| " << sci(worst) << " (at " << fixed(at, 3) << "), mean "
     << sci(n > 0 ? sum / static_cast<double>(n) : 0.0) << ", over " << n << " arguments in ["
     << fixed(lo, 2) << ", 0] (" << what << "); resolution <= " << sci(res);
  if (e0) ev << "; exp(0) off by " << sci(*e0);
  if (within_default) {
    ev << ": within 2 ulp at that resolution";
  } else {
    v.claim = round_up_2sig(kExpMargin * worst);
    ev << "; claimed with a quarter's margin";
    // bias_too (the keys' weights): the largest of its means over each ln 2 of arguments (within
    // their mean resolution) and its error at 0 (within its own), a quarter more: the statistical
    // tier charges it whole in the LSE and the errors about it as random (exp_bias). A mean per
    // span of arguments, not one over all: an error that depends on the argument (high near the
    // maximum, low far from it) is not a draw about one mean. exp(0) is in it because every
    // tile's maximum is weighted exp(0), the same error in every row.
    const double bias =
        round_up_2sig(kExpMargin * std::max(largest_span_mean(ws), std::fabs(e_zero) + r0));
    if (bias_too && bias < v.claim) {
      v.bias = bias;
      ev << "; its mean over each ln 2 of arguments and exp(0) within " << sci(bias)
         << ", claimed as its bias";
    }
  }
  v.evidence = ev.str();
  return v;
}

// Token t's query scale in the experiments that scale one logit by token: 1 + t/64, 7 significant
// bits, so its products with bf16 values are exact in fp32.
double token_scale(int64_t t) { return 1.0 + static_cast<double>(t) / 64.0; }

// --- logs: what every experiment below that reads an LSE of a known sum adds -----------------

// The logs' claim (log_rel_err, relative to max(1, |result|)) is the largest error seen over rows
// whose exact LSE is known: the pairs' (l = 1 + exp(a), a in [-4.6, 0]: arguments in (1, 2]), the
// log rows' (integer sums in [2, 2048]), a merge's own (1 + exp(a) over the ranks' LSE gaps, and
// N equal ranks). The exponentials' errors in those rows (exp~(0)'s, the pairs' exp~(a), the
// merge's) land in their LSEs too and are charged to the log: a log error they happen to offset
// is a measurement's limit, as an exponential's worst between the arguments tried is.

// The claim's floor: one ulp of an fp32 result, relative (the math libraries' logf, glibc's and
// CUDA's, are within it; a sample of arguments may miss a log's worst).
constexpr double kLogFloor = 0x1p-23;
// The default log budget is 2^-21 absolute near ln x = 0 and log_ulps (3) ulp relative elsewhere
// (Arithmetic::log_abs, log_ulps): a claim r max(1, |ln x|) is below it everywhere for r at most
// those ulps.
const double kLogDefault = oracle::Arithmetic{}.log_ulps * kLogFloor;

struct LogVerdict {
  double worst = 0.0;  // |error| / max(1, |log x|), in the LSE's base
  double at = 0.0;     // its argument
  int64_t samples = 0;
};

// The largest error of observed log~(x) values against log_base(x), relative to max(1, |result|).
void note_log(LogVerdict& v, double observed, double x, double ln_base) {
  const double exact = std::log(x) / ln_base;
  const double e = std::fabs(observed - exact) / std::max(1.0, std::fabs(exact));
  ++v.samples;
  if (e > v.worst) v.worst = e, v.at = x;
}

// --- pairs: the exponential, the P cast, the partial's format ------------------------------------

struct PairsResult {
  DType o_format = DType::f32, lse_format = DType::f32;
  double w0 = 1.0, r0 = 0.0;  // the kernel's exp(0), and its resolution
  std::vector<Weight> weights;
  std::vector<float> o;  // each sample's O (column 0)
  LogVerdict log;        // each LSE against ln(1 + exp(a)): the log at (1, 2]
};

oracle::Expected<PairsResult> run_pairs(Prober& pr) {
  constexpr int64_t T = 16, H = 64;
  // Grids of x from 0 to 4.5, the first (0, 0.5] (weights near 1, where a P cast shows most); head
  // 0 of the first has x = 0, both keys at the maximum: l = 2 exp~(0).
  const std::vector<std::pair<double, double>> spans = {
      {0.0, 0.5}, {0.5, 2.0}, {2.0, 3.5}, {3.5, 4.5}};
  std::vector<std::vector<double>> xs(spans.size());
  for (size_t i = 0; i < spans.size(); ++i)
    for (int64_t h = 0; h < H; ++h)
      xs[i].push_back(bf16(spans[i].first +
                           (spans[i].second - spans[i].first) * static_cast<double>(h) / (H - 1)));
  std::vector<Outputs> outs;
  std::vector<float> all_o, all_lse;
  for (const auto& x : xs) {
    Grid g(T, H, kPaddedKeys);
    g.pad_far();
    const int64_t j0 = g.first();
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = 0; t < T; ++t) g.qa(t, h, 0) = static_cast<float>(token_scale(t));
      g.ka(j0 + 1, h, 0) = static_cast<float>(-x[static_cast<size_t>(h)]);
      for (int64_t c = 0; c < kDim; ++c) g.va(j0, h, c) = -1.0f, g.va(j0 + 1, h, c) = 1.0f;
    }
    auto o = pr.run("pairs", std::move(g), 1);
    if (!o) return o.status();
    all_o.insert(all_o.end(), o->rank0_o().begin(), o->rank0_o().end());
    all_lse.insert(all_lse.end(), o->rank0_lse().begin(), o->rank0_lse().end());
    outs.push_back(std::move(*o));
  }
  PairsResult res;
  res.o_format = holding_format(all_o);
  res.lse_format = holding_format(all_lse);
  const double lb = pr.ln_base();
  // exp~(0): l = 2 w0 on head 0 of the first grid (token 0; every token computes the same row).
  res.w0 = std::exp(static_cast<double>(outs[0].rank0_lse()[0]) * lb) / 2.0;
  const double l0 = 2.0 * res.w0;
  res.r0 = l0 / 2.0 * (2.0 * kU32 + 1.5 * ulp_of(res.lse_format, std::log(l0) / lb) * lb);
  for (size_t gi = 0; gi < xs.size(); ++gi)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const double a = -token_scale(t) * xs[gi][static_cast<size_t>(h)];
        const size_t i = static_cast<size_t>(t * H + h);
        note_log(res.log, outs[gi].rank0_lse()[i], 1.0 + std::exp(a), lb);
        if (gi == 0 && h == 0) continue;  // two keys at logit 0: w0's row, no weight of its own
        res.weights.push_back(
            weight_of(a, outs[gi].rank0_lse()[i], lb, res.w0, res.r0, res.lse_format));
        res.o.push_back(outs[gi].rank0_o()[i * kDim]);
      }
  return res;
}

// --- dot lanes: the order of q.k's adds ----------------------------------------------------------

// A row of keys for the candidate W lanes (1 .. 32) at head dim D: key j > 0 is
// cancelling_key(W, m0, j, D), +-kCancellingQ kDotBig = +-2^22 products that cancel one after the
// other in lane j mod W, after zeros (the lane's sum exactly 0 when -2^22 comes) and among
// products of kDotSmall, 2^-4. Summed in W lanes every fp32 partial sum is exact, so every key's
// logit is exact. In other orders partial sums holding +-2^22 meet 2^-4 products, at most a
// quarter of their ulp, and drop them: the keys' logits come out off by multiples of 2^-4. Key 0,
// the reference, holds no big and sums exactly in any order; each key's weight against its own
// (the one-hot V: key j's 1 at column j) gives the key's logit against the reference's.
constexpr float kDotBig = 32768.0f;  // 2^15: within f16's range, as every value here is in bf16's
constexpr float kDotSmall = 0x1p-11f;
constexpr float kCancellingQ = 128.0f;  // q in every component
constexpr int64_t kDotCandidates = 6;   // W = 1, 2, 4, 8, 16, 32
// A kernel may sum other widths in other orders (a GEMM that blocks K): W is claimed only where it
// holds at every one of these head dims.
constexpr std::array<int64_t, 3> kDotWidths = {64, 128, 256};
// The zeros a row's keys open with span at most this many positions: each zero is a small less
// in the logit, so the row's logits stay within (kDotSpan + 2) 2^-4 of each other and no weight
// falls toward a 16-bit output's subnormals.
constexpr int64_t kDotSpan = 16;

// Key j of a row for `lanes` lanes whose zeros start at m0: for j > 0, lane t = j mod W opens
// with m zeros (m = m0 + j / W cycling over the row's span, so across the rows the pair falls on
// every position: an order that sums blocks of components apart meets it astride a block's
// edge), then -kDotBig, +kDotBig at the lane's next position, and kDotSmall everywhere else. Key
// 0: kDotSmall everywhere but m0 + 2 zeros, a logit among the row's.
std::vector<float> cancelling_key(int64_t lanes, int64_t m0, int64_t j, int64_t dim) {
  std::vector<float> k(static_cast<size_t>(dim), kDotSmall);
  if (j == 0) {
    std::fill(k.begin(), k.begin() + m0 + 2, 0.0f);
    return k;
  }
  const int64_t span = std::min(kDotSpan, dim / lanes - 1 - m0);
  const int64_t t = j % lanes, m = m0 + (j / lanes) % span;
  for (int64_t x = 0; x < m; ++x) k[static_cast<size_t>(t + x * lanes)] = 0.0f;
  k[static_cast<size_t>(t + m * lanes)] = -kDotBig;
  k[static_cast<size_t>(t + (m + 1) * lanes)] = kDotBig;
  return k;
}

struct LanesVerdict {
  int64_t lanes = 0;  // 0: no candidate holds (any order)
  std::string evidence;
};

// `noise`: what the outputs' roundings leave of a key's logit against the reference's (2u of the
// output's format and of a P cast).
oracle::Expected<LanesVerdict> run_dot_lanes(Prober& pr, double noise) {
  const double small = static_cast<double>(kCancellingQ) * static_cast<double>(kDotSmall);
  LanesVerdict v;
  if (4.0 * noise > small) {
    v.evidence = "not resolved: the outputs' roundings (" + sci(noise) +
                 " of a logit) hide a step of " + sci(small);
    return v;
  }
  std::string widths, refused;
  std::array<double, kDotCandidates> worst{};  // over every width
  for (const int64_t D : kDotWidths) {
    widths += (widths.empty() ? "" : ", ") + std::to_string(D);
    std::vector<std::pair<int64_t, int64_t>> rows;  // (candidate, m0)
    for (int64_t h = 0; h < kDotCandidates; ++h)
      for (int64_t m0 = 0; m0 < D / (int64_t{1} << h) - 1; m0 += kDotSpan) rows.push_back({h, m0});
    const auto H = static_cast<int64_t>(rows.size());
    Grid g(1, H, D, D);
    std::vector<double> logit(static_cast<size_t>(H * D));  // exact
    for (int64_t r = 0; r < H; ++r) {
      const auto [h, m0] = rows[static_cast<size_t>(r)];
      for (int64_t c = 0; c < D; ++c) g.qa(0, r, c) = kCancellingQ;
      for (int64_t j = 0; j < D; ++j) {
        const std::vector<float> k = cancelling_key(int64_t{1} << h, m0, j, D);
        double sum = 0.0;
        for (int64_t c = 0; c < D; ++c) {
          g.ka(j, r, c) = k[static_cast<size_t>(c)];
          sum += static_cast<double>(k[static_cast<size_t>(c)]);
        }
        logit[static_cast<size_t>(r * D + j)] = static_cast<double>(kCancellingQ) * sum;
        g.va(j, r, j) = 1.0f;
      }
    }
    auto out = pr.run("dot lanes", std::move(g), 1);
    if (!out) {  // a head dim the kernel does not take: no claim can cover it
      refused += (refused.empty() ? "" : "; ") + std::to_string(D) + ": " + out.status().message();
      continue;
    }
    const std::vector<float>& o = out->rank0_o();
    for (int64_t r = 0; r < H; ++r) {
      const auto at = [&](int64_t j) { return static_cast<size_t>(r * D + j); };
      const double ref = static_cast<double>(o[at(0)]);
      double& w = worst[static_cast<size_t>(rows[static_cast<size_t>(r)].first)];
      if (!(ref > 0.0)) w = INFINITY;
      for (int64_t j = 1; j < D; ++j) {
        const double x = static_cast<double>(o[at(j)]);
        w = std::max(
            w, x > 0.0 ? std::fabs(std::log(x / ref) - (logit[at(j)] - logit[at(0)])) : INFINITY);
      }
    }
  }
  std::ostringstream ev;
  if (!refused.empty()) {
    ev << "not measured at every head dim (" << widths << "), so no order is claimed: " << refused;
    v.evidence = ev.str();
    return v;
  }
  ev << "the largest error of the logits of keys whose products cancel in their lanes, against a "
     << "reference key's, at head dims " << widths << " (a dropped product moves one by "
     << sci(small) << "): ";
  for (int64_t h = 0; h < kDotCandidates; ++h) {
    const double w = worst[static_cast<size_t>(h)];
    ev << (h ? ", " : "") << (int64_t{1} << h) << (h ? " lanes " : " lane ") << sci(w);
    if (w < small / 2.0 && v.lanes == 0) v.lanes = int64_t{1} << h;
  }
  ev << " (exact within " << sci(small / 2.0) << ": "
     << (v.lanes > 0 ? "the fewest lanes that hold are claimed)" : "none holds, so any order)");
  v.evidence = ev.str();
  return v;
}

// How P reaches the P.V product: rounded to a format before it (raw weights, or weights already
// divided by l), or not at all. The O of a pairs row under each, for its measured weights.
struct CastModel {
  std::optional<DType> cast;  // nullopt: not rounded
  bool tf32 = false;          // rounded to tf32 (a tf32 MMA's operand), not to `cast`
  bool normalized = false;    // P / l rounded, not P
  double round(double x) const {
    if (tf32) return static_cast<double>(gpu::round_tf32(static_cast<float>(x)));
    return cast ? oracle::round_to(*cast, x) : x;
  }
  std::string name() const { return tf32 ? "tf32" : cast ? format_word(*cast) : "none"; }
};
// The models from the finest to the coarsest rounding.
std::vector<CastModel> cast_models() {
  std::vector<CastModel> m = {{std::nullopt, false, false}};
  for (const bool normalized : {false, true}) m.push_back({std::nullopt, true, normalized});
  for (const DType f : oracle::narrow_floats_finest_first())
    for (const bool normalized : {false, true}) m.push_back({f, false, normalized});
  return m;
}

struct CastVerdict {
  std::optional<DType> cast;  // the P cast claimed (nullopt: none)
  bool tf32 = false;          // tf32 P.V operands claimed (accum tf32)
  std::string evidence;
};
CastVerdict judge_cast(const PairsResult& pr) {
  const std::vector<CastModel> models = cast_models();
  std::vector<int64_t> misses(models.size(), 0);
  int64_t used = 0;
  for (size_t i = 0; i < pr.weights.size(); ++i) {
    const Weight& w = pr.weights[i];
    if (w.r > kUsefulResolution) continue;
    ++used;
    const double l = pr.w0 + w.p_obs;
    for (size_t m = 0; m < models.size(); ++m) {
      const CastModel& cm = models[m];
      // Each end of the measured weight's interval: a cast whose rounding the interval straddles
      // gets the whole spread as tolerance on this row.
      const double lo = w.p_obs - w.r * w.p, hi = w.p_obs + w.r * w.p;
      const auto model_o = [&](double p) {
        return cm.normalized ? cm.round(p / l) - cm.round(pr.w0 / l)
                             : (cm.round(p) - cm.round(pr.w0)) / l;
      };
      const double a = model_o(lo), b = model_o(hi);
      const double o_model = oracle::round_to(pr.o_format, 0.5 * (a + b));
      // The sum, the division and the store of fp32 (4u of the terms), and the output format's
      // rounding (a 16-bit output's own rounding may differ from the model's at a tie: 1 ulp).
      const double spread = std::fabs(a - b) + 4.0 * kU32 * (std::fabs(a) + 2.0);
      const double tol =
          spread + (pr.o_format == DType::f32 ? 2.0 : 1.0) * ulp_of(pr.o_format, o_model);
      if (std::fabs(static_cast<double>(pr.o[i]) - o_model) > tol) ++misses[m];
    }
  }
  // A cast explains the outputs when one of its models misses none (one row in 200 allowed: an
  // output at a rounding boundary of its format); of those, the coarsest is claimed.
  const int64_t allowed = used / 200;
  std::vector<std::string> names;
  for (const CastModel& m : models)
    if (std::find(names.begin(), names.end(), m.name()) == names.end()) names.push_back(m.name());
  const auto best_misses = [&](const std::string& name) {
    int64_t b = used;
    for (size_t m = 0; m < models.size(); ++m)
      if (models[m].name() == name) b = std::min(b, misses[m]);
    return b;
  };
  CastVerdict v;
  std::ostringstream ev;
  const CastModel* coarsest = nullptr;
  bool tf32_fits = false;
  for (size_t i = 0; i < names.size(); ++i) {
    ev << (i ? ", " : "") << names[i] << " misses " << best_misses(names[i]);
    if (best_misses(names[i]) > allowed) continue;
    for (const CastModel& m : models)
      if (m.name() == names[i]) coarsest = &m;
    tf32_fits = tf32_fits || names[i] == "tf32";
  }
  ev << " of " << used << " outputs";
  if (coarsest == nullptr) {
    // No model: the coarsest word there is, which covers any rounding of 3 or more bits.
    v.cast = oracle::narrow_floats_finest_first().back();
    ev << ": no cast explains every output; the coarsest (" << format_word(*v.cast) << ") claimed";
  } else {
    v.cast = coarsest->cast;
    v.tf32 = coarsest->tf32;
    // tf32 and f16 keep 11 bits each (tf32 with fp32's range): where both fit, both are claimed.
    if (v.cast == DType::f16 && tf32_fits) {
      v.tf32 = true;
      ev << ": tf32 and f16 (both 11 bits) fit, both claimed";
    }
  }
  v.evidence = ev.str();
  return v;
}

// --- sums: nearest or truncating adds --------------------------------------------------------

struct SumsVerdict {
  std::string rounding = "any";
  std::string evidence;
  double l = 0.0, r_l = 0.0;  // the rows' weight sum from their LSE (all logits 0), its resolution
  bool hidden = false;  // the outputs' spread hid the bias: any rounding, unless midpoints show it
};

// Both sums experiments: 8 heads of 16,384 keys, every logit 0 (each weight exp~(0)).
constexpr int64_t kSumsHeads = 8, kSumsKeys = 16384;

// A truncating accumulator, as tensor cores may be one: products exact, runs of `chunk` keys
// summed exactly and added into one of `accumulators` fp32 accumulators (each a contiguous block
// of the keys) rounding toward zero, the accumulators then summed exactly. Fed the keys' values in
// order, every 16 keys an MMA's k (m16n8k16: one truncating normalization per instruction, as
// published measurements of NVIDIA tensor cores describe). kStrong, one accumulator, is the
// largest bias such a kernel shows; kWeak, 8 accumulators (a row's keys split over 8 warps or
// pieces), about an eighth of it, the smallest the probe must still tell from round-to-nearest.
// A kernel that splits a row further truncates less than the probe can see.
class Truncating {
 public:
  Truncating(int64_t accumulators, int64_t chunk)
      : chunk_(chunk), block_(kSumsKeys / accumulators), acc_(static_cast<size_t>(accumulators)) {}
  void add(int64_t j, double x) {
    pending_ += x;
    if ((j + 1) % chunk_ == 0) {
      double& a = acc_[static_cast<size_t>(j / block_)];
      a = truncate_f32(a + pending_);
      pending_ = 0.0;
    }
  }
  double total() const {
    double t = pending_;
    for (const double a : acc_) t += a;
    return t;
  }

 private:
  int64_t chunk_, block_;
  std::vector<double> acc_;
  double pending_ = 0.0;
};
constexpr int64_t kStrongAccumulators = 1, kStrongChunk = 16;
constexpr int64_t kWeakAccumulators = 8, kWeakChunk = 16;

// The statistical thresholds of the sums' verdicts, in standard errors: a truncating kernel's
// bias at least kPower of them (else the outputs' spread hides it), a round-to-nearest one's
// within kNoBias of 0.
constexpr double kPower = 6.0, kNoBias = 3.0;

oracle::Expected<SumsVerdict> run_sums(Prober& pr) {
  constexpr int64_t H = kSumsHeads, S = kSumsKeys;
  constexpr int64_t kControl = kDim / 2;  // columns [0, 32) sum exactly; [32, 64) carry low bits
  Grid g(1, H, S);
  std::mt19937_64 rng(20261205);
  std::vector<double> exact(static_cast<size_t>(H * kDim), 0.0), strong(exact), weak(exact);
  for (int64_t h = 0; h < H; ++h) g.qa(0, h, 0) = 1.0f;  // every key's logit 0: P = exp~(0)
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < kDim; ++c) {
      Truncating st(kStrongAccumulators, kStrongChunk), wk(kWeakAccumulators, kWeakChunk);
      const size_t e = static_cast<size_t>(h * kDim + c);
      for (int64_t j = 0; j < S; ++j) {
        // control: k / 8 (sums of at most 17 bits, exact in fp32); test: 8 significant bits at
        // exponents 0 .. -8, whose low bits fall below the running sum's ulp (about 2^-10) while
        // the values stay above it (smaller ones would vanish whole, a bias of round-to-nearest
        // too).
        const double x = c < kControl ? static_cast<double>(1 + rng() % 8) / 8.0
                                      : std::ldexp(static_cast<double>(128 + rng() % 128) / 128.0,
                                                   -static_cast<int>(rng() % 9));
        g.va(j, h, c) = static_cast<float>(x);
        exact[e] += x;  // at most 30 significant bits: exact in double
        st.add(j, x);
        wk.add(j, x);
      }
      strong[e] = st.total();
      weak[e] = wk.total();
    }
  auto out = pr.run("sums", std::move(g), 1);
  if (!out) return out.status();
  const std::vector<float>& o = out->rank0_o();
  double s[2] = {0, 0}, s2[2] = {0, 0}, beta_strong = 0.0, beta_weak = 0.0;
  int64_t n[2] = {0, 0};
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < kDim; ++c) {
      const size_t e = static_cast<size_t>(h * kDim + c);
      const double rel = static_cast<double>(o[e]) / (exact[e] / S) - 1.0;
      const int side = c < kControl ? 0 : 1;
      s[side] += rel, s2[side] += rel * rel, ++n[side];
      if (side == 1) {
        beta_strong += strong[e] / exact[e] - 1.0;
        beta_weak += weak[e] / exact[e] - 1.0;
      }
    }
  double mean[2], var[2];
  for (int i = 0; i < 2; ++i) {
    mean[i] = s[i] / static_cast<double>(n[i]);
    var[i] = std::max(0.0, s2[i] / static_cast<double>(n[i]) - mean[i] * mean[i]) /
             static_cast<double>(n[i] - 1);
  }
  beta_strong /= static_cast<double>(n[1]);
  beta_weak /= static_cast<double>(n[1]);
  const double bias = mean[1] - mean[0], se = std::sqrt(var[0] + var[1]);
  SumsVerdict v;
  const double lse = out->rank0_lse()[0];
  v.l = std::exp(lse * pr.ln_base());
  v.r_l = 2.0 * kU32 + 1.5 * ulp_bits(lse, 24) * pr.ln_base();
  std::ostringstream ev;
  ev << "bias of the low-bit sums " << sci(bias) << " +- " << sci(se) << " (standard error, "
     << "against exact-sum controls); truncating adds would show " << sci(beta_strong) << " (one "
     << "accumulator, every " << kStrongChunk << " keys) to " << sci(beta_weak) << " ("
     << kWeakAccumulators << ", every " << kWeakChunk << ")";
  if (bias < beta_weak / 2.0 && bias < -kNoBias * se) {
    ev << ": truncating";
  } else if (std::fabs(beta_weak) < kPower * se) {
    ev << ": the outputs' spread hides the difference";
    v.hidden = true;
  } else if (std::fabs(bias) <= std::max(kNoBias * se, std::fabs(beta_weak) / 2.0)) {
    v.rounding = "nearest";
    ev << ": round to nearest";
  } else {
    ev << ": a bias neither explains, so any rounding is claimed";
  }
  v.evidence = ev.str();
  return v;
}

// The sums' rounding through a 16-bit output. Each output's exact value in the kernel's own
// arithmetic, O = kappa sum(v) with kappa its P of a logit-0 key over its weight sum l, is set
// midway between an odd value of the output's format and the even one above it: the output then
// rounds to the even neighbour where the fp32 result is exact, to either where its adds round to
// nearest (their errors take either sign), and to the odd one below where they truncate (every
// error negative). The 16-bit output shows the sign of the sums' error, which it could not show
// as a size. kappa is known first from the LSE (l, to 1.5e-6) and then to about 10^-7 from
// columns whose sums are exact in any order, set at a ladder of offsets around their midpoints:
// the offset where they turn from rounding down to up is kappa's error.
constexpr int64_t kMidAdjusters = 5;  // keys that make a column's sum its target exactly

// One column's V: 8 significant bits per value, summing exactly to `target` (a multiple of
// `grid`). exact: 0.25 on every key but the adjusters, every partial sum a multiple of 2^-10
// below 2^14 (exact in fp32 in any order); else pairs a + b = 2^f of 2^-9 .. 2^-3, above the
// running sum's ulp (about 2^-10: smaller ones would vanish whole, a negative bias even for
// round-to-nearest) with bits below it. Keys in a random order.
std::vector<double> column_values(double target, bool exact, std::mt19937_64& rng) {
  constexpr int64_t S = kSumsKeys, kBulk = S - kMidAdjusters - 1;  // one key left 0
  std::vector<int64_t> perm(static_cast<size_t>(S));
  for (int64_t j = 0; j < S; ++j) perm[static_cast<size_t>(j)] = j;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<double> v(static_cast<size_t>(S), 0.0);
  size_t at = 0;
  double bulk = 0.0;
  for (int64_t i = 0; i < kBulk / 2; ++i) {
    const int fe = -2 - static_cast<int>(rng() % 7);
    const double q = exact ? 0.0 : static_cast<double>(rng() % 128) / 128.0;
    const double scale = exact ? 0.25 : std::ldexp(1.0, fe - 1);
    v[static_cast<size_t>(perm[at++])] = scale * (1.0 + q);
    v[static_cast<size_t>(perm[at++])] = scale * (1.0 - q);
    bulk += exact ? 0.5 : std::ldexp(1.0, fe);
  }
  double rest = target - bulk;
  for (int64_t i = 0; i < kMidAdjusters && rest > 0.0; ++i) {
    int ex;
    std::frexp(rest, &ex);  // rest in [2^(ex-1), 2^ex): its top 8 bits
    const double top = std::floor(std::ldexp(rest, 8 - ex)) * std::ldexp(1.0, ex - 8);
    v[static_cast<size_t>(perm[at++])] = top;
    rest -= top;
  }
  return v;
}

// A run of midpoint columns: column e's exact sum targets[e]; for each the output's side of its
// midpoint, odd[e] + half its spacing: -1 down (to odd[e]), +1 up, 0 neither.
oracle::Expected<std::vector<int>> midpoint_run(Prober& pr, const char* experiment,
                                                const std::vector<double>& targets,
                                                const std::vector<double>& odd, bool exact, int p,
                                                std::mt19937_64& rng,
                                                std::vector<double>* weak = nullptr) {
  constexpr int64_t H = kSumsHeads, S = kSumsKeys;
  Grid g(1, H, S);
  for (int64_t h = 0; h < H; ++h) g.qa(0, h, 0) = 1.0f;  // every key's logit 0
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < kDim; ++c) {
      const size_t e = static_cast<size_t>(h * kDim + c);
      const std::vector<double> v = column_values(targets[e], exact, rng);
      Truncating wk(kWeakAccumulators, kWeakChunk);
      for (int64_t j = 0; j < S; ++j) {
        g.va(j, h, c) = static_cast<float>(v[static_cast<size_t>(j)]);
        wk.add(j, v[static_cast<size_t>(j)]);
      }
      if (weak != nullptr) (*weak)[e] = wk.total();
    }
  auto out = pr.run(experiment, std::move(g), 1);
  if (!out) return out.status();
  const double spacing = std::ldexp(1.0, -p);
  std::vector<int> side(targets.size(), 0);
  for (size_t e = 0; e < targets.size(); ++e) {
    const double x = out->rank0_o()[e];
    side[e] = x == odd[e] ? -1 : x == odd[e] + spacing ? 1 : 0;
  }
  return side;
}

oracle::Expected<SumsVerdict> run_midpoints(Prober& pr, double w0_cast, double l, double r_kappa,
                                            DType f) {
  const int p = significand_bits(f);
  const size_t n = static_cast<size_t>(kSumsHeads * kDim);
  std::mt19937_64 rng(20261206);
  std::vector<double> odd(n), mid(n);
  for (size_t e = 0; e < n; ++e) {
    odd[e] = 0.5 + (2.0 * static_cast<double>(rng() % (uint64_t{1} << (p - 2))) + 1.0) *
                       std::ldexp(1.0, -p);
    mid[e] = odd[e] + std::ldexp(1.0, -p - 1);
  }
  // 1. kappa: exact sums at offsets eps from -4 r_kappa to 4 r_kappa (on the 2^-10 grid of
  // their sums): a column rounds up where kappa (1 + eps) exceeds kappa's true value.
  const double kappa = w0_cast / l;
  constexpr double kExactGrid = 0x1p-10;
  std::vector<double> targets(n), eps(n);
  for (size_t e = 0; e < n; ++e) {
    const double want =
        -4.0 * r_kappa + 8.0 * r_kappa * (static_cast<double>(e) + 0.5) / static_cast<double>(n);
    targets[e] = std::nearbyint(mid[e] * (1.0 + want) / kappa / kExactGrid) * kExactGrid;
    eps[e] = targets[e] * kappa / mid[e] - 1.0;
  }
  auto cal = midpoint_run(pr, "midpoints", targets, odd, true, p, rng);
  if (!cal) return cal.status();
  // kappa's true value is kappa (1 + delta): columns with eps > -delta round up. The threshold
  // that misclassifies the fewest columns; its spread (the columns it gets wrong, a division's
  // rounding apart) is the calibration's resolution.
  std::vector<size_t> order(n);
  for (size_t e = 0; e < n; ++e) order[e] = e;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return eps[x] < eps[y]; });
  int64_t best = INT64_MAX, wrong = 0;
  size_t cut = 0;
  for (size_t e = 0; e < n; ++e) wrong += (*cal)[e] != 1 ? 1 : 0;  // cut 0: every column up
  for (size_t k = 0; k <= n; ++k) {
    if (wrong < best) best = wrong, cut = k;
    if (k < n) wrong += (*cal)[order[k]] == -1 ? -1 : (*cal)[order[k]] == 1 ? 1 : 0;
  }
  SumsVerdict v;
  std::ostringstream ev;
  if (cut == 0 || cut == n || best * 10 > static_cast<int64_t>(n)) {
    ev << "kappa not calibrated (" << best << " of " << n << " exact-sum columns off the "
       << "ladder): inconclusive, so any rounding is claimed";
    v.evidence = ev.str();
    return v;
  }
  const double delta = -0.5 * (eps[order[cut - 1]] + eps[order[cut]]);
  const double r_cal = std::fabs(eps[order[cut]] - eps[order[cut - 1]]) +
                       static_cast<double>(best + 1) * 8.0 * r_kappa / static_cast<double>(n) +
                       2.0 * kU32;
  // 2. The test columns, at their midpoints under the calibrated kappa.
  const double kappa_cal = kappa * (1.0 + delta);
  constexpr double kPairsGrid = 0x1p-16;
  for (size_t e = 0; e < n; ++e)
    targets[e] = std::nearbyint(mid[e] / kappa_cal / kPairsGrid) * kPairsGrid;
  std::vector<double> weak(n);
  auto test = midpoint_run(pr, "midpoints", targets, odd, false, p, rng, &weak);
  if (!test) return test.status();
  // A truncating kernel's output falls below the midpoint by its bias; on the columns where that
  // is more than twice the calibration's resolution (`robust`), it rounds down whatever kappa's
  // error. Round-to-nearest errors take either sign: a fifth of those columns up and a fifth of
  // all down at least. An exact sum rounds every output up (to even).
  int64_t up = 0, down = 0, far = 0, robust = 0, robust_up = 0;
  for (size_t e = 0; e < n; ++e) {
    (*test)[e] == -1 ? ++down : (*test)[e] == 1 ? ++up : ++far;
    if (kappa_cal * weak[e] < mid[e] * (1.0 - 2.0 * r_cal)) {
      ++robust;
      robust_up += (*test)[e] == 1 ? 1 : 0;
    }
  }
  const int64_t ni = static_cast<int64_t>(n);
  ev << "kappa calibrated to " << sci(r_cal) << " (exact sums, " << best
     << " columns off the ladder); " << n << " outputs set midway between two " << format_word(f)
     << " values: " << up << " rounded up, " << down << " down, " << far << " elsewhere; of the "
     << robust << " that truncating adds (" << kWeakAccumulators << " accumulators every "
     << kWeakChunk << " keys) would round down, " << robust_up << " up";
  if (far * 20 > ni || robust * 2 < ni) {
    ev << ": inconclusive, so any rounding is claimed";
  } else if (robust_up * 5 >= robust && down * 5 >= ni) {
    v.rounding = "nearest";
    ev << ": round to nearest";
  } else if (up == ni) {
    ev << ": exact on these sums, which shows no rounding; any rounding is claimed";
  } else {
    ev << ": truncating";
  }
  v.evidence = ev.str();
  return v;
}

// --- tile: where the online softmax rescales ------------------------------------------------

struct TileVerdict {
  int64_t tile = 1;
  bool resolved = false;  // one tile fits clearly best
  bool flushed = false;   // the subnormal rescales came out 0: the kernel flushes to zero
  std::string evidence;
};

// Both tile experiments: rows of 2,048 keys, the row's maximum at position j = 16 i + 15 of row i
// (odd, so every tile size below 16 puts a different count of keys before j's tile), 64 rows a
// call.
constexpr int64_t kTileKeys = 2048, kTileStride = 16, kTileRows = kTileKeys / kTileStride;
constexpr int64_t kTileHeads = 64;
int64_t max_position(int64_t row) { return row * kTileStride + kTileStride - 1; }

// The tiles tried: powers of two below 16, then every multiple of 16 (FlashAttention-3's 176, 144,
// 80 included) up to the row.
std::vector<int64_t> tile_candidates() {
  std::vector<int64_t> t = {1, 2, 4, 8};
  for (int64_t k = 16; k <= kTileKeys; k += 16) t.push_back(k);
  return t;
}

// Runs the tile rows: fill(grid, head, j) sets a head's row with its maximum at j; read(outputs,
// head) gives the row's observable. One value per row, in row order.
oracle::Expected<std::vector<double>> run_tile_rows(
    Prober& pr, const std::function<void(Grid&, int64_t, int64_t)>& fill,
    const std::function<double(const Outputs&, int64_t)>& read) {
  std::vector<double> obs;
  for (int64_t call = 0; call < kTileRows / kTileHeads; ++call) {
    Grid g(1, kTileHeads, kTileKeys);
    for (int64_t h = 0; h < kTileHeads; ++h) fill(g, h, max_position(call * kTileHeads + h));
    auto o = pr.run("tile", std::move(g), 1);
    if (!o) return o.status();
    for (int64_t h = 0; h < kTileHeads; ++h) obs.push_back(read(*o, h));
  }
  return obs;
}

// The odd positions in [t0, t1) other than j (the row's maximum).
int64_t odd_keys(int64_t t0, int64_t t1, int64_t j) {
  const int64_t odd = t1 / 2 - t0 / 2;  // odd x in [t0, t1): floor(t1 / 2) - floor(t0 / 2)
  return odd - (j >= t0 && j < t1 && j % 2 == 1 ? 1 : 0);
}

// A tile row of head h: the maximum (logit 0, V 0) at jmax, even keys at logit -d (V 0), odd ones
// at -d - g (V odd_v), each logit a sum of two components (exact in fp32).
void two_logit_row(Grid& g, int64_t h, int64_t jmax, float d, float gam, float odd_v) {
  g.qa(0, h, 0) = g.qa(0, h, 1) = 1.0f;
  for (int64_t j = 0; j < kTileKeys; ++j) {
    if (j == jmax) continue;
    g.ka(j, h, 0) = -d;
    if (j % 2 == 1) {
      g.ka(j, h, 1) = -gam;
      for (int64_t c = 0; c < kDim; ++c) g.va(j, h, c) = odd_v;
    }
  }
}

// How well a tile's model must fit to be believed: the LSE's rms residual (natural units; the
// right model fits within 2.1e-5 on the production path, the rounding of 2,048 fp32 adds) and
// the output's, relative to its largest (the right model within 1.5e-6 in fp32; a 16-bit
// output's own rounding, 4 u, where that is coarser).
constexpr double kLseFit = 5e-5, kOutputFit = 1e-5;

// The tile whose model fits best (scores: rms residual and tile, each tile under one or more
// rescale habits), where it fits within max_floor and at least twice as well as any other tile;
// else, where some tile fits, the smallest tile that fits within twice the best (a smaller tile
// claims more rescales: never too few); else any tiling.
TileVerdict pick_tile(std::vector<std::pair<double, int64_t>> scores, const std::string& what,
                      double max_floor) {
  for (auto& [score, tile] : scores)
    if (!std::isfinite(score)) score = INFINITY;
  std::vector<std::pair<double, int64_t>> sorted = scores;
  std::sort(sorted.begin(), sorted.end());
  const double floor = sorted[0].first;
  const auto other = *std::find_if(sorted.begin(), sorted.end(),
                                   [&](const auto& s) { return s.second != sorted[0].second; });
  TileVerdict v;
  std::ostringstream ev;
  ev << what << ": tile " << sorted[0].second << " fits within " << sci(floor) << " rms, the next ("
     << other.second << ") " << sci(other.first);
  if (!(floor <= max_floor)) {
    ev << ": no tile fits (rms above " << sci(max_floor) << ")";
  } else if (floor < 0.5 * other.first) {
    v.tile = sorted[0].second;
    v.resolved = true;
  } else {
    v.tile = kTileKeys;
    for (const auto& [score, tile] : scores)
      if (score <= 2.0 * floor) v.tile = std::min(v.tile, tile);
    ev << ": not resolved; the smallest fitting tile claimed";
  }
  v.evidence = ev.str();
  return v;
}

// The tile from the output: the row's maximum (logit 0, V 0) at position j, the other keys at
// logits -97 (even, V 0) and -97.5 (odd, V 2^15, exact in every 16-bit format). An odd key in a
// tile before j's is weighted exp~(-0.5) and then rescaled by exp~(-97), an fp32 subnormal of
// about 9 bits; one in or after j's tile is weighted exp~(-97.5) directly, another subnormal,
// rounded differently. The output is then a pre + b post with pre, post the counts of odd keys
// each way (times w0 per tile boundary where the kernel rescales at every boundary): the tile whose
// counts fit the outputs as j moves is the kernel's. a and b are fitted, so no exponential is
// assumed. A kernel that flushes subnormals to zero outputs 0 here.
oracle::Expected<TileVerdict> run_tile_subnormal(Prober& pr, double w0, DType o_format) {
  constexpr float kGap = 97.0f, kOdd = 0.5f, kV = 0x1p15f;
  auto obs = run_tile_rows(
      pr, [&](Grid& g, int64_t h, int64_t jmax) { two_logit_row(g, h, jmax, kGap, kOdd, kV); },
      [](const Outputs& o, int64_t h) { return o.rank0_o()[static_cast<size_t>(h * kDim)]; });
  if (!obs) return obs.status();
  double scale = 0.0;
  for (const double o : *obs) scale = std::max(scale, std::fabs(o));
  if (scale == 0.0) {
    TileVerdict v;
    v.flushed = true;
    v.evidence = "every output 0: the subnormal weights were flushed to zero";
    return v;
  }
  // Features of row j for a tile and a rescale habit: the odd keys before j's tile and the others,
  // each times w0 per boundary between its tile and j's (at every boundary; 1: where the maximum
  // moves only).
  struct Features {
    double pre = 0.0, post = 0.0;
  };
  const auto features = [&](int64_t tile, double per_boundary, int64_t j) {
    const int64_t tj = j / tile;
    Features f;
    double factor = 1.0;  // per_boundary^(tj - 1 - tx) for the tiles before j's, walking down
    for (int64_t tx = tj - 1; tx >= 0; --tx, factor *= per_boundary)
      f.pre += factor * static_cast<double>(odd_keys(tx * tile, (tx + 1) * tile, j));
    factor = 1.0;  // per_boundary^(tj - tx) for j's tile and those after it, walking up
    for (int64_t tx = tj; tx * tile < kTileKeys; ++tx, factor /= per_boundary)
      f.post += factor *
                static_cast<double>(odd_keys(tx * tile, std::min(kTileKeys, (tx + 1) * tile), j));
    return f;
  };
  std::vector<std::pair<double, int64_t>> scores;  // (rms residual / scale, tile)
  for (const int64_t tile : tile_candidates())
    for (const double per_boundary : {1.0, w0}) {
      // Least squares of o = a pre + b post.
      double spp = 0, spq = 0, sqq = 0, spo = 0, sqo = 0;
      std::vector<Features> f(kTileRows);
      for (int64_t i = 0; i < kTileRows; ++i) {
        const Features x = f[static_cast<size_t>(i)] =
            features(tile, per_boundary, max_position(i));
        const double o = (*obs)[static_cast<size_t>(i)];
        spp += x.pre * x.pre, spq += x.pre * x.post, sqq += x.post * x.post;
        spo += x.pre * o, sqo += x.post * o;
      }
      const double det = spp * sqq - spq * spq;
      const double a = det != 0.0 ? (spo * sqq - sqo * spq) / det : 0.0;
      const double b = det != 0.0 ? (sqo * spp - spo * spq) / det : (sqq > 0 ? sqo / sqq : 0.0);
      double ss = 0.0;
      for (int64_t i = 0; i < kTileRows; ++i) {
        const Features& x = f[static_cast<size_t>(i)];
        const double r = (*obs)[static_cast<size_t>(i)] - a * x.pre - b * x.post;
        ss += r * r;
      }
      scores.push_back({std::sqrt(ss / kTileRows) / scale, tile});
    }
  return pick_tile(scores,
                   "the output as the maximum moves over " + std::to_string(kTileRows) +
                       " positions of " + std::to_string(kTileKeys) +
                       " keys, rescaled by a subnormal",
                   std::max(kOutputFit, 4.0 * oracle::unit_roundoff(o_format)));
}

// The tile from the LSE, for a kernel whose exponential is coarse enough to show: keys at logits
// -d (even) and -d-g (odd), the maximum (logit 0) at position j. Keys in tiles before j's are
// weighted w0 R (even) and U R (odd) (R, U, W: the kernel's exp~(-d), exp~(-g), exp~(-d-g),
// measured first), the rest R and W.
oracle::Expected<TileVerdict> run_tile_lse(Prober& pr, const PairsResult& pairs) {
  const double lb = pr.ln_base();
  // Step 1: the weights the design needs, measured: exp~(-d), exp~(-g), exp~(-d-g) for d, g from
  // a grid, a row each (key 1's logit -(u + w) from two components), and exp~(0).
  const std::vector<double> grid = {0.125, 0.25, 0.375, 0.5, 0.75, 1.0, 1.25};
  std::vector<std::pair<double, double>> rows = {{0.0, 0.0}};
  for (const double u : grid) rows.push_back({u, 0.0});
  for (size_t i = 0; i < grid.size(); ++i)
    for (size_t j = i; j < grid.size(); ++j) rows.push_back({grid[i], grid[j]});
  Grid g(1, kTileHeads, kPaddedKeys);
  g.pad_far();
  for (int64_t h = 0; h < kTileHeads; ++h) {
    g.qa(0, h, 0) = g.qa(0, h, 1) = 1.0f;
    if (static_cast<size_t>(h) < rows.size()) {
      g.ka(g.first() + 1, h, 0) = static_cast<float>(-rows[static_cast<size_t>(h)].first);
      g.ka(g.first() + 1, h, 1) = static_cast<float>(-rows[static_cast<size_t>(h)].second);
    }
  }
  auto w = pr.run("tile", std::move(g), 1);
  if (!w) return w.status();
  const std::vector<float>& wl = w->rank0_lse();
  const double w0 = std::exp(static_cast<double>(wl[0]) * lb) / 2.0;
  const auto measured = [&](double sum) -> Weight {
    for (size_t h = 1; h < rows.size(); ++h)
      if (rows[h].first + rows[h].second == sum)
        return weight_of(-sum, wl[h], lb, w0, pairs.r0, pairs.lse_format);
    return {};
  };
  // The pair (d, g) whose rescaled-versus-direct difference per key is largest against its
  // resolution; below kMinContrast resolutions the rows cannot tell one tile from another.
  constexpr double kMinContrast = 4.0;
  double best = 0.0, d = 0, gam = 0, R = 0, U = 0, W = 0;
  for (const double dd : grid)
    for (const double gg : grid) {
      const Weight r = measured(dd), u = measured(gg), x = measured(dd + gg);
      const double diff = std::fabs((w0 - 1.0) * r.p_obs + u.p_obs * r.p_obs - x.p_obs);
      const double res = r.r * r.p * (w0 + u.p) + u.r * u.p * r.p + x.r * x.p + 2.0 * kU32;
      if (diff / res > best)
        best = diff / res, d = dd, gam = gg, R = r.p_obs, U = u.p_obs, W = x.p_obs;
    }
  if (best < kMinContrast) {
    TileVerdict v;
    v.evidence =
        "not measurable: a rescaled key's weight and a direct one differ by less than "
        "4 times their resolution at every logit gap tried";
    return v;
  }
  // Step 2: a row per j.
  auto obs = run_tile_rows(
      pr,
      [&](Grid& t, int64_t h, int64_t jmax) {
        two_logit_row(t, h, jmax, static_cast<float>(d), static_cast<float>(gam), 0.0f);
      },
      [lb](const Outputs& o, int64_t h) {
        return static_cast<double>(o.rank0_lse()[static_cast<size_t>(h)]) * lb;
      });
  if (!obs) return obs.status();
  // l of a kernel with tiles of `tile` keys that rescales by its own exponential at every tile
  // boundary (kAlways: exp~(m_old - m_new), w0 where the maximum did not move), by its own only
  // where the maximum moves (kOnChange), or by an accurate one (kAccurate: e^-d where it moves).
  enum Rescale { kAlways, kOnChange, kAccurate };
  const double exact_r = std::exp(-d);
  const auto model = [&](int64_t tile, Rescale how, int64_t j) {
    double l = 0.0, m = -d;  // key 0 (even, logit -d) sets the first maximum
    for (int64_t t0 = 0; t0 < kTileKeys; t0 += tile) {
      const int64_t t1 = std::min(kTileKeys, t0 + tile);
      const bool has_max = j >= t0 && j < t1;
      const double m_new = (m == 0.0 || has_max) ? 0.0 : -d;
      if (t0 > 0) l *= m_new != m ? (how == kAccurate ? exact_r : R) : how == kAlways ? w0 : 1.0;
      const double odd = static_cast<double>(odd_keys(t0, t1, j));
      const double even = static_cast<double>(t1 - t0) - odd - (has_max ? 1.0 : 0.0);
      l += (has_max ? w0 : 0.0) + (m_new == 0.0 ? even * R + odd * W : even * w0 + odd * U);
      m = m_new;
    }
    return std::log(l);
  };
  // Scored by the rms of the LSE's residuals, no offset fitted: a kernel that rescales at every
  // boundary pays w0 once per boundary, which sets the level of the whole curve.
  std::vector<std::pair<double, int64_t>> scores;  // (rms residual, tile)
  for (const int64_t tile : tile_candidates())
    for (const Rescale how : {kAlways, kOnChange, kAccurate}) {
      double ss = 0.0;
      for (int64_t i = 0; i < kTileRows; ++i) {
        const double r = (*obs)[static_cast<size_t>(i)] - model(tile, how, max_position(i));
        ss += r * r;
      }
      scores.push_back({std::sqrt(ss / kTileRows), tile});
    }
  std::ostringstream what;
  what << "the LSE as the maximum moves over " << kTileRows << " positions of " << kTileKeys
       << " keys (logit gaps " << d << " and " << gam << ")";
  return pick_tile(scores, what.str(), kLseFit);
}

// --- rescale: the online softmax's rescale exponential ---------------------------------------

// Rows of two tiles of the kernel's `tile` keys: key 0 at logit 0 and key `tile` at logit b > 0,
// every other key at kFarLogit (weight 0). The first tile's maximum is 0, the second's b, so the
// kernel rescales the first tile's sums once, by its rescale exponential alpha~ = exp~(-b):
// l = w0 (1 + alpha~) (each key at its tile's maximum weighs exp~(0) = w0) and the LSE is
// b + ln w0 + ln(1 + alpha~). 16 tokens of 32 heads give b = c x, x in [0.25, 2.5] (bf16),
// c = 1 + t/64: 512 arguments in [-3.7, -0.25].
constexpr int64_t kRescaleTokens = 16, kRescaleHeads = 32;

oracle::Expected<ExpVerdict> run_rescale(Prober& pr, const PairsResult& pairs, int64_t tile,
                                         bool* resolved) {
  const int64_t keys = 2 * tile;
  Grid g(kRescaleTokens, kRescaleHeads, keys);
  const auto x_of = [](int64_t h) {
    return bf16(0.25 + 2.25 * static_cast<double>(h) / (kRescaleHeads - 1));
  };
  for (int64_t h = 0; h < kRescaleHeads; ++h) {
    for (int64_t t = 0; t < kRescaleTokens; ++t) {
      g.qa(t, h, 0) = static_cast<float>(token_scale(t));
      g.qa(t, h, kFar) = 1.0f;
    }
    for (int64_t j = 1; j < keys; ++j)
      if (j != tile) g.ka(j, h, kFar) = kFarLogit;
    g.ka(tile, h, 0) = static_cast<float>(x_of(h));
  }
  auto o = pr.run("rescale", std::move(g), 1);
  if (!o) return o.status();
  const double lb = pr.ln_base();
  std::vector<Weight> ws;
  for (int64_t t = 0; t < kRescaleTokens; ++t)
    for (int64_t h = 0; h < kRescaleHeads; ++h) {
      // The logit c x is exact in fp32 (7 and 8 significant bits): the kernel's m_new.
      const double b = token_scale(t) * x_of(h);
      const double L =
          static_cast<double>(o->rank0_lse()[static_cast<size_t>(t * kRescaleHeads + h)]);
      const double l = std::exp(L * lb - b);
      Weight w;
      w.a = -b;
      w.p = std::exp(-b);
      w.p_obs = l / pairs.w0 - 1.0;  // alpha~
      w.e = w.p_obs / w.p - 1.0;
      // l's own rounding and its log's, the LSE's storage, and w0's uncertainty, through
      // alpha~ = l / w0 - 1.
      w.r = l * (2.0 * kU32 + 1.5 * ulp_of(pairs.lse_format, L) * lb + pairs.r0) / w.p;
      ws.push_back(w);
    }
  *resolved =
      std::any_of(ws.begin(), ws.end(), [](const Weight& w) { return w.r <= kUsefulResolution; });
  return judge_exp(ws, std::nullopt, 0.0, "the rescales of a tile's sums");
}

// --- log: the LSE's logarithm ----------------------------------------------------------------

// Rows whose weights sum to an integer n exactly: n keys at logit 0 (each weight exp~(0)) and the
// rest at kFarLogit (weight 0), so the LSE is log~(n) (in the LSE's base), within exp~(0)'s error
// and the rounding of the sum of n such weights, both charged to the log here (a claim larger
// than the log's own error, never smaller). 128 rows, n spread log-uniformly over [2, 2048]
// (significands all over [1, 2)), in four runs of 32 heads, each run as long as its largest n;
// the pairs' rows (PairsResult::log) join them.
constexpr int64_t kLogHeads = 32, kLogRuns = 4, kLogMaxKeys = 2048, kLogMaxRanks = 8;
oracle::Expected<LogVerdict> run_kernel_log(Prober& pr, const PairsResult& pairs) {
  constexpr int64_t kRows = kLogHeads * kLogRuns;
  std::vector<int64_t> counts;  // ascending
  for (int64_t i = 0; i < kRows; ++i)
    counts.push_back(std::max<int64_t>(
        2, std::llround(std::exp2(1.0 + 10.0 * (static_cast<double>(i) + 0.5) / kRows))));
  LogVerdict v = pairs.log;
  for (int64_t run = 0; run < kLogRuns; ++run) {
    const int64_t* n = counts.data() + run * kLogHeads;
    Grid g(1, kLogHeads, std::min(kLogMaxKeys, n[kLogHeads - 1]));
    for (int64_t h = 0; h < kLogHeads; ++h) {
      g.qa(0, h, kFar) = 1.0f;
      for (int64_t j = n[h]; j < g.keys; ++j) g.ka(j, h, kFar) = kFarLogit;
    }
    auto o = pr.run("log", std::move(g), 1);
    if (!o) return o.status();
    for (int64_t h = 0; h < kLogHeads; ++h)
      note_log(v, o->rank0_lse()[static_cast<size_t>(h)], static_cast<double>(n[h]), pr.ln_base());
  }
  return v;
}

// Where the merged LSEs are fp32, the merge's log verdict; else nullopt. Two ranks of one key
// each, logits 0 and a = -c x (the pairs' grid, x in [0, 4.5]): partial LSEs L_0 and L_1, each
// its key's logit, merged to max + ln(1 + exp(gap)), an argument in (1, 2] and a result below 1
// (so its store is not a large LSE's); then N = 2 .. 8 equal ranks of one key at logit 0.
oracle::Expected<std::optional<LogVerdict>> run_merge_log(Prober& pr) {
  constexpr int64_t T = 16, H = 32;
  const auto x_of = [](int64_t h) { return bf16(4.5 * static_cast<double>(h) / (H - 1)); };
  Grid g(T, H, 2);  // key 0 on rank 0, key 1 on rank 1
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < T; ++t) g.qa(t, h, 0) = static_cast<float>(token_scale(t));
    g.ka(1, h, 0) = static_cast<float>(-x_of(h));
  }
  auto o = pr.run("merge log", std::move(g), 2);
  if (!o) return o.status();
  const double lb = pr.ln_base();
  LogVerdict v;
  std::vector<float> lses = o->lse;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const size_t i = static_cast<size_t>(t * H + h);
      // The partials' LSEs as returned (the merge's own log then alone, with its exponential);
      // else the keys' exact logits (the kernel's errors counted too).
      const double a = -token_scale(t) * x_of(h);  // natural units
      const double L0 = o->partial_lse.empty() ? 0.0 : o->partial_lse[0][i] * lb;
      const double L1 = o->partial_lse.empty() ? a : o->partial_lse[1][i] * lb;
      const double m = std::max(L0, L1);
      note_log(v, o->lse[i] - m / lb, 1.0 + std::exp(std::min(L0, L1) - m), lb);
    }
  for (int64_t n = 2; n <= kLogMaxRanks; ++n) {
    Grid e(1, n, n);  // key j on rank j: one key of logit 0 each (a head per rank, as TP takes)
    auto on = pr.run("merge log", std::move(e), n);
    if (!on) return on.status();
    lses.insert(lses.end(), on->lse.begin(), on->lse.end());
    for (size_t h = 0; h < on->lse.size(); ++h) {
      // Every rank's partial LSE is the same log~(exp~(0)); where the partials are returned the
      // merged LSE is measured from it, else from 0 (exp~(0)'s error then counts too).
      const double lr = on->partial_lse.empty() ? 0.0 : on->partial_lse[0][h];
      note_log(v, on->lse[h] - lr, static_cast<double>(n), lb);
    }
  }
  if (holding_format(lses) != DType::f32) return std::optional<LogVerdict>();
  return std::optional<LogVerdict>(v);
}

// --- merge: the implementation's own combine ------------------------------------------------

struct MergeVerdict {
  bool measured = false;
  std::string accum = "f32", lse_accum = "f32";
  ExpVerdict exp;
  std::string accum_evidence, lse_evidence;
};
oracle::Expected<MergeVerdict> run_merge(Prober& pr) {
  constexpr int64_t T = 4, H = 32, S = 64, kEqual = 4;  // heads [0, 4): the ranks' partials equal
  Grid g(T, H, S);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      g.qa(t, h, 0) = 1.0f;
      for (int64_t c = 1; c < kDim; ++c) g.qa(t, h, c) = bf16(u(rng) / 4.0);
    }
  for (int64_t h = 0; h < H; ++h) {
    // Rank 0 owns the even positions, rank 1 the odd: key 2i + 1 repeats key 2i, and rank 0's keys
    // gain a logit offset gap(h), so its LSE is about gap(h) above rank 1's.
    const double gap =
        h < kEqual ? 0.0 : bf16(-4.0 + 8.0 * static_cast<double>(h - kEqual) / (H - kEqual - 1));
    for (int64_t j = 0; j < S; j += 2)
      for (int64_t c = 0; c < kDim; ++c) {
        const float kc = c == 0 ? static_cast<float>(gap) : bf16(u(rng));
        const float vc = bf16(u(rng));
        g.ka(j, h, c) = kc;
        g.ka(j + 1, h, c) = c == 0 ? 0.0f : kc;
        g.va(j, h, c) = g.va(j + 1, h, c) = vc;
      }
  }
  auto out = pr.run("merge", std::move(g), 2);
  if (!out) return out.status();
  MergeVerdict v;
  if (out->partial_o.size() != 2) {
    v.accum_evidence = "not measured: the implementation returned no partials to merge";
    return v;
  }
  v.measured = true;
  const double lb = pr.ln_base();
  const DType lse_format = holding_format(out->lse);  // the merged LSE's
  double w0 = 0.0;
  int64_t n0 = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < kEqual; ++h) {
      const size_t i = static_cast<size_t>(t * H + h);
      if (out->partial_lse[0][i] != out->partial_lse[1][i]) continue;
      w0 += std::exp((static_cast<double>(out->lse[i]) - out->partial_lse[0][i]) * lb) / 2.0, ++n0;
    }
  w0 = n0 > 0 ? w0 / static_cast<double>(n0) : 1.0;
  std::vector<Weight> ws;
  double worst_o = 0.0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const size_t i = static_cast<size_t>(t * H + h);
      const double L0 = out->partial_lse[0][i] * lb, L1 = out->partial_lse[1][i] * lb;
      const double m = std::max(L0, L1), a = std::min(L0, L1) - m;
      Weight w;
      if (h >= kEqual) {
        w = weight_of(a, out->lse[i], lb, w0, 2.0 * kU32, lse_format, m);
        ws.push_back(w);
      }
      const double w_0 = std::exp(L0 - m), w_1 = std::exp(L1 - m), l = w_0 + w_1;
      for (int64_t c = 0; c < kDim; ++c) {
        const size_t e = i * kDim + static_cast<size_t>(c);
        const double o0 = out->partial_o[0][e], o1 = out->partial_o[1][e];
        const double exact = (w_0 * o0 + w_1 * o1) / l;
        const double scale = std::max((w_0 * std::fabs(o0) + w_1 * std::fabs(o1)) / l, 1e-30);
        // What the weights' own measured errors explain is not the sums'.
        const double weights =
            (std::fabs(w0 - 1.0) + std::fabs(w.e) + w.r) * std::fabs(o0 - o1) / scale;
        worst_o = std::max(worst_o, std::fabs(out->o[e] - exact) / scale - weights);
      }
    }
  v.exp = judge_exp(ws, w0 - 1.0, 2.0 * kU32, "gaps between the ranks' LSEs");
  // The weights' sum l = w0 + w in [1, 2]: a 16-bit one is off by up to half its ulp there, 2^-8
  // (bf16) or 2^-11 (f16), which the merged LSE shows as weight errors of that size; fp32's by
  // 2^-24. Whatever the cause, the merge's exponential claim covers every error seen.
  double worst_w = std::fabs(w0 - 1.0);
  for (const Weight& w : ws)
    if (w.r <= kUsefulResolution) worst_w = std::max(worst_w, std::fabs(w.e));
  const double f16_scale = oracle::unit_roundoff(DType::f16);
  v.lse_accum = worst_w <= f16_scale ? "f32" : "bf16";
  v.lse_evidence =
      "the merged LSE's weights off by at most " + sci(worst_w) +
      (worst_w <= f16_scale ? ", below a 16-bit sum's rounding (" + sci(f16_scale) + ")"
                            : ": a 16-bit sum or worse; bf16, the coarsest, claimed");
  std::ostringstream ev;
  ev << "merged O off by " << sci(std::max(worst_o, 0.0)) << " of its scale beyond what the "
     << "weights' measured errors explain";
  constexpr double kRanks = 2.0;
  if (worst_o <= 8.0 * kRanks * kU32) {
    v.accum = "f32";
  } else if (worst_o <= 4.0 * kRanks * oracle::unit_roundoff(DType::f16)) {
    v.accum = "f16";
  } else {
    v.accum = "bf16";
    if (worst_o > 4.0 * kRanks * oracle::unit_roundoff(DType::bf16))
      ev << ": more than a bf16 sum explains; bf16, the coarsest, claimed";
  }
  v.accum_evidence = ev.str();
  return v;
}

// The merge's form (docs/tolerances.md §5): two ranks (keys alternate, rank 0 the even positions)
// of n_0 and n_1 keys of logit 0 (the rest at kFarLogit, weight 0), each rank's sharing its value,
// v_0 and v_1, multiples of 2^-3 in [-1, 1]: each partial is its value, within the kernel's
// exp(0) and fp32 roundings before its store (exactly, after a 16-bit one), each weight n_r / 8
// (or / 4) within the merge's exponential. Every term and every partial sum is then a multiple
// of 2^-6 below 2 in magnitude, held by bf16 and f16: a scaled sum rounds each term back to its
// exact value and is exact, whatever its order. A merge in other units, weights exp(L_r - M), M
// the larger LSE (3/5, 1/7, 1/3) or the smaller (5/3, 7, 3), rounds some 16-bit terms, and a sum
// that cancels shows it after the division and the output's store. Each pair of counts is drawn
// on two heads, with values of their own.
struct FormVerdict {
  bool scaled = false;
  std::string evidence;
};
oracle::Expected<FormVerdict> run_merge_form(Prober& pr) {
  constexpr int64_t S = 16;
  constexpr std::array<std::pair<int64_t, int64_t>, 6> kKeys = {
      {{5, 3}, {3, 5}, {7, 1}, {1, 7}, {3, 1}, {1, 3}}};
  constexpr int64_t H = 2 * static_cast<int64_t>(kKeys.size());
  Grid g(1, H, S);
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> eighths(-8, 8);
  std::vector<double> exact(static_cast<size_t>(H * kDim), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    const auto [n0, n1] = kKeys[static_cast<size_t>(h) % kKeys.size()];
    g.qa(0, h, kFar) = 1.0f;
    std::array<std::vector<float>, 2> v;
    for (auto& x : v) {
      x.resize(static_cast<size_t>(kFar));
      for (float& c : x) c = static_cast<float>(eighths(rng)) / 8.0f;
    }
    for (int64_t j = 0; j < S; ++j) {
      const int64_t r = j % 2, held = r == 0 ? n0 : n1;
      if (j / 2 >= held) {
        g.ka(j, h, kFar) = kFarLogit;
        continue;
      }
      for (int64_t c = 0; c < kFar; ++c)
        g.va(j, h, c) = v[static_cast<size_t>(r)][static_cast<size_t>(c)];
    }
    for (int64_t c = 0; c < kFar; ++c)
      exact[static_cast<size_t>(h * kDim + c)] =
          (static_cast<double>(n0) * v[0][static_cast<size_t>(c)] +
           static_cast<double>(n1) * v[1][static_cast<size_t>(c)]) /
          static_cast<double>(n0 + n1);
  }
  auto out = pr.run("merge form", std::move(g), 2);
  if (!out) return out.status();
  FormVerdict v;
  if (out->partial_o.size() != 2) {
    v.evidence = "not measured: the implementation returned no partials";
    return v;
  }
  int64_t off = 0, elements = 0;
  double worst = 0.0;
  for (size_t e = 0; e < exact.size(); ++e) {
    if (static_cast<int64_t>(e % kDim) == kFar) continue;
    ++elements;
    const double d = std::fabs(out->o[e] - exact[e]);
    if (d > 0.0) ++off, worst = std::max(worst, d);
  }
  v.scaled = off == 0;
  v.evidence = v.scaled ? "all " + std::to_string(elements) +
                              " elements exact where the weights are eighths or quarters and the "
                              "terms need no rounding: a sum of exp(L_r - L) O_r that is the output"
                        : std::to_string(off) + " of " + std::to_string(elements) +
                              " elements off, by up to " + sci(worst) +
                              ", where a sum of exp(L_r - L) O_r would be exact: any form";
  return v;
}

}  // namespace

ProbeTarget production_target(const gpu::KernelMath& math, int64_t tile) {
  ProbeTarget t;
  t.cfg.math = math;
  t.cfg.strategy =
      math.merge == gpu::StorageFormat::f32 ? gpu::CommStrategy::a2a : gpu::CommStrategy::ag_rs;
  t.cfg.tile = tile;
  const std::string m = describe(math);
  t.label = "the production path (host" + (m.empty() ? std::string() : ", " + m) + ", tile " +
            std::to_string(tile) + ")";
  return t;
}

Footprint probe_footprint() {
  constexpr double kKvBytes = 2.0 * kSumsKeys * kSumsHeads * kDim * sizeof(float);
  constexpr double kCopies = 4.0;
  // Steps: the sums rows (keys x heads x (Dk + Dv)), four times (sums, midpoints twice, the
  // truncation models); the tile rows (2,048 keys x 64 heads x (Dk + Dv)), five calls; the tile
  // fits (candidates x habits x rows x keys, 132 x 3 x 128 x 2,048 at most); the rescale rows
  // (16 tokens x 32 heads x two tiles of up to 2,048 keys, as many keys as the sums' rows); the
  // dot lanes rows (at most 32 rows of 256 keys x (256 + 256) at each of its three widths); the
  // log rows (four runs of 32 heads, each of at most 2,048 keys; the merges' are a few keys).
  const double work = 4.0 * kSumsKeys * kSumsHeads * 2.0 * kDim +
                      5.0 * 2.0 * kTileRows * kTileStride * kTileHeads * 2.0 * kDim +
                      132.0 * 3.0 * kTileRows * kTileKeys +
                      kRescaleTokens * kRescaleHeads * 2.0 * kTileKeys * 2.0 * kDim +
                      3.0 * 32.0 * 256.0 * 2.0 * 256.0 +
                      kLogRuns * kLogHeads * kLogMaxKeys * 2.0 * kDim;
  return {kCopies * kKvBytes, work, "the sums experiment's K and V"};
}

double round_up_2sig(double x) {
  if (!(x > 0.0) || !std::isfinite(x)) return x;
  const double step = std::pow(10.0, std::floor(std::log10(x)) - 1.0);  // x in [10 step, 100 step)
  double r = std::stod(claim_number(std::ceil(x / step) * step));
  while (r < x) r = std::stod(claim_number(r + step));
  return r;
}

oracle::Expected<ProbeReport> probe(const ProbeTarget& target) {
  Prober pr(target);
  ProbeReport rep;
  rep.label = target.label;
  rep.lse_base = target.cfg.base == gpu::LseBase::e ? "e" : "2";
  ProbeClaim& c = rep.claim;
  const auto start = [&](const char* experiment) {
    rep.calls = pr.calls();
    if (target.on_experiment) target.on_experiment(experiment, rep);
  };
  // The logs measured (whose, and what was seen), and why any the implementation takes was not.
  std::vector<std::pair<std::string, LogVerdict>> logs;
  std::vector<std::string> log_gaps;

  if (target.attend) {
    start("the partial's weights, format and P cast (pairs of keys)");
    auto pairs = run_pairs(pr);
    if (!pairs) return pairs.status();
    c.partial_dtype = format_word(pairs->o_format);
    const std::string outputs = std::to_string(pairs->o.size() * kDim) + " outputs";
    rep.findings.push_back({"partial O format", c.partial_dtype,
                            pairs->o_format == DType::f32
                                ? outputs + ", not all of them 16-bit values"
                                : "every one of " + outputs + " a " + c.partial_dtype + " value"});
    rep.findings.push_back({"partial LSE format", format_word(pairs->lse_format),
                            pairs->lse_format == DType::f32
                                ? "fp32 values (the exponential is measured through them)"
                                : "16-bit values: the exponential is measured coarsely"});
    const ExpVerdict e =
        judge_exp(pairs->weights, pairs->w0 - 1.0, pairs->r0, "the kernel's weights", true);
    c.exp_rel_err = e.claim;
    c.exp_bias = e.bias;
    rep.findings.push_back(
        {"exponential", e.claim == 0.0 ? "default" : claim_number(e.claim), e.evidence});
    const CastVerdict cast = judge_cast(*pairs);
    if (cast.tf32) c.accum = "tf32";
    if (cast.cast) c.p_cast = format_word(*cast.cast);
    rep.findings.push_back({"P before P.V",
                            cast.cast   ? format_word(*cast.cast) + (cast.tf32 ? " and tf32" : "")
                            : cast.tf32 ? "tf32"
                                        : "not rounded",
                            cast.evidence});

    start("the dots' order (cancelling keys)");
    auto lanes = run_dot_lanes(pr, 2.0 * (oracle::unit_roundoff(pairs->o_format) +
                                          (cast.cast ? oracle::unit_roundoff(*cast.cast) : 0.0)));
    if (!lanes) return lanes.status();
    c.dot_lanes = lanes->lanes;
    rep.findings.push_back({"dots' order",
                            lanes->lanes == 1  ? "left to right"
                            : lanes->lanes > 1 ? std::to_string(lanes->lanes) + " lanes"
                                               : "any",
                            lanes->evidence});

    start("the sums' rounding");
    auto sums = run_sums(pr);
    if (!sums) return sums.status();
    if (sums->hidden && pairs->o_format != DType::f32) {  // the bias's sign, through midpoints
      // The weight of a logit-0 key as the P.V product takes it, and kappa's resolution (w0's
      // own where it is not cast).
      const CastModel as_cast{cast.cast, cast.tf32 && !cast.cast, false};
      const double w0_cast = as_cast.round(pairs->w0);
      const double r_kappa = sums->r_l + (cast.cast || cast.tf32 ? 0.0 : pairs->r0);
      start("the sums' rounding, at midpoints");
      auto mid = run_midpoints(pr, w0_cast, sums->l, r_kappa, pairs->o_format);
      if (!mid) return mid.status();
      mid->evidence = sums->evidence + "; " + mid->evidence;
      sums = std::move(mid);
    } else if (sums->hidden) {
      sums->evidence += ", so any rounding is claimed";
    }
    c.accum_rounding = sums->rounding;
    rep.findings.push_back({"sums' rounding", sums->rounding, sums->evidence});

    // The tile: from subnormal rescales where the kernel keeps subnormals, and from the LSE where
    // that did not resolve it and the exponential is coarse enough to show; the smaller of two
    // resolved tiles.
    start("the rescale tile, through subnormal rescales");
    auto tile = run_tile_subnormal(pr, pairs->w0, pairs->o_format);
    if (!tile) return tile.status();
    if (tile->flushed) c.ftz = true;
    if (!tile->resolved && c.exp_rel_err > 0.0) {
      start("the rescale tile, through the LSE");
      auto by_lse = run_tile_lse(pr, *pairs);
      if (!by_lse) return by_lse.status();
      by_lse->evidence = tile->evidence + "; " + by_lse->evidence;
      by_lse->flushed = tile->flushed;
      if (by_lse->resolved || by_lse->tile < tile->tile) tile = std::move(by_lse);
    }
    c.tile = tile->tile;
    rep.findings.push_back({"rescale tile", std::to_string(tile->tile), tile->evidence});

    // The rescales' own exponential, where the tile is known: stated where it is clearly finer
    // than the weights' (a scalar library exp beside a vectorized polynomial: a quarter of the
    // claim or less) or coarser; else the kernel's.
    if (tile->resolved && tile->tile > 1) {
      bool resolved = false;
      start("the rescale exponential");
      auto rescale = run_rescale(pr, *pairs, tile->tile, &resolved);
      if (!rescale) return rescale.status();
      const auto budget = [](double claim) { return claim > 0.0 ? claim : kDefaultExp; };
      const double r = budget(rescale->claim), k = budget(c.exp_rel_err);
      std::string finding = "the kernel's";
      if (!resolved) {
        rescale->evidence = "not resolved: " + rescale->evidence;
      } else if (r > k || kRescaleFiner * r <= k) {
        c.rescale_exp_rel_err = rescale->claim;
        finding = rescale->claim == 0.0 ? "default" : claim_number(rescale->claim);
      } else {
        rescale->evidence += "; the weights' exponential's claim covers it";
      }
      rep.findings.push_back({"rescale exponential", finding, rescale->evidence});
    } else {
      rep.findings.push_back({"rescale exponential", "the kernel's",
                              "not measured: the rescales' tile is not resolved"});
    }
    if (pairs->lse_format == DType::f32) {
      start("the partial LSE's log (integer sums)");
      auto log = run_kernel_log(pr, *pairs);
      if (!log) return log.status();
      logs.push_back({"its partials' LSEs", *log});
    } else {
      log_gaps.push_back("the partial LSE is stored in 16 bits");
    }
  } else {
    rep.findings.push_back({"partial", "not measured",
                            "the implementation computes no partials (the suite's own run)"});
  }

  if (target.merge) {
    start("the merge");
    auto merge = run_merge(pr);
    if (!merge) return merge.status();
    if (merge->measured) {
      c.merged = true;
      c.merge_accum = merge->accum;
      c.merge_lse_accum = merge->lse_accum;
      c.merge_exp_rel_err = merge->exp.claim;
      rep.findings.push_back({"merge sums", merge->accum, merge->accum_evidence});
      rep.findings.push_back({"merge LSE sum", merge->lse_accum, merge->lse_evidence});
      rep.findings.push_back({"merge exponential",
                              merge->exp.claim == 0.0 ? "default" : claim_number(merge->exp.claim),
                              merge->exp.evidence});
      // The form matters where the sums round coarsely: a 16-bit sum exact in the output's units.
      // Beside a 16-bit weight sum a division by it after the sum would round the output, and
      // the experiment could not tell: measured beside an fp32 one only.
      if (c.merge_accum != "f32" && c.merge_lse_accum == "f32") {
        start("the merge's form");
        auto form = run_merge_form(pr);
        if (!form) return form.status();
        c.merge_scaled = form->scaled;
        rep.findings.push_back({"merge form", form->scaled ? "scaled" : "any", form->evidence});
      } else {
        rep.findings.push_back({"merge form", "any",
                                c.merge_accum == "f32"
                                    ? "not measured: an fp32 sum's form moves its bound by little"
                                    : "not measured: beside a 16-bit weight sum a division after "
                                      "the sum is not seen"});
      }
      start("the merge's log (equal partials)");
      auto log = run_merge_log(pr);
      if (!log) return log.status();
      if (*log)
        logs.push_back({"its merged LSEs", **log});
      else
        log_gaps.push_back("the merged LSE is stored in 16 bits");
    } else {
      rep.findings.push_back({"merge", "not measured", merge->accum_evidence});
      log_gaps.push_back("its merge is not measured");
    }
  } else {
    rep.findings.push_back({"merge", "not measured", "the implementation has no merge of its own"});
  }

  if (target.unprobed_step) log_gaps.push_back("its step level is not probed, nor its logs");
  // The logs: claimed where every log the implementation takes itself was measured and the largest
  // error seen, with a quarter's margin and at least an ulp, is below the default budget; the
  // production path's own logs (libm's logf, within an ulp) are inside any such claim.
  if (logs.empty() && log_gaps.empty()) {
    rep.findings.push_back(
        {"log", "default", "not measured: the implementation takes no log of its own"});
  } else {
    double worst = 0.0;
    std::ostringstream ev;
    for (const auto& [whose, v] : logs) {
      worst = std::max(worst, v.worst);
      ev << (ev.tellp() > 0 ? "; " : "") << "largest |error| " << sci(v.worst)
         << " of max(1, |log|) (at " << fixed(v.at, v.at == std::floor(v.at) ? 0 : 3) << ") over "
         << v.samples << " arguments (" << whose << ")";
    }
    const double claim = round_up_2sig(kExpMargin * std::max(worst, kLogFloor));
    std::string finding = "default";
    if (!log_gaps.empty()) {
      for (const std::string& gap : log_gaps) ev << (ev.tellp() > 0 ? "; " : "") << gap;
      ev << ": the default kept";
    } else if (claim > kLogDefault) {
      ev << ": with a quarter's margin " << sci(claim)
         << ", above the default budget (3 ulp), which is kept (an exp(0) off by more than an ulp "
            "shows here too, and exp_rel_err covers it)";
    } else {
      c.log_rel_err = claim;
      finding = claim_number(claim);
      ev << "; claimed with a quarter's margin, at least an ulp";
    }
    rep.findings.push_back({"log", finding, ev.str()});
  }
  rep.calls = pr.calls();
  return rep;
}

std::vector<std::pair<std::string, std::string>> claim_metadata(const ProbeClaim& c) {
  std::vector<std::pair<std::string, std::string>> w = {{"accum", c.accum},
                                                        {"accum_rounding", c.accum_rounding},
                                                        {"p_cast", c.p_cast},
                                                        {"partial_dtype", c.partial_dtype}};
  if (c.exp_rel_err > 0.0) w.push_back({"exp_rel_err", claim_number(c.exp_rel_err)});
  if (c.exp_bias > 0.0) w.push_back({"exp_bias", claim_number(c.exp_bias)});
  w.push_back({"tile", std::to_string(c.tile)});
  if (c.dot_lanes > 0) w.push_back({"dot_lanes", std::to_string(c.dot_lanes)});
  // The word's default is exp_rel_err: rescales within 2 ulp beside a coarser kernel say so.
  if (c.rescale_exp_rel_err)
    w.push_back({"rescale_exp_rel_err",
                 claim_number(*c.rescale_exp_rel_err > 0.0 ? *c.rescale_exp_rel_err
                                                           : round_up_2sig(kDefaultExp))});
  if (c.log_rel_err > 0.0) w.push_back({"log_rel_err", claim_number(c.log_rel_err)});
  if (c.ftz) w.push_back({"ftz", "1"});
  if (c.merged) {
    w.push_back({"merge_accum", c.merge_accum});
    w.push_back({"merge_lse_accum", c.merge_lse_accum});
    // The word's default is exp_rel_err: a merge within 2 ulp beside a coarser kernel says so.
    if (c.merge_exp_rel_err > 0.0 || c.exp_rel_err > 0.0)
      w.push_back({"merge_exp_rel_err",
                   claim_number(c.merge_exp_rel_err > 0.0 ? c.merge_exp_rel_err
                                                          : round_up_2sig(kDefaultExp))});
    if (c.merge_scaled) w.push_back({"merge_form", "scaled"});
  }
  return w;
}

std::string claim_words(const ProbeClaim& c) {
  std::string out;
  for (const auto& [word, value] : claim_metadata(c))
    out += (out.empty() ? "" : "  ") + word + " " + value;
  return out;
}

namespace {

// The formats the plug-in ABI's claim states (dcpv_claim: F32, BF16, F16).
bool abi_format(const std::string& f) { return f == "f32" || f == "bf16" || f == "f16"; }
// The coarser of two such formats.
std::string coarser(const std::string& a, const std::string& b) {
  const auto bits = [](const std::string& f) { return f == "bf16" ? 8 : f == "f16" ? 11 : 24; };
  return bits(a) <= bits(b) ? a : b;
}

// The claim as the plug-in ABI states it, coarsened where it has fewer words: its one exponential
// is the kernel's and the merge's (the larger claim), its combine format both merge sums' (the
// coarser).
nlohmann::ordered_json abi_claim_json(const ProbeClaim& c) {
  nlohmann::ordered_json j;
  j["accum"] = c.accum;
  j["accum_rounding"] = c.accum_rounding;
  j["ftz"] = c.ftz;
  j["p_cast"] = c.p_cast;
  j["partial_dtype"] = c.partial_dtype;
  const double exp = std::max(
      {c.exp_rel_err, c.merged ? c.merge_exp_rel_err : 0.0, c.rescale_exp_rel_err.value_or(0.0)});
  j["exp_rel_err"] = exp > 0.0 ? std::stod(claim_number(exp)) : 0.0;
  if (c.log_rel_err > 0.0) j["log_rel_err"] = std::stod(claim_number(c.log_rel_err));
  j["tile"] = c.tile;
  if (c.merged) j["merge_accum"] = coarser(c.merge_accum, c.merge_lse_accum);
  return j;
}

}  // namespace

std::string claim_python(const ProbeClaim& c) { return abi_claim_json(c).dump(); }

std::string probe_findings_text(const ProbeReport& r) {
  std::ostringstream os;
  os << "# dcp-verify probe: " << r.label << "  lse_base=" << r.lse_base << "  (" << r.calls
     << " steps run)\n";
  size_t w1 = 8, w2 = 7;
  for (const ProbeFinding& f : r.findings)
    w1 = std::max(w1, f.what.size()), w2 = std::max(w2, f.finding.size());
  const auto pad = [](const std::string& s, size_t w) {
    return s + std::string(w - std::min(w, s.size()), ' ');
  };
  os << "#  " << pad("measured", w1) << "  " << pad("finding", w2) << "  evidence\n";
  for (const ProbeFinding& f : r.findings)
    os << "   " << pad(f.what, w1) << "  " << pad(f.finding, w2) << "  "
       << oracle::one_line(f.evidence) << "\n";
  return os.str();
}

std::string probe_text(const ProbeReport& r) {
  std::ostringstream os;
  os << probe_findings_text(r);
  const ProbeClaim& c = r.claim;
  os << "# the claim, in the result files' metadata words (docs/format.md):\n"
     << claim_words(c) << "\n"
     << "# as an implementation's claim (dcp_verify.properties, the plug-in ABI's fields):\n"
     << claim_python(c) << "\n";
  if ((c.merged && (c.merge_exp_rel_err != c.exp_rel_err || c.merge_lse_accum != c.merge_accum)) ||
      c.rescale_exp_rel_err)
    os << "# (the ABI has one exponential and one merge format: the coarser of each is there)\n";
  if (c.exp_bias > 0.0)
    os << "# (the ABI has no exp_bias: there the exponential's error is charged whole)\n";
  if (c.dot_lanes > 0)
    os << "# (the ABI has no dot_lanes: there the dots are bounded in any order)\n";
  if (c.merge_scaled)
    os << "# (the ABI has no merge_form: there the merge is bounded in any form)\n";
  if (!abi_format(c.p_cast == "none" ? "f32" : c.p_cast) || !abi_format(c.partial_dtype))
    os << "# the ABI cannot state an fp8 P cast or partial: judge this kernel's results with "
          "check\n";
  os << "# measured, not proven: the exponential's and the log's errors are the largest over the "
        "arguments tried; not measured, state them where they apply: splits, tf32 q.k, a 16-bit "
        "accum\n";
  return os.str();
}

nlohmann::json probe_json(const ProbeReport& r) {
  nlohmann::json j;
  j["schema"] = "dcp-verify/probe/1";
  j["label"] = r.label;
  j["lse_base"] = r.lse_base;
  j["steps"] = r.calls;
  nlohmann::json fs = nlohmann::json::array();
  for (const ProbeFinding& f : r.findings)
    fs.push_back({{"measured", f.what}, {"finding", f.finding}, {"evidence", f.evidence}});
  j["findings"] = fs;
  nlohmann::json words = nlohmann::json::object();
  for (const auto& [word, value] : claim_metadata(r.claim)) words[word] = value;
  j["words"] = words;
  j["claim_words"] = claim_words(r.claim);
  j["claim"] = abi_claim_json(r.claim);
  return j;
}

}  // namespace dcp::props
