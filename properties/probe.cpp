#include "properties/probe.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "gpu/kernels/kernel_math.hpp"
#include "gpu/run_threads.hpp"
#include "oracle/dtype.hpp"
#include "oracle/text.hpp"

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

// The spacing of fp32 values at |x| (its ulp), and of a format with `bits` significand bits.
double ulp_bits(double x, int bits) {
  if (x == 0.0 || !std::isfinite(x)) return std::ldexp(1.0, -149);
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - bits, -149));
}
int significand_bits(DType f) { return f == DType::bf16 ? 8 : f == DType::f16 ? 11 : 24; }
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

// The smallest format all values are exactly in: bf16, f16 or f32.
DType holding_format(const std::vector<float>& xs) {
  for (const DType f : {DType::bf16, DType::f16})
    if (std::all_of(xs.begin(), xs.end(), [f](float x) { return oracle::representable(f, x); }))
      return f;
  return DType::f32;
}

std::string format_word(DType f) {
  return f == DType::bf16 ? "bf16" : f == DType::f16 ? "f16" : "f32";
}

// One experiment's inputs: T query tokens, H query heads over H KV heads (no GQA), S keys, every
// vector kDim wide; no mask (not causal, no window), scale 1, every query at the last position.
struct Grid {
  int64_t tokens, heads, keys;
  std::vector<float> q, k, v;  // [T, H, kDim], [S, H, kDim], [S, H, kDim]
  Grid(int64_t t, int64_t h, int64_t s)
      : tokens(t),
        heads(h),
        keys(s),
        q(static_cast<size_t>(t * h * kDim)),
        k(static_cast<size_t>(s * h * kDim)),
        v(static_cast<size_t>(s * h * kDim)) {}
  float& qa(int64_t t, int64_t h, int64_t c) {
    return q[static_cast<size_t>((t * heads + h) * kDim + c)];
  }
  float& ka(int64_t j, int64_t h, int64_t c) {
    return k[static_cast<size_t>((j * heads + h) * kDim + c)];
  }
  float& va(int64_t j, int64_t h, int64_t c) {
    return v[static_cast<size_t>((j * heads + h) * kDim + c)];
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
    in.dims = {tokens, heads, heads, kDim, kDim, false};
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

// What one run returned: rank r's partial (O [T, H, kDim], LSE [T, H] as stored, in the base's
// units) and the merged output, for ranks = 1 the partial where the backend returns it.
struct Outputs {
  std::vector<std::vector<float>> partial_o, partial_lse;
  std::vector<float> o, lse;
};

class Prober {
 public:
  explicit Prober(const ProbeTarget& t) : t_(t) {}

  double ln_base() const { return t_.cfg.base == gpu::LseBase::e ? 1.0 : std::log(2.0); }

  oracle::Expected<Outputs> run(const char* experiment, Grid g, int64_t ranks) {
    const int64_t T = g.tokens, H = g.heads;
    gpu::DcpConfig cfg = t_.cfg;
    cfg.layout = {ranks, 1};
    cfg.tp_size = ranks;
    cfg.page_size = 0;
    const gpu::DcpInputs in = std::move(g).inputs();
    ++calls;
    gpu::Result<gpu::GroupRun> r = t_.backend ? t_.backend(in, cfg) : gpu::run_dcp_threads(in, cfg);
    if (!r) return DCP_ERROR("experiment '", experiment, "': ", r.status().message());
    Outputs out;
    const size_t no = static_cast<size_t>(T * H * kDim), nl = static_cast<size_t>(T * H);
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
    return out;
  }

  const ProbeTarget& t_;
  int64_t calls = 0;
};

// A weight measured through an LSE: ln l = L, with l = w0 + p, w0 (the kernel's own weight of the
// row's maximum) known. p's relative error e = p_obs / p - 1 and the resolution r of that, from the
// LSE's storage (half an ulp of its format, a rounding of its log) and l's own fp32 rounding.
struct Weight {
  double a = 0, p = 0, p_obs = 0, e = 0, r = 0;
};
// `shift`: the row's maximum, in natural units, where the LSE is not relative to it (a merge's).
Weight weight_of(double a, double lse_stored, double ln_base, double w0, DType lse_format,
                 double shift = 0.0) {
  Weight w;
  w.a = a;
  w.p = std::exp(a);
  const double l = std::exp(lse_stored * ln_base - shift);
  w.p_obs = l - w0;
  w.e = w.p_obs / w.p - 1.0;
  w.r = l / w.p * (2.0 * kU32 + 1.5 * ulp_of(lse_format, lse_stored) * ln_base);
  return w;
}

// What a set of measured weights says of an exponential: the claim (0: within the default) and the
// evidence line.
struct ExpVerdict {
  double claim = 0.0;
  std::string evidence;
};
ExpVerdict judge_exp(const std::vector<Weight>& ws, double e0, double r0, const char* what) {
  double worst = std::fabs(e0), at = 0.0, sum = 0.0, res = r0, lo = 0.0;
  bool within_default = std::fabs(e0) <= kDefaultExp + r0;
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
  ev << "largest |error| " << sci(worst) << " (at " << fixed(at, 3) << "), mean "
     << sci(n > 0 ? sum / static_cast<double>(n) : 0.0) << ", over " << n << " arguments in ["
     << fixed(lo, 2) << ", 0] (" << what << "); resolution <= " << sci(res) << "; exp(0) off by "
     << sci(e0);
  if (within_default) {
    ev << ": within 2 ulp at that resolution";
  } else {
    v.claim = round_up_2sig(kExpMargin * worst);
    ev << "; claimed with a quarter's margin";
  }
  v.evidence = ev.str();
  return v;
}

// --- pairs: the exponential, the P cast, the partial's format ------------------------------------

struct PairsResult {
  DType o_format = DType::f32, lse_format = DType::f32;
  double w0 = 1.0, r0 = 0.0;  // the kernel's exp(0), and its resolution
  std::vector<Weight> weights;
  std::vector<float> o;  // each sample's O (column 0)
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
  const auto c_of = [](int64_t t) { return 1.0 + static_cast<double>(t) / 64.0; };  // 7 bits
  std::vector<Outputs> outs;
  std::vector<float> all_o, all_lse;
  for (const auto& x : xs) {
    Grid g(T, H, kPaddedKeys);
    g.pad_far();
    const int64_t j0 = g.first();
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = 0; t < T; ++t) g.qa(t, h, 0) = static_cast<float>(c_of(t));
      g.ka(j0 + 1, h, 0) = static_cast<float>(-x[static_cast<size_t>(h)]);
      for (int64_t c = 0; c < kDim; ++c) g.va(j0, h, c) = -1.0f, g.va(j0 + 1, h, c) = 1.0f;
    }
    auto o = pr.run("pairs", std::move(g), 1);
    if (!o) return o.status();
    const std::vector<float>& po = o->partial_o.empty() ? o->o : o->partial_o[0];
    const std::vector<float>& pl = o->partial_lse.empty() ? o->lse : o->partial_lse[0];
    all_o.insert(all_o.end(), po.begin(), po.end());
    all_lse.insert(all_lse.end(), pl.begin(), pl.end());
    outs.push_back({{po}, {pl}, {}, {}});
  }
  PairsResult res;
  res.o_format = holding_format(all_o);
  res.lse_format = holding_format(all_lse);
  const double lb = pr.ln_base();
  // exp~(0): l = 2 w0 on head 0 of the first grid, every token alike.
  double w0 = 0.0;
  for (int64_t t = 0; t < T; ++t)
    w0 += std::exp(static_cast<double>(outs[0].partial_lse[0][static_cast<size_t>(t * H)]) * lb) /
          2.0;
  res.w0 = w0 / T;
  const double l0 = 2.0 * res.w0;
  res.r0 = l0 / 2.0 * (2.0 * kU32 + 1.5 * ulp_of(res.lse_format, std::log(l0) / lb) * lb);
  for (size_t gi = 0; gi < xs.size(); ++gi)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = gi == 0 ? 1 : 0; h < H; ++h) {
        const double a = -c_of(t) * xs[gi][static_cast<size_t>(h)];
        const size_t i = static_cast<size_t>(t * H + h);
        res.weights.push_back(weight_of(a, outs[gi].partial_lse[0][i], lb, res.w0, res.lse_format));
        res.o.push_back(outs[gi].partial_o[0][i * kDim]);
      }
  return res;
}

// How P reaches the P.V product: rounded to a format before it (raw weights, or weights already
// divided by l), or not at all. The O of a pairs row under each, for its measured weights.
struct CastModel {
  std::string name;  // "none", "tf32", "f16", "bf16"
  std::function<double(double)> round;
  bool normalized;  // P / l rounded, not P
};
std::vector<CastModel> cast_models() {
  const auto tf32 = [](double x) {
    return static_cast<double>(gpu::round_tf32(static_cast<float>(x)));
  };
  const auto f16 = [](double x) { return oracle::round_to(DType::f16, x); };
  const auto bf = [](double x) { return oracle::round_to(DType::bf16, x); };
  return {{"none", [](double x) { return x; }, false},
          {"tf32", tf32, false},
          {"tf32", tf32, true},
          {"f16", f16, false},
          {"f16", f16, true},
          {"bf16", bf, false},
          {"bf16", bf, true}};
}

struct CastVerdict {
  std::string cast = "bf16";
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
      // is not judged on this row.
      const double lo = w.p_obs - w.r * w.p, hi = w.p_obs + w.r * w.p;
      const auto model_o = [&](double p) {
        return cm.normalized ? cm.round(p / l) - cm.round(pr.w0 / l)
                             : (cm.round(p) - cm.round(pr.w0)) / l;
      };
      const double a = model_o(lo), b = model_o(hi);
      const double o_model = oracle::round_to(pr.o_format, 0.5 * (a + b));
      const double spread = std::fabs(a - b) + 4.0 * kU32 * (std::fabs(a) + 2.0);
      const double tol =
          spread + (pr.o_format == DType::f32 ? 2.0 : 1.0) * ulp_of(pr.o_format, o_model);
      if (std::fabs(static_cast<double>(pr.o[i]) - o_model) > tol) ++misses[m];
    }
  }
  // A cast explains the outputs when one of its models misses none (0.5% allowed for rows at a
  // rounding boundary of the output format); of those, the coarsest is claimed.
  const int64_t allowed = used / 200;
  const auto explains = [&](const std::string& name) {
    for (size_t m = 0; m < models.size(); ++m)
      if (models[m].name == name && misses[m] <= allowed) return true;
    return false;
  };
  const auto best_misses = [&](const std::string& name) {
    int64_t b = used;
    for (size_t m = 0; m < models.size(); ++m)
      if (models[m].name == name) b = std::min(b, misses[m]);
    return b;
  };
  CastVerdict v;
  std::vector<std::string> fitting;
  for (const char* name : {"none", "tf32", "f16", "bf16"})
    if (explains(name)) fitting.push_back(name);
  std::ostringstream ev;
  for (const char* name : {"none", "tf32", "f16", "bf16"})
    ev << (std::string(name) == "none" ? "" : ", ") << name << " misses " << best_misses(name);
  ev << " of " << used << " outputs";
  if (fitting.empty()) {
    ev << ": no cast explains every output; the coarsest (bf16) claimed";
  } else {
    v.cast = fitting.back();
    if (v.cast == "f16" && explains("tf32")) {
      v.cast = "tf32+f16";  // 11 bits either way: tf32's range and f16's, both claimed
      ev << ": tf32 and f16 (both 11 bits) fit, both claimed";
    } else if (fitting.size() > 1) {
      ev << ": several fit, the coarsest claimed";
    }
  }
  v.evidence = ev.str();
  return v;
}

// --- sums: nearest or truncating adds --------------------------------------------------------

struct SumsVerdict {
  std::string rounding = "any";
  std::string evidence;
  double l = 0.0;       // the row's weight sum, from its LSE (every row alike: all logits 0)
  bool hidden = false;  // the outputs' spread hid the bias: any rounding, unless midpoints show it
};
oracle::Expected<SumsVerdict> run_sums(Prober& pr) {
  constexpr int64_t H = 8, S = 16384, kChunk = 16;
  constexpr int64_t kControl = kDim / 2;  // columns [0, 32) sum exactly; [32, 64) carry low bits
  Grid g(1, H, S);
  std::mt19937_64 rng(20261205);
  std::vector<double> exact(static_cast<size_t>(H * kDim), 0.0);
  std::vector<double> trunc_chunked(static_cast<size_t>(H * kDim), 0.0);
  for (int64_t h = 0; h < H; ++h) g.qa(0, h, 0) = 1.0f;  // every key's logit 0: P = exp~(0)
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < kDim; ++c) {
      double chunk = 0.0, acc = 0.0;
      const size_t e = static_cast<size_t>(h * kDim + c);
      for (int64_t j = 0; j < S; ++j) {
        // control: k / 8 (sums of at most 17 bits, exact in fp32); test: 8 significant bits at
        // exponents 0 .. -8, whose low bits fall below the running sum's ulp.
        const double x = c < kControl ? static_cast<double>(1 + rng() % 8) / 8.0
                                      : std::ldexp(static_cast<double>(128 + rng() % 128) / 128.0,
                                                   -static_cast<int>(rng() % 9));
        g.va(j, h, c) = static_cast<float>(x);
        exact[e] += x;  // at most 30 significant bits: exact in double
        chunk += x;
        if ((j + 1) % kChunk == 0) acc = truncate_f32(acc + chunk), chunk = 0.0;
      }
      trunc_chunked[e] = acc;
    }
  auto out = pr.run("sums", std::move(g), 1);
  if (!out) return out.status();
  const std::vector<float>& o = out->partial_o.empty() ? out->o : out->partial_o[0];
  const std::vector<float>& lse = out->partial_lse.empty() ? out->lse : out->partial_lse[0];
  double s[2] = {0, 0}, s2[2] = {0, 0}, beta = 0.0;
  int64_t n[2] = {0, 0};
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < kDim; ++c) {
      const size_t e = static_cast<size_t>(h * kDim + c);
      const double rel = static_cast<double>(o[e]) / (exact[e] / S) - 1.0;
      const int side = c < kControl ? 0 : 1;
      s[side] += rel, s2[side] += rel * rel, ++n[side];
      if (side == 1) beta += trunc_chunked[e] / exact[e] - 1.0;
    }
  double mean[2], var[2];
  for (int i = 0; i < 2; ++i) {
    mean[i] = s[i] / static_cast<double>(n[i]);
    var[i] = std::max(0.0, s2[i] / static_cast<double>(n[i]) - mean[i] * mean[i]) /
             static_cast<double>(n[i] - 1);
  }
  beta /= static_cast<double>(n[1]);
  const double bias = mean[1] - mean[0], se = std::sqrt(var[0] + var[1]);
  SumsVerdict v;
  v.l = std::exp(static_cast<double>(lse[0]) * pr.ln_base());
  std::ostringstream ev;
  ev << "bias of the low-bit sums " << sci(bias) << " +- " << sci(se) << " (standard error, "
     << "against exact-sum controls); adds truncating in chunks of " << kChunk << " keys would "
     << "show " << sci(beta);
  if (std::fabs(beta) < 8.0 * se) {
    ev << ": the outputs' spread hides the difference";
    v.hidden = true;
  } else if (bias < beta / 2.0) {
    ev << ": truncating";
  } else if (std::fabs(bias) <= std::fabs(beta) / 4.0) {
    v.rounding = "nearest";
    ev << ": round to nearest";
  } else {
    ev << ": a bias neither explains, so any rounding is claimed";
  }
  v.evidence = ev.str();
  return v;
}

// The sums' rounding through a 16-bit output: each output's exact value, in the kernel's own
// arithmetic (its weight of a logit-0 key cast as it casts P, over its weight sum l, read from the
// LSE), set midway between an odd value of the output's format and the even one above it, from
// V of 8 significant bits: pairs a + b = 2^f of 2^-9 .. 2^-3, above the running sum's ulp (about
// 2^-10: smaller ones would vanish whole, a negative bias even for round-to-nearest) and with
// bits below it, and five keys that make up the rest. The output then rounds to the even neighbour
// where the fp32 result is exact, to either where its adds round to nearest (their errors take
// either sign), and to the odd one below where they truncate (every error negative): the 16-bit
// output shows the sign of the sums' error, which it could not show as a size.
oracle::Expected<SumsVerdict> run_midpoints(Prober& pr, double w0_cast, double l, DType f) {
  constexpr int64_t H = 8, S = 16384, kPairs = 8189, kExtras = 5, kChunk = 16;
  const int p = significand_bits(f);
  const double kappa = w0_cast / l;          // O = kappa * sum(v)
  const double grid = std::ldexp(1.0, -16);  // the pairs' lowest bit: every sum a multiple
  Grid g(1, H, S);
  std::mt19937_64 rng(20261206);
  std::vector<double> odd(static_cast<size_t>(H * kDim)), truncated(odd.size());
  std::vector<int64_t> perm(static_cast<size_t>(S));
  for (int64_t h = 0; h < H; ++h) g.qa(0, h, 0) = 1.0f;  // every key's logit 0
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < kDim; ++c) {
      const size_t e = static_cast<size_t>(h * kDim + c);
      const double k = static_cast<double>(rng() % (uint64_t{1} << (p - 2)));
      odd[e] = 0.5 + (2.0 * k + 1.0) * std::ldexp(1.0, -p);
      const double mid = odd[e] + std::ldexp(1.0, -p - 1);
      for (int64_t j = 0; j < S; ++j) perm[static_cast<size_t>(j)] = j;
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<double> v(static_cast<size_t>(S), 0.0);
      size_t at = 0;
      double pairs = 0.0;
      for (int64_t i = 0; i < kPairs; ++i) {
        const int fe = -2 - static_cast<int>(rng() % 7);
        const double q = static_cast<double>(rng() % 128) / 128.0;
        v[static_cast<size_t>(perm[at++])] = std::ldexp(1.0 + q, fe - 1);
        v[static_cast<size_t>(perm[at++])] = std::ldexp(1.0 - q, fe - 1);
        pairs += std::ldexp(1.0, fe);
      }
      double rest = std::nearbyint((mid / kappa - pairs) / grid) * grid;
      for (int64_t i = 0; i < kExtras && rest > 0.0; ++i) {
        int ex;
        std::frexp(rest, &ex);  // rest in [2^(ex-1), 2^ex): its top 8 bits
        const double top = std::floor(std::ldexp(rest, 8 - ex)) * std::ldexp(1.0, ex - 8);
        v[static_cast<size_t>(perm[at++])] = top;
        rest -= top;
      }
      double chunk = 0.0, acc = 0.0;
      for (int64_t j = 0; j < S; ++j) {
        g.va(j, h, c) = static_cast<float>(v[static_cast<size_t>(j)]);
        chunk += v[static_cast<size_t>(j)];
        if ((j + 1) % kChunk == 0) acc = truncate_f32(acc + chunk), chunk = 0.0;
      }
      truncated[e] = kappa * acc;
    }
  auto out = pr.run("sums", std::move(g), 1);
  if (!out) return out.status();
  const std::vector<float>& o = out->partial_o.empty() ? out->o : out->partial_o[0];
  int64_t up = 0, down = 0, far = 0, trunc_down = 0;
  const double spacing = std::ldexp(1.0, -p);
  for (size_t e = 0; e < odd.size(); ++e) {
    const double x = o[e];
    if (x == odd[e])
      ++down;
    else if (x == odd[e] + spacing)
      ++up;
    else
      ++far;
    if (oracle::round_to(f, truncated[e]) == odd[e]) ++trunc_down;
  }
  const int64_t n = static_cast<int64_t>(odd.size());
  SumsVerdict v;
  std::ostringstream ev;
  ev << n << " outputs set midway between two " << format_word(f) << " values: " << up
     << " rounded up, " << down << " down, " << far << " elsewhere (adds truncating in chunks of "
     << kChunk << " keys: " << trunc_down << " down)";
  if (far * 20 > n || 2 * trunc_down < n) {
    ev << ": inconclusive, so any rounding is claimed";
  } else if (up * 5 >= n) {
    v.rounding = "nearest";
    ev << ": round to nearest (or exact)";
  } else {
    ev << ": truncating";
  }
  v.evidence = ev.str();
  return v;
}

// --- tile: where the online softmax rescales ------------------------------------------------

struct TileVerdict {
  int64_t tile = 1;
  std::string evidence;
};
// How well a tile's model must fit to be believed: the LSE's rms residual (natural units; the
// right model fits within 2.1e-5, the rounding of 2,048 adds, on the production path) and the
// output's relative to its largest (within 1.5e-6 in fp32; a 16-bit output's own rounding, 4 u,
// where it is coarser).
constexpr double kLseFit = 1e-4, kOutputFit = 1e-4;

// The tile whose model fits best (scores: rms residual and tile, each tile under one or more
// rescale habits), where it fits at least twice as well as any other tile; else the smallest tile
// that fits within twice the best (a smaller tile claims more rescales: never too few).
TileVerdict pick_tile(const std::vector<std::pair<double, int64_t>>& scores, int64_t n,
                      const std::string& what, double max_floor) {
  std::vector<std::pair<double, int64_t>> sorted = scores;
  std::sort(sorted.begin(), sorted.end());
  const double floor = sorted[0].first;
  const auto other = *std::find_if(sorted.begin(), sorted.end(),
                                   [&](const auto& s) { return s.second != sorted[0].second; });
  TileVerdict v;
  std::ostringstream ev;
  ev << what << ": tile " << sorted[0].second << " fits within " << sci(floor) << " rms, the next ("
     << other.second << ") " << sci(other.first);
  if (floor > max_floor) {
    v.tile = 1;
    ev << ": no tile fits (rms above " << sci(max_floor) << "); any tiling claimed";
  } else if (floor < 0.5 * other.first) {
    v.tile = sorted[0].second;
  } else {
    v.tile = n;
    for (const auto& [s, tile] : scores)
      if (s <= 2.0 * floor) v.tile = std::min(v.tile, tile);
    ev << ": not resolved; the smallest fitting tile claimed";
  }
  v.evidence = ev.str();
  return v;
}

// The tile from the output: the row's maximum (logit 0, V 0) at position j, the other keys at
// logits -97 (even, V 0) and -97.5 (odd, V 2^118). An odd key in a tile before j's is weighted
// exp~(-0.5) and then rescaled by exp~(-97), a subnormal of about 9 bits; one in or after j's tile
// is weighted exp~(-97.5) directly, another subnormal, rounded differently. The output is then
// a pre + b post with pre, post the counts of odd keys each way (times w0 per tile boundary where
// the kernel rescales at every boundary): the tile whose counts fit the outputs as j moves is the
// kernel's. a and b are fitted, so no exponential is assumed; a kernel that flushes subnormals to
// zero shows nothing here.
oracle::Expected<TileVerdict> run_tile_subnormal(Prober& pr, double w0, DType o_format) {
  constexpr int64_t n = 2048, kStride = 16, kRows = n / kStride, H = 64;
  constexpr float kGap = 97.0f, kOdd = 0.5f, kBigV = 0x1p118f;  // odd sums stay below 2^127
  std::vector<double> o_obs;
  for (int64_t call = 0; call < kRows / H; ++call) {
    Grid t(1, H, n);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t jmax = (call * H + h) * kStride + kStride - 1;
      t.qa(0, h, 0) = t.qa(0, h, 1) = 1.0f;
      for (int64_t j = 0; j < n; ++j) {
        if (j == jmax) continue;
        t.ka(j, h, 0) = -kGap;
        if (j % 2 == 1) {
          t.ka(j, h, 1) = -kOdd;
          for (int64_t c = 0; c < kDim; ++c) t.va(j, h, c) = kBigV;
        }
      }
    }
    auto o = pr.run("tile", std::move(t), 1);
    if (!o) return o.status();
    const std::vector<float>& po = o->partial_o.empty() ? o->o : o->partial_o[0];
    for (int64_t h = 0; h < H; ++h) o_obs.push_back(po[static_cast<size_t>(h * kDim)]);
  }
  // Features of row j for a tile and a rescale habit: the odd keys before j's tile and the others,
  // each times w0 per boundary between its tile and j's (at every boundary; 1: where the maximum
  // moves only).
  const auto features = [&](int64_t tile, double per_boundary, int64_t j, double* pre,
                            double* post) {
    const int64_t tj = j / tile;
    *pre = *post = 0.0;
    for (int64_t x = 1; x < n; x += 2) {
      if (x == j) continue;
      const int64_t tx = x / tile;
      if (tx < tj)
        *pre += std::pow(per_boundary, static_cast<double>(tj - 1 - tx));
      else
        *post += std::pow(per_boundary, static_cast<double>(tj - tx));
    }
  };
  double scale = 0.0;
  for (const double o : o_obs) scale = std::max(scale, std::fabs(o));
  TileVerdict v;
  if (!(scale > 0.0) || !std::isfinite(scale)) {
    v.evidence = "the output is 0 or not finite: subnormal weights flushed";
    return v;
  }
  std::vector<std::pair<double, int64_t>> scores;  // (rms residual / scale, tile)
  for (int64_t tile = 1; tile <= n; tile *= 2)
    for (const double per_boundary : {1.0, w0}) {
      // Least squares of o = a pre + b post.
      double spp = 0, spq = 0, sqq = 0, spo = 0, sqo = 0;
      std::vector<std::pair<double, double>> f(kRows);
      for (int64_t i = 0; i < kRows; ++i) {
        auto& [p, q] = f[static_cast<size_t>(i)];
        features(tile, per_boundary, i * kStride + kStride - 1, &p, &q);
        const double o = o_obs[static_cast<size_t>(i)];
        spp += p * p, spq += p * q, sqq += q * q, spo += p * o, sqo += q * o;
      }
      const double det = spp * sqq - spq * spq;
      const double a = det != 0.0 ? (spo * sqq - sqo * spq) / det : 0.0;
      const double b = det != 0.0 ? (sqo * spp - spo * spq) / det : (sqq > 0 ? sqo / sqq : 0.0);
      double ss = 0.0;
      for (int64_t i = 0; i < kRows; ++i) {
        const auto& [p, q] = f[static_cast<size_t>(i)];
        const double r = o_obs[static_cast<size_t>(i)] - a * p - b * q;
        ss += r * r;
      }
      scores.push_back({std::sqrt(ss / kRows) / scale, tile});
    }
  return pick_tile(scores, n,
                   "the output as the maximum moves over " + std::to_string(kRows) +
                       " positions of " + std::to_string(n) + " keys, rescaled by a subnormal",
                   std::max(kOutputFit, 4.0 * oracle::unit_roundoff(o_format)));
}

oracle::Expected<TileVerdict> run_tile(Prober& pr, const PairsResult& pairs) {
  const double lb = pr.ln_base();
  // Step 1: the weights the design needs, measured: exp~(-d), exp~(-g), exp~(-d-g) for d, g from
  // a grid, a row each (key 1's logit -(u + w) from two components), and exp~(0).
  const std::vector<double> grid = {0.125, 0.25, 0.375, 0.5, 0.75, 1.0, 1.25};
  std::vector<std::pair<double, double>> rows = {{0.0, 0.0}};
  for (const double u : grid) rows.push_back({u, 0.0});
  for (size_t i = 0; i < grid.size(); ++i)
    for (size_t j = i; j < grid.size(); ++j) rows.push_back({grid[i], grid[j]});
  constexpr int64_t H = 64;
  Grid g(1, H, kPaddedKeys);
  g.pad_far();
  for (int64_t h = 0; h < H; ++h) {
    g.qa(0, h, 0) = g.qa(0, h, 1) = 1.0f;
    if (static_cast<size_t>(h) < rows.size()) {
      g.ka(g.first() + 1, h, 0) = static_cast<float>(-rows[static_cast<size_t>(h)].first);
      g.ka(g.first() + 1, h, 1) = static_cast<float>(-rows[static_cast<size_t>(h)].second);
    }
  }
  auto w = pr.run("tile", std::move(g), 1);
  if (!w) return w.status();
  const std::vector<float>& wl = w->partial_lse.empty() ? w->lse : w->partial_lse[0];
  const double w0 = std::exp(static_cast<double>(wl[0]) * lb) / 2.0;
  const auto measured = [&](double sum) -> Weight {
    for (size_t h = 1; h < rows.size(); ++h)
      if (rows[h].first + rows[h].second == sum)
        return weight_of(-sum, wl[h], lb, w0, pairs.lse_format);
    return {};
  };
  // The pair (d, g) whose rescaled-versus-direct difference per key is largest against its
  // resolution.
  double best = 0.0, d = 0, gam = 0, R = 0, U = 0, W = 0;
  for (const double dd : grid)
    for (const double gg : grid) {
      const Weight r = measured(dd), u = measured(gg), x = measured(dd + gg);
      const double diff = std::fabs((w0 - 1.0) * r.p_obs + u.p_obs * r.p_obs - x.p_obs);
      const double res = r.r * r.p * (w0 + u.p) + u.r * u.p * r.p + x.r * x.p + 2.0 * kU32;
      if (diff / res > best)
        best = diff / res, d = dd, gam = gg, R = r.p_obs, U = u.p_obs, W = x.p_obs;
    }
  TileVerdict v;
  if (best < 4.0) {
    v.evidence =
        "not measurable: a rescaled key's weight and a direct one differ by less than "
        "4 times their resolution at every logit gap tried; any tiling claimed";
    return v;
  }
  // Step 2: n keys, even ones at logit -d, odd ones at -d-g, the maximum (logit 0) at position j;
  // a row per j. Keys in tiles before j's are weighted w0 R (even) and U R (odd), the rest R and W.
  constexpr int64_t n = 2048, kStride = 16, kRows = n / kStride;
  std::vector<double> lse_obs;
  for (int64_t call = 0; call < kRows / H; ++call) {
    Grid t(1, H, n);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t jmax = (call * H + h) * kStride + kStride - 1;
      t.qa(0, h, 0) = t.qa(0, h, 1) = 1.0f;
      for (int64_t j = 0; j < n; ++j) {
        if (j == jmax) continue;
        t.ka(j, h, 0) = static_cast<float>(-d);
        if (j % 2 == 1) t.ka(j, h, 1) = static_cast<float>(-gam);
      }
    }
    auto o = pr.run("tile", std::move(t), 1);
    if (!o) return o.status();
    const std::vector<float>& l = o->partial_lse.empty() ? o->lse : o->partial_lse[0];
    for (int64_t h = 0; h < H; ++h)
      lse_obs.push_back(static_cast<double>(l[static_cast<size_t>(h)]) * lb);
  }
  // l of a kernel with tiles of `tile` keys that rescales by its own exponential at every tile
  // boundary (kAlways: exp~(m_old - m_new), w0 where the maximum did not move), by its own only
  // where the maximum moves (kOnChange), or by an accurate one (kAccurate: e^-d where it moves).
  enum Rescale { kAlways, kOnChange, kAccurate };
  const double exact_r = std::exp(-d);
  const auto model = [&](int64_t tile, Rescale how, int64_t j) {
    double l = 0.0, m = -d;  // key 0 (even, logit -d) sets the first maximum
    for (int64_t t0 = 0; t0 < n; t0 += tile) {
      const int64_t t1 = std::min(n, t0 + tile);
      const double m_new = (m == 0.0 || (j >= t0 && j < t1)) ? 0.0 : -d;
      if (t0 > 0) l *= m_new != m ? (how == kAccurate ? exact_r : R) : how == kAlways ? w0 : 1.0;
      for (int64_t x = t0; x < t1; ++x)
        l += x == j ? w0 : m_new == 0.0 ? (x % 2 == 0 ? R : W) : (x % 2 == 0 ? w0 : U);
      m = m_new;
    }
    return std::log(l);
  };
  // Scored by the rms of the LSE's residuals, no offset fitted: a kernel that rescales at every
  // boundary pays w0 once per boundary, which sets the level of the whole curve.
  std::vector<std::pair<double, int64_t>> scores;  // (rms residual, tile)
  for (int64_t tile = 1; tile <= n; tile *= 2)
    for (const Rescale how : {kAlways, kOnChange, kAccurate}) {
      double ss = 0.0;
      for (int64_t i = 0; i < kRows; ++i) {
        const double r =
            lse_obs[static_cast<size_t>(i)] - model(tile, how, i * kStride + kStride - 1);
        ss += r * r;
      }
      scores.push_back({std::sqrt(ss / kRows), tile});
    }
  std::ostringstream what;
  what << "the LSE as the maximum moves over " << kRows << " positions of " << n
       << " keys (logit gaps " << d << " and " << gam << ")";
  return pick_tile(scores, n, what.str(), kLseFit);
}

// --- merge: the implementation's own combine ------------------------------------------------

struct MergeVerdict {
  bool measured = false;
  std::string accum = "f32", lse_accum = "f32";
  ExpVerdict exp;
  std::string accum_evidence, lse_evidence;
};
oracle::Expected<MergeVerdict> run_merge(Prober& pr, DType lse_format) {
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
        w = weight_of(a, out->lse[i], lb, w0, lse_format, m);
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
  // The weights' sum: a 16-bit one is off by up to 2^-9 (bf16) or 2^-12 (f16) of it, which the
  // merged LSE shows as weight errors of that size; fp32's by far less.
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

}  // namespace

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

  DType lse_format = DType::f32;
  if (target.attend) {
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
        judge_exp(pairs->weights, pairs->w0 - 1.0, pairs->r0, "the kernel's weights");
    c.exp_rel_err = e.claim;
    rep.findings.push_back(
        {"exponential", e.claim == 0.0 ? "default" : claim_number(e.claim), e.evidence});
    const CastVerdict cast = judge_cast(*pairs);
    if (cast.cast == "tf32" || cast.cast == "tf32+f16") c.accum = "tf32";
    if (cast.cast != "tf32") c.p_cast = cast.cast == "tf32+f16" ? "f16" : cast.cast;
    rep.findings.push_back(
        {"P before P.V", cast.cast == "none" ? "not rounded" : cast.cast, cast.evidence});

    auto sums = run_sums(pr);
    if (!sums) return sums.status();
    if (sums->hidden && pairs->o_format != DType::f32) {  // the bias's sign, through midpoints
      const double w0_cast =
          c.p_cast == "bf16"  ? oracle::round_to(DType::bf16, pairs->w0)
          : c.p_cast == "f16" ? oracle::round_to(DType::f16, pairs->w0)
          : c.accum == "tf32" ? static_cast<double>(gpu::round_tf32(static_cast<float>(pairs->w0)))
                              : pairs->w0;
      auto mid = run_midpoints(pr, w0_cast, sums->l, pairs->o_format);
      if (!mid) return mid.status();
      mid->evidence = sums->evidence + "; " + mid->evidence;
      sums = std::move(mid);
    } else if (sums->hidden) {
      sums->evidence += ", so any rounding is claimed";
    }
    c.accum_rounding = sums->rounding;
    rep.findings.push_back({"sums' rounding", sums->rounding, sums->evidence});

    // The tile: from subnormal rescales where the kernel keeps subnormals, else (its exponential
    // coarse enough to show) from the LSE.
    auto tile = run_tile_subnormal(pr, pairs->w0, pairs->o_format);
    if (!tile) return tile.status();
    if (tile->tile == 1 && c.exp_rel_err > 0.0) {
      auto by_lse = run_tile(pr, *pairs);
      if (!by_lse) return by_lse.status();
      by_lse->evidence = tile->evidence + "; " + by_lse->evidence;
      tile = std::move(by_lse);
    }
    c.tile = tile->tile;
    rep.findings.push_back({"rescale tile", std::to_string(tile->tile), tile->evidence});

    lse_format = pairs->lse_format;
  } else {
    rep.findings.push_back({"partial", "not measured",
                            "the implementation computes no partials (the suite's own run)"});
  }

  if (target.merge) {
    auto merge = run_merge(pr, lse_format);
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
    } else {
      rep.findings.push_back({"merge", "not measured", merge->accum_evidence});
    }
  } else {
    rep.findings.push_back({"merge", "not measured", "the implementation has no merge of its own"});
  }
  rep.calls = pr.calls;
  return rep;
}

std::string claim_words(const ProbeClaim& c) {
  std::ostringstream os;
  os << "accum " << c.accum << "  accum_rounding " << c.accum_rounding << "  p_cast " << c.p_cast
     << "  partial_dtype " << c.partial_dtype;
  if (c.exp_rel_err > 0.0) os << "  exp_rel_err " << claim_number(c.exp_rel_err);
  os << "  tile " << c.tile;
  if (c.merged) {
    os << "  merge_accum " << c.merge_accum << "  merge_lse_accum " << c.merge_lse_accum;
    // The word's default is exp_rel_err: a merge within 2 ulp beside a coarser kernel says so.
    if (c.merge_exp_rel_err > 0.0 || c.exp_rel_err > 0.0)
      os << "  merge_exp_rel_err "
         << claim_number(c.merge_exp_rel_err > 0.0 ? c.merge_exp_rel_err
                                                   : round_up_2sig(kDefaultExp));
  }
  return os.str();
}

namespace {
nlohmann::ordered_json python_claim_json(const ProbeClaim& c) {
  nlohmann::ordered_json j;
  j["accum"] = c.accum;
  j["accum_rounding"] = c.accum_rounding;
  j["p_cast"] = c.p_cast;
  j["partial_dtype"] = c.partial_dtype;
  j["exp_rel_err"] = c.exp_rel_err > 0.0 ? std::stod(claim_number(c.exp_rel_err)) : 0.0;
  j["tile"] = c.tile;
  if (c.merged) j["merge_accum"] = c.merge_accum;
  return j;
}
}  // namespace

std::string claim_python(const ProbeClaim& c) { return python_claim_json(c).dump(); }

std::string probe_text(const ProbeReport& r) {
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
  os << "# the claim, in the result files' metadata words (docs/format.md):\n"
     << claim_words(r.claim) << "\n"
     << "# as an implementation's claim (dcp_verify.properties; the plug-in ABI's fields):\n"
     << claim_python(r.claim) << "\n";
  if (r.claim.merged)
    os << "# merge_lse_accum and merge_exp_rel_err have no field in the plug-in ABI (version 1): "
          "only a result file states them\n";
  os << "# measured, not proven: the exponential's error is the largest over the arguments tried\n";
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
  j["claim_words"] = claim_words(r.claim);
  j["claim"] = python_claim_json(r.claim);
  if (r.claim.merged) {
    j["merge_lse_accum"] = r.claim.merge_lse_accum;
    j["merge_exp_rel_err"] = r.claim.merge_exp_rel_err;
  }
  return j;
}

}  // namespace dcp::props
