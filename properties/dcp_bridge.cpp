#include "properties/dcp_bridge.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <sstream>
#include <string_view>

#include "oracle/shard.hpp"

namespace dcp::props {
namespace {

// The case's per-head vectors and the step's, kept apart by the two sides, match name for name.
constexpr bool head_vectors_match() {
  if (std::size(oracle::kHeadVectors) != std::size(gpu::kHeadVectors)) return false;
  for (const oracle::HeadVector& o : oracle::kHeadVectors) {
    bool found = false;
    for (const gpu::HeadVector& g : gpu::kHeadVectors)
      found = found || std::string_view(o.name) == std::string_view(g.name);
    if (!found) return false;
  }
  return true;
}
static_assert(head_vectors_match(),
              "oracle::kHeadVectors and gpu::kHeadVectors name different vectors");

using oracle::Attention;
using oracle::Bound;
using oracle::Case;
using oracle::Tensor;

std::vector<float> to_float(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

// Keys or values [S, H, D] as the production path's writer hands them to the caches, in the
// caches' format f: the stored elements, each value divided by its row's scale (`scale`: empty,
// or of `grain`; a case's values are stored elements times the scale, so the quotient is the
// stored element, exactly). A case file's bytes are borrowed where they are those elements
// already (kept alive by the file's mapping); otherwise they are encoded a row at a time.
gpu::KvSource kv_source(const oracle::KvTensor& t, gpu::StorageFormat f,
                        const std::vector<double>& scale, oracle::ScaleGrain grain) {
  if (t.is_stored() && t.stored_dtype() == to_oracle_dtype(f) && t.stored_scale() == scale &&
      (scale.empty() || t.stored_grain() == grain))
    return gpu::KvSource::borrowed(f, t.stored_bytes(), t.numel(), t.stored_owner());
  const int64_t S = t.dim(0), H = t.dim(1), D = t.dim(2);
  auto held =
      std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(t.numel() * gpu::format_bytes(f)));
  std::vector<double> row(static_cast<size_t>(D));
  for (int64_t j = 0; j < S; ++j)
    for (int64_t g = 0; g < H; ++g) {
      const double* r = t.row(j, g, row.data());
      const double sg =
          scale.empty() ? 1.0 : scale[oracle::scale_index(grain, scale.size(), j, g, S, H)];
      for (int64_t i = 0; i < D; ++i)
        gpu::store_element(f, held->data(), (j * H + g) * D + i, static_cast<float>(r[i] / sg));
    }
  const uint8_t* data = held->data();
  return gpu::KvSource::borrowed(f, data, t.numel(), std::move(held));
}

// Heads [h0, h0 + n) of a [T, Hq, X] tensor (X = 1 for rank-2 tensors).
Tensor<double> slice_heads(const Tensor<double>& t, int64_t h0, int64_t n) {
  const int64_t T = t.dim(0), Hq = t.dim(1), X = t.rank() == 3 ? t.dim(2) : 1;
  Tensor<double> s(t.rank() == 3 ? std::vector<int64_t>{T, n, X} : std::vector<int64_t>{T, n});
  for (int64_t i = 0; i < T; ++i)
    for (int64_t h = 0; h < n; ++h)
      for (int64_t x = 0; x < X; ++x)
        s.data[(i * n + h) * X + x] = t.data[(i * Hq + h0 + h) * X + x];
  return s;
}

Tensor<double> from_float(const std::vector<float>& x, std::vector<int64_t> shape) {
  Tensor<double> t(std::move(shape));
  for (size_t i = 0; i < x.size(); ++i) t.data[i] = x[i];
  return t;
}

// The oracle's phases of one judgement (the reference, then the bound, of the output and of
// each rank's shard) counted as one: a phase's (row, key) pairs after those of the phases before
// it, against `total`, the pairs of them all. The shards partition the keys, so their phases
// together count what the output's do.
class PhasedWatch {
 public:
  PhasedWatch(const oracle::Watch& outer, int64_t total) : outer_(outer), total_(total) {
    phase_.stop = [this] {
      if (!stopped_ && outer_.stop && outer_.stop()) stopped_ = true;
      return stopped_;
    };
    if (outer_.progress)
      phase_.progress = [this](int64_t done, int64_t phase_total) {
        last_ = phase_total;
        outer_.progress(std::min(total_, before_ + done), total_);
      };
  }
  PhasedWatch(const PhasedWatch&) = delete;  // its hooks point at this object
  PhasedWatch& operator=(const PhasedWatch&) = delete;
  // The watch of the next phase.
  const oracle::Watch& next() {
    before_ += last_;
    last_ = 0;
    return phase_;
  }
  bool stopped() const { return stopped_; }

 private:
  const oracle::Watch& outer_;
  const int64_t total_;
  int64_t before_ = 0, last_ = 0;
  bool stopped_ = false;
  oracle::Watch phase_;
};

// The oracle's attention of a case and its bound for an arithmetic.
struct Judge {
  oracle::Expected<Attention> ref = oracle::Status();
  oracle::Expected<Bound> bound = oracle::Status();
  Judge(const Case& c, const oracle::Arithmetic& a, PhasedWatch& watch)
      : ref(oracle::reference(c, oracle::Tier::fast, watch.next())) {
    bound = ref ? oracle::derive_bound(c, *ref, a, watch.next())
                : oracle::Expected<Bound>(ref.status());
  }
  // Compares heads [h0, h0 + nh) of o [T, nh, Dv] and lse [T, nh].
  oracle::Expected<oracle::Comparison> compare(const Tensor<double>& o, const Tensor<double>& lse,
                                               int64_t h0, int64_t nh) const {
    if (!bound) return bound.status();
    Attention rs{slice_heads(ref->o, h0, nh), slice_heads(ref->lse, h0, nh), ref->base};
    Bound bs = *bound;
    bs.o = slice_heads(bound->o, h0, nh);
    bs.lse = slice_heads(bound->lse, h0, nh);
    if (!bound->o_stat.data.empty()) {
      bs.o_stat = slice_heads(bound->o_stat, h0, nh);
      bs.lse_stat = slice_heads(bound->lse_stat, h0, nh);
    }
    return oracle::compare(o, lse, rs, bs);
  }
};

}  // namespace

// Each production format beside the oracle's dtype of the same values: one row a format (the two
// lists are kept apart on purpose; this table is where they meet).
struct FormatPair {
  oracle::DType oracle;
  gpu::StorageFormat storage;
};
constexpr FormatPair kFormatPairs[] = {{oracle::DType::f32, gpu::StorageFormat::f32},
                                       {oracle::DType::bf16, gpu::StorageFormat::bf16},
                                       {oracle::DType::f16, gpu::StorageFormat::f16},
                                       {oracle::DType::f8e4m3, gpu::StorageFormat::f8e4m3},
                                       {oracle::DType::f8e5m2, gpu::StorageFormat::f8e5m2},
                                       {oracle::DType::i8, gpu::StorageFormat::i8},
                                       {oracle::DType::f8e4m3fnuz, gpu::StorageFormat::f8e4m3fnuz}};
static_assert(std::size(kFormatPairs) == std::size(gpu::kFormatNames),
              "kFormatPairs: one row per production format");

std::vector<oracle::DType> production_dtypes(bool kv) {
  std::vector<oracle::DType> out;
  for (const FormatPair& f : kFormatPairs)
    if (kv || !gpu::is_cache_only(f.storage)) out.push_back(f.oracle);
  return out;
}

bool is_production_dtype(oracle::DType d, bool kv) {
  const std::vector<oracle::DType> all = production_dtypes(kv);
  return std::find(all.begin(), all.end(), d) != all.end();
}

std::string production_dtype_names(bool kv) {
  return oracle::dtype_names([kv](oracle::DType d) { return is_production_dtype(d, kv); });
}

gpu::StorageFormat to_storage_format(oracle::DType d) {
  for (const FormatPair& f : kFormatPairs)
    if (f.oracle == d) return f.storage;
  return gpu::StorageFormat::f32;  // f64: the oracle's own, read by the production path as f32
}

oracle::DType to_oracle_dtype(gpu::StorageFormat d) {
  for (const FormatPair& f : kFormatPairs)
    if (f.storage == d) return f.oracle;
  return oracle::DType::f32;
}

gpu::DcpInputs to_dcp_inputs(const Case& c, std::vector<int64_t> chunks) {
  gpu::DcpInputs in;
  in.dims = gpu::AttentionDims{c.tokens(),   c.q_heads(), c.kv_heads(),
                               c.head_dim(), c.v_dim,     c.shared_latent()};
  in.q = to_float(c.q.data);
  in.kv_dtype = to_storage_format(c.kv_dtype);
  in.k = kv_source(c.k, in.kv_dtype, c.k_scale, c.kv_scale_grain);
  if (!c.shared_latent()) in.v = kv_source(c.v, in.kv_dtype, c.v_scale, c.kv_scale_grain);
  in.k_scale = to_float(c.k_scale);  // fp32 values (case.hpp)
  in.v_scale = to_float(c.v_scale);
  in.kv_scale_grain = c.kv_scale_grain == oracle::ScaleGrain::token ? gpu::ScaleGrain::token
                                                                    : gpu::ScaleGrain::head;
  for (int64_t t = 0; t < c.tokens(); ++t) in.q_pos.push_back(c.query_pos(t));
  in.seq = c.seq();
  in.scale = static_cast<float>(c.scale ? *c.scale : 1.0 / std::sqrt(double(c.head_dim())));
  in.causal = c.causal;
  in.window = c.window;
  in.softcap = static_cast<float>(c.softcap);
  for (const oracle::HeadVector& o : oracle::kHeadVectors)
    for (const gpu::HeadVector& g : gpu::kHeadVectors)
      if (std::string_view(o.name) == g.name) in.*g.values = to_float(c.*o.values);
  if (c.has_topk()) {
    in.topk = c.topk.data;
    in.topk_k = c.topk.dim(1);
  }
  in.chunks = std::move(chunks);
  return in;
}

oracle::Arithmetic host_claim(const gpu::DcpConfig& cfg, bool partial) {
  const gpu::KernelMath& m = cfg.math;
  oracle::Arithmetic a;
  a.truncating_mma = false;  // host fp32 adds round to nearest
  a.shards = partial ? cfg.splits : cfg.layout.ranks * cfg.splits;
  // Each rank's keys are one partial unless split-KV splits them further.
  if (!partial && cfg.splits == 1 && a.shards > 1)
    a.layout = oracle::Ownership{cfg.layout.ranks, cfg.layout.interleave, {}};
  a.tile = cfg.tile;
  // Each q.k dot is one chain over the head dimension in component order (body::
  // partial_attention; the CUDA kernels run the same body, one key per thread).
  a.dot_lanes = 1;
  a.tf32 = m.tf32;
  if (m.p_cast != gpu::StorageFormat::f32) a.p_cast = to_oracle_dtype(m.p_cast);
  if (m.exp == gpu::ExpImpl::poly3) a.exp_rel_err = gpu::kExp2Poly3RelErr;
  if (partial) {
    // A rank's partial as its attention kernel stores it: O in math.partial, the LSE in fp32
    // (split-KV pieces merge in fp32 before that store).
    a.out = to_oracle_dtype(m.partial);
  } else {
    // The step combines even a single partial. That is exact in the default arithmetic (weight
    // exp(0) = 1, ln 1 = 0, fp32 values stored in fp32), but not with a 16-bit partial store or
    // sum or the poly3 exponential (its 2^0 is 1 - 7e-5): then the claim counts the merge, as one
    // of two parts, the other empty.
    const bool exact_single = m.exp == gpu::ExpImpl::libm && m.partial == gpu::StorageFormat::f32 &&
                              m.merge == gpu::StorageFormat::f32;
    if (a.shards == 1 && !exact_single) a.shards = 2;
    a.partial_o = to_oracle_dtype(m.partial);
    a.merge_accum = to_oracle_dtype(m.merge);
    // The weights' sum of either combine (MergeAcc's z) is fp32 beside any reduce-scatter format.
    a.merge_lse_accum = oracle::DType::f32;
    a.merge_terms = cfg.layout.ranks;  // split-KV pieces merge in fp32 within their rank
    // ag_rs's merge is the scaled form: body::agrs_scale rounds base^(L_r - L) O_r to math.merge,
    // with L the group LSE every rank computes alike from the gathered LSEs, and the
    // reduce-scatter's sum of those is the output, then only stored (a2a divides its sum).
    a.merge_scaled = cfg.strategy == gpu::CommStrategy::ag_rs;
    a.out = to_oracle_dtype(cfg.out_dtype);
    a.lse_out = a.out;
  }
  return a;
}

DcpCheck judge_dcp(const Case& c, const gpu::DcpConfig& cfg, const gpu::GroupRun& run,
                   const JudgedParts& parts, const ClaimFn& claim, const oracle::Watch& watch) {
  const auto claim_for = [&](bool partial) {
    return claim ? claim(cfg, partial) : host_claim(cfg, partial);
  };
  DcpCheck out;
  const int64_t T = c.tokens(), Hq = c.q_heads(), dv = c.v_dim;
  std::ostringstream rep;
  bool ok = true, ok_stat = true;
  auto note = [&](const std::string& what, const oracle::Expected<oracle::Comparison>& cmp) {
    ++out.comparisons;
    if (!cmp) {
      ok = ok_stat = false;
      if (cmp.status().unjudgeable())
        out.unjudgeable = true;
      else
        out.judged_pass = out.judged_pass_statistical = false;
      rep << what << ": " << cmp.status().message() << "\n";
      return;
    }
    out.max_ratio = std::max(out.max_ratio, cmp->max_ratio());
    out.max_stat_ratio = std::max(out.max_stat_ratio, cmp->max_stat_ratio());
    if (!cmp->pass()) {
      ok = false;
      out.judged_pass = false;
      rep << what << ": " << cmp->summary() << "\n";
    }
    if (!cmp->pass_statistical()) {
      ok_stat = false;
      out.judged_pass_statistical = false;
      if (cmp->pass()) rep << what << ": SUSPECT: " << cmp->statistical_summary() << "\n";
    }
  };
  const bool partials = parts.partials && !run.partial_o.empty();
  int64_t pairs = 0;  // (row, key) pairs of the output's reference, for a progress hook
  if (watch.progress)
    for (int64_t t = 0; t < T; ++t)
      pairs += static_cast<int64_t>(oracle::visible_keys(c, t).size()) * Hq;
  // Two phases (reference, bound) of the output's pairs, and of the shards' (all of them
  // together count the output's; one of N about 1/N of it).
  const int64_t shard_pairs = !partials       ? 0
                              : parts.tp_rank ? pairs / std::max<int64_t>(1, cfg.layout.ranks)
                                              : pairs;
  PhasedWatch phases(watch, 2 * ((parts.output ? pairs : 0) + shard_pairs));
  const auto interrupted = [&] {
    out.interrupted = true;
    out.report = "interrupted: the oracle stopped before its verdict\n";
    return out;
  };
  if (parts.output) {
    const Judge full(c, claim_for(false), phases);
    if (phases.stopped()) return interrupted();
    if (!full.bound) out.oracle_error = true;
    oracle::Expected<oracle::Comparison> fc =
        full.compare(from_float(run.o, {T, Hq, dv}), from_float(run.lse, {T, Hq}), 0, Hq);
    if (fc) out.full = *fc;
    note("output", fc);
  }

  if (partials) {
    const gpu::AttentionDims dims{T, Hq, c.kv_heads(), c.head_dim(), dv, c.shared_latent()};
    gpu::Result<gpu::DcpGeometry> geo = gpu::DcpGeometry::create(cfg, dims);
    if (!geo) {
      rep << "geometry: " << geo.status().message() << "\n";
      ok = false;
      out.judged_pass = out.judged_pass_statistical = false;
    } else if (parts.tp_rank && (*parts.tp_rank < 0 || *parts.tp_rank >= geo->tp)) {
      rep << "JudgedParts.tp_rank: " << *parts.tp_rank << " is not a TP rank in [0, " << geo->tp
          << ")\n";
      ok = false;
      out.judged_pass = out.judged_pass_statistical = false;
    } else {
      // One oracle shard per dcp rank serves every DCP group (they differ only in heads).
      for (int64_t r = 0; r < geo->n; ++r) {
        if (parts.tp_rank && *parts.tp_rank % geo->n != r) continue;
        const Judge shard(
            oracle::shard_case(c, cfg.layout.ranks, cfg.layout.interleave, r, gpu::kSinkRank),
            claim_for(true), phases);
        if (phases.stopped()) return interrupted();
        if (!shard.bound) out.oracle_error = true;
        for (int64_t tp_rank = r; tp_rank < geo->tp; tp_rank += geo->n) {
          if (parts.tp_rank && *parts.tp_rank != tp_rank) continue;
          const auto& po = run.partial_o[static_cast<size_t>(tp_rank)];
          const auto& pl = run.partial_lse[static_cast<size_t>(tp_rank)];
          note("partial of tp rank " + std::to_string(tp_rank) + " (dcp rank " + std::to_string(r) +
                   ")",
               shard.compare(from_float(po, {T, geo->hg, dv}), from_float(pl, {T, geo->hg}),
                             geo->group_head0(tp_rank), geo->hg));
        }
      }
    }
  }
  out.pass = ok;
  out.pass_statistical = ok_stat;
  out.report = rep.str();
  return out;
}

namespace {

// The backend's run of the inputs, stopped by the watch's stop as well (DcpConfig::stop). Every
// rank polls it from its own thread; the watch's hooks are called one at a time. `stopped`: the
// stop said true.
gpu::Result<gpu::GroupRun> run_backend(const gpu::DcpInputs& in, const gpu::DcpConfig& cfg,
                                       const DcpBackend& backend, const oracle::Watch& watch,
                                       bool& stopped) {
  gpu::DcpConfig c = cfg;
  auto said = std::make_shared<bool>(false);  // written and read under the mutex
  auto one = std::make_shared<std::mutex>();
  if (watch.stop)
    c.stop = [stop = watch.stop, one, said] {
      const std::lock_guard<std::mutex> lock(*one);
      *said = *said || stop();
      return *said;
    };
  gpu::Result<gpu::GroupRun> run = backend ? backend(in, c) : gpu::run_dcp_threads(in, c);
  const std::lock_guard<std::mutex> lock(*one);
  stopped = *said;
  return run;
}

// A backend's failure: interrupted when the watch stopped it, else the backend's error.
DcpCheck backend_failure(const gpu::GpuStatus& st, bool stopped) {
  DcpCheck out;
  if (stopped) {
    out.interrupted = true;
    out.report = "interrupted: the step stopped before its verdict (" + st.message() + ")\n";
    return out;
  }
  out.backend_error = true;
  out.report = "backend: " + st.message() + " (" + st.where() + ")\n";
  return out;
}

}  // namespace

DcpCheck check_dcp(const Case& c, const gpu::DcpConfig& cfg, const std::vector<int64_t>& chunks,
                   const DcpBackend& backend, bool check_partials, const oracle::Watch& watch) {
  const gpu::DcpInputs in = to_dcp_inputs(c, chunks);
  bool stopped = false;
  gpu::Result<gpu::GroupRun> run = run_backend(in, cfg, backend, watch, stopped);
  if (!run) return backend_failure(run.status(), stopped);
  return judge_dcp(c, cfg, *run,
                   {.output = true, .partials = check_partials, .tp_rank = std::nullopt},
                   backend.claim, watch);
}

oracle::Expected<gpu::DcpInputs> to_dcp_batch_inputs(const std::vector<Case>& requests,
                                                     const BatchSharing& sharing) {
  if (requests.empty()) return DCP_ERROR("batch: no requests");
  if (sharing.retired < 0 || sharing.retired >= static_cast<int64_t>(requests.size()))
    return DCP_ERROR("batch: ", sharing.retired, " retired requests; expected 0 .. ",
                     requests.size() - 1, " (a live request at least)");
  std::vector<gpu::DcpInputs> parts;
  for (const Case& c : requests) parts.push_back(to_dcp_inputs(c, {}));
  const gpu::DcpInputs& first = parts.front();
  gpu::DcpInputs in = first;
  in.q.clear();
  in.q_pos.clear();
  in.topk.clear();
  in.cu_seqlens_q = {0};
  in.cu_seqlens_k = {0};
  in.shared_prefix = sharing.shared_prefix;
  in.retired = sharing.retired;
  const gpu::AttentionDims& d = first.dims;
  std::vector<uint8_t> k, v;
  const auto append = [](std::vector<uint8_t>& to, const gpu::KvSource& x) {
    to.insert(to.end(), x.bytes_at(0), x.bytes_at(x.numel));
  };
  for (size_t b = 0; b < parts.size(); ++b) {
    const gpu::DcpInputs& r = parts[b];
    const auto differs = [&](const char* field) {
      return DCP_ERROR("batch: request ", b, "'s ", field, " differs from request 0's");
    };
    if (r.dims.q_heads != d.q_heads || r.dims.kv_heads != d.kv_heads ||
        r.dims.head_dim != d.head_dim || r.dims.v_dim != d.v_dim ||
        r.dims.shared_latent != d.shared_latent)
      return differs("heads or dimensions");
    if (r.kv_dtype != first.kv_dtype || r.k.dtype != first.k.dtype) return differs("kv dtype");
    if (r.k_scale != first.k_scale || r.v_scale != first.v_scale ||
        r.kv_scale_grain != first.kv_scale_grain)
      return differs("k/v scales");
    for (const gpu::HeadVector& hv : gpu::kHeadVectors)
      if (r.*hv.values != first.*hv.values) return differs(hv.name);
    if (r.scale != first.scale || r.causal != first.causal || r.window != first.window ||
        r.softcap != first.softcap || r.topk_k != first.topk_k)
      return differs("variant (scale, masks, softcap, top-k)");
    const bool live = static_cast<int64_t>(b) >= sharing.retired;
    if (live) {
      in.q.insert(in.q.end(), r.q.begin(), r.q.end());
      in.q_pos.insert(in.q_pos.end(), r.q_pos.begin(), r.q_pos.end());
      in.topk.insert(in.topk.end(), r.topk.begin(), r.topk.end());
    }
    append(k, r.k);
    if (!d.shared_latent) append(v, r.v);
    in.cu_seqlens_q.push_back(in.cu_seqlens_q.back() + (live ? r.dims.tokens : 0));
    in.cu_seqlens_k.push_back(in.cu_seqlens_k.back() + r.seq);
  }
  in.dims.tokens = in.cu_seqlens_q.back();
  in.seq = in.cu_seqlens_k.back();
  const auto owned = [&](std::vector<uint8_t> bytes, int64_t width) {
    auto held = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
    gpu::KvSource x =
        gpu::KvSource::borrowed(first.k.dtype, held->data(), in.seq * d.kv_heads * width, held);
    x.quantize = first.k.quantize;
    return x;
  };
  in.k = owned(std::move(k), d.head_dim);
  in.v = d.shared_latent ? gpu::KvSource{} : owned(std::move(v), d.v_dim);
  return in;
}

DcpCheck check_dcp_batch(const std::vector<Case>& requests, const BatchSharing& sharing,
                         const gpu::DcpConfig& cfg, const DcpBackend& backend, bool check_partials,
                         const oracle::Watch& watch) {
  DcpCheck out;
  oracle::Expected<gpu::DcpInputs> in = to_dcp_batch_inputs(requests, sharing);
  if (!in) {
    out.oracle_error = true;
    out.report = in.status().message() + "\n";
    return out;
  }
  bool stopped = false;
  gpu::Result<gpu::GroupRun> run = run_backend(*in, cfg, backend, watch, stopped);
  if (!run) return backend_failure(run.status(), stopped);
  return judge_dcp_batch(requests, sharing.retired, cfg, *run,
                         {.output = true, .partials = check_partials, .tp_rank = std::nullopt},
                         backend.claim, watch);
}

DcpCheck judge_dcp_batch(const std::vector<Case>& requests, int64_t retired,
                         const gpu::DcpConfig& cfg, const gpu::GroupRun& run,
                         const JudgedParts& parts, const ClaimFn& claim,
                         const oracle::Watch& watch) {
  DcpCheck out;
  out.pass = out.pass_statistical = true;
  if (retired < 0 || retired >= static_cast<int64_t>(requests.size())) {
    out.pass = out.pass_statistical = false;
    out.oracle_error = true;
    out.report = "batch: " + std::to_string(retired) + " retired of " +
                 std::to_string(requests.size()) + " requests; a live request at least\n";
    return out;
  }
  // Request b's rows of the output and of every rank's partial: [t0, t1) of the first dimension.
  const auto rows = [](const std::vector<float>& x, int64_t width, int64_t t0, int64_t t1) {
    return std::vector<float>(x.begin() + t0 * width, x.begin() + t1 * width);
  };
  int64_t tokens = 0;
  for (size_t b = static_cast<size_t>(retired); b < requests.size(); ++b)
    tokens += requests[b].tokens();
  // The run's shapes, before any of it is sliced: O [T, Hq, Dv] and LSE [T, Hq] over the batch's
  // tokens, a partial of whole token rows on every rank.
  const Case& c0 = requests.front();
  bool shaped = run.o.size() == static_cast<size_t>(tokens * c0.q_heads() * c0.v_dim) &&
                run.lse.size() == static_cast<size_t>(tokens * c0.q_heads()) &&
                run.partial_o.size() == run.partial_lse.size();
  for (size_t r = 0; shaped && r < run.partial_lse.size(); ++r)
    shaped = run.partial_lse[r].size() % static_cast<size_t>(tokens) == 0 &&
             run.partial_o[r].size() == run.partial_lse[r].size() * static_cast<size_t>(c0.v_dim);
  if (!shaped) {
    out.pass = out.pass_statistical = false;
    out.backend_error = true;
    out.report = "backend: the run's output is not shaped for the batch's " +
                 std::to_string(tokens) + " query tokens\n";
    return out;
  }
  int64_t t0 = 0;
  for (size_t b = static_cast<size_t>(retired); b < requests.size(); ++b) {
    const Case& c = requests[b];
    const int64_t t1 = t0 + c.tokens(), Hq = c.q_heads(), dv = c.v_dim;
    gpu::GroupRun rb;
    rb.o = rows(run.o, Hq * dv, t0, t1);
    rb.lse = rows(run.lse, Hq, t0, t1);
    for (size_t r = 0; r < run.partial_o.size(); ++r) {
      const auto hg = static_cast<int64_t>(run.partial_lse[r].size()) / tokens;
      rb.partial_o.push_back(rows(run.partial_o[r], hg * dv, t0, t1));
      rb.partial_lse.push_back(rows(run.partial_lse[r], hg, t0, t1));
    }
    t0 = t1;
    DcpCheck cb = judge_dcp(c, cfg, rb, parts, claim, watch);
    if (cb.interrupted) return cb;
    std::istringstream lines(cb.report);
    cb.report.clear();
    for (std::string line; std::getline(lines, line);)
      cb.report += "request " + std::to_string(b) + ": " + line + "\n";
    merge_judgements(out, cb);
    if (b == static_cast<size_t>(retired) || cb.full.max_ratio() > out.full.max_ratio())
      out.full = cb.full;
  }
  return out;
}

void merge_judgements(DcpCheck& into, const DcpCheck& part) {
  into.pass = into.pass && part.pass;
  into.pass_statistical = into.pass_statistical && part.pass_statistical;
  into.max_ratio = std::max(into.max_ratio, part.max_ratio);
  into.max_stat_ratio = std::max(into.max_stat_ratio, part.max_stat_ratio);
  into.backend_error = into.backend_error || part.backend_error;
  into.oracle_error = into.oracle_error || part.oracle_error;
  into.interrupted = into.interrupted || part.interrupted;
  into.unjudgeable = into.unjudgeable || part.unjudgeable;
  into.judged_pass = into.judged_pass && part.judged_pass;
  into.judged_pass_statistical = into.judged_pass_statistical && part.judged_pass_statistical;
  into.comparisons += part.comparisons;
  into.report += part.report;
}

std::string describe(const gpu::DcpConfig& cfg) {
  std::ostringstream os;
  os << "tp=" << cfg.tp_size << " N=" << cfg.layout.ranks << " I=" << cfg.layout.interleave
     << " comm=" << gpu::strategy_name(cfg.strategy)
     << (cfg.replicate_q ? " replicate-q" : " gather-q")
     << " order=" << gpu::reduce_order_name(cfg.order) << " order_seed=" << cfg.order_seed
     << " base=" << (cfg.base == gpu::LseBase::e ? "e" : "2") << " tile=" << cfg.tile
     << " splits=" << cfg.splits << " out=" << gpu::format_name(cfg.out_dtype);
  if (cfg.page_size > 0) os << " page=" << cfg.page_size << " page_seed=" << cfg.page_seed;
  const std::string math = describe(cfg.math);
  if (!math.empty()) os << " " << math;
  return os.str();
}

std::string describe(const gpu::KernelMath& m) {
  std::ostringstream os;
  if (m.exp != gpu::ExpImpl::libm) os << " exp=" << gpu::exp_impl_name(m.exp);
  if (m.p_cast != gpu::StorageFormat::f32) os << " p_cast=" << gpu::format_name(m.p_cast);
  if (m.tf32) os << " tf32";
  if (m.partial != gpu::StorageFormat::f32) os << " partial=" << gpu::format_name(m.partial);
  if (m.merge != gpu::StorageFormat::f32) os << " merge=" << gpu::format_name(m.merge);
  const std::string s = os.str();
  return s.empty() ? s : s.substr(1);
}

}  // namespace dcp::props
