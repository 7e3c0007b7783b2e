#include "tools/model_cmd.hpp"

// The cost model, per decode layer and per rank (B sequences, T query tokens each, S context
// tokens; Hq query heads, Hkv KV heads, Dk/Dv key/value widths; TP ranks, DCP groups of N):
//
//   heads        H_loc = Hq / TP under TP alone; Hg = N H_loc under DCP (the AllGathered heads).
//   KV per token M_KV = kvh (Dk + Dv) b, or kvh Dk b for a shared latent (V is part of K), where
//                kvh is the number of KV heads the rank's query heads read (GQA: query head h
//                reads KV head floor(h / (Hq / Hkv)); gpu::DcpGeometry). Under TP alone that is
//                max(1, Hkv / TP) heads: KV heads are replicated when TP > Hkv. Under DCP the
//                rank serves all Hg heads of its group, so it holds max(1, N Hkv / TP) heads on
//                1/N of the tokens: DCP only cuts a rank's KV bytes by the factor by which KV
//                was replicated (N for an MLA latent, shared by every head; 1 for Llama-3-70B
//                at TP8 with its 8 KV heads).
//   KV read      B s M_KV, with s = S (TP alone) or ceil(S / N) = rows_for(0, S), the busiest
//                rank under round-robin (gpu/kernels/layout.hpp).
//   FLOPs        2 B T H s (Dk + Dv): QK^T and PV, one multiply-add (2 FLOPs) per element;
//                H = H_loc with s = S, or H = Hg with s = ceil(S / N). The two are equal: DCP
//                does not cut a rank's FLOPs, only the bytes it reads.
//   T_attn       max(KV read / HBM bandwidth, FLOPs / tensor-core peak)   (a roofline)
//
// Communication, in bytes each rank receives (for these collectives a rank sends as many):
//   q AllGather  every peer's q [B T, H_loc, Dk] in the q format b_q (--dtype):
//                (N - 1) B T H_loc Dk b_q. None with --replicate-q.
//   a2a          O_r [B T, Hg, Dv] and L_r [B T, Hg] are cut into N head slices of H_loc heads,
//                packed, and slice j goes to rank j; a rank receives one slice from each peer:
//                (N - 1) B T H_loc (Dv b_O + b_L). One collective.
//   ag_rs        AllGather of every peer's whole L_r: (N - 1) B T Hg b_L; then ReduceScatter of
//                the corrected O_r by head slice, which passes (N - 1) / N of the buffer through
//                each rank (ring or direct): (N - 1) B T H_loc Dv b_O. Two collectives.
//   b_O is --partial-dtype (default f32), b_L = 4 (LSE in fp32).
//   T_comm       latency x collectives + bytes / link bandwidth (per direction); 0 when N = 1.
//
// Payoff (lesson 07, docs/07_communication.md): T_attn(S) - T_attn(S/N) > T_comm. Both attention
// times are linear in S (ignoring the ceil), T_attn(S) = c_tp S and T_attn(S/N) = c_dcp S / N,
// and T_comm does not depend on S, so DCP pays for S > S* = T_comm / (c_tp - c_dcp / N), and
// never when c_tp <= c_dcp / N.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "gpu/dcp_step.hpp"
#include "gpu/kernels/layout.hpp"
#include "gpu/kernels/storage_format.hpp"
#include "harness/presets.hpp"
#include "tools/flags.hpp"
#include "tools/session.hpp"

namespace dcp::tools {
namespace {

// Default hardware: one H200 SXM in an 8-GPU NVLink4 node. Quoted peaks, not measured here and
// not achieved figures: pass measured ones to model a real kernel (docs/cli.md, "model", links
// each source).
constexpr double kH200HbmGBps = 4800.0;  // HBM3e peak, 4.8 TB/s (NVIDIA's H200 product page)
// Dense BF16 tensor-core peak, ~989 TFLOP/s (the 1979 on spec pages is the one with sparsity).
constexpr double kH200Bf16DenseTflops = 989.0;
// NVLink4: 900 GB/s bidirectional per GPU, 450 GB/s per direction.
constexpr double kNvlink4GBpsPerDirection = 450.0;
// A small-message collective on 8 NVLink4 GPUs: NCCL's alltoall_perf, 10.6 us at 128 B on 8x H20
// (the same NVLink4/NVSwitch generation), as reported in DeepEP's issue 303.
constexpr double kCollectiveLatencyUs = 10.6;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;  // the capacity line's unit of cache

constexpr double kLseBytes = 4.0;  // b_L: LSE is fp32 on every path
constexpr double kGiga = 1e9, kTera = 1e12, kMicro = 1e-6;
// The largest rate or latency accepted (GB/s, TFLOP/s, us): far beyond any machine, small enough
// that every time the model prints stays finite.
constexpr double kMaxRate = 1e12;
// The sweep without --seq: S = 1K, 2K, ..., 1M.
constexpr int64_t kSweepFirst = int64_t{1} << 10, kSweepLast = int64_t{1} << 20;

struct Hardware {
  double hbm_gbps = kH200HbmGBps;               // HBM bandwidth, GB/s
  double tflops = kH200Bf16DenseTflops;         // tensor-core peak, TFLOP/s
  double link_gbps = kNvlink4GBpsPerDirection;  // link bandwidth per GPU and direction, GB/s
  double latency_us = kCollectiveLatencyUs;     // fixed cost of one collective, us
};

struct ModelOptions {
  std::string preset = "k3-mla";
  std::optional<int64_t> heads, kv_heads, head_dim, v_dim, tp_size, dcp_size;
  std::optional<bool> latent;  // set only when --latent was given
  int64_t batch = 1, tokens = 1;
  std::optional<int64_t> seq;
  std::string dtype = "bf16", partial_dtype = "f32";
  std::optional<std::string> kv_dtype;         // unset: the preset's, else dtype
  std::optional<std::string> comm_backend;     // default: the preset's
  bool replicate_q = false, gather_q = false;  // neither: the preset's q path
  Hardware hw;
};

double as_double(int64_t x) { return static_cast<double>(x); }

double dtype_bytes(gpu::StorageFormat d) { return static_cast<double>(gpu::format_bytes(d)); }

// printf into a string, for the table rows.
template <class... Args>
std::string format(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string s(static_cast<size_t>(n), '\0');
  std::snprintf(s.data(), s.size() + 1, fmt, args...);
  return s;
}

// Everything about one configuration that does not depend on S.
struct Model {
  harness::ModelShape shape;
  int64_t batch = 1, tokens = 1;      // B, T
  double b_kv = 2, b_q = 2, b_o = 4;  // bytes of a KV, a q and a partial-O element
  std::string kv_name = "bf16";       // the KV format
  int64_t h_loc = 1, hg = 1;          // query heads a rank attends with: TP alone, DCP
  int64_t kvh_tp = 1, kvh_dcp = 1;    // KV heads a rank reads: TP alone, DCP (the busiest rank)
  gpu::CommStrategy strategy = gpu::CommStrategy::a2a;
  bool replicate_q = false;
  double q_bytes = 0;        // q AllGather, received per rank
  double combine_bytes = 0;  // the combine, received per rank
  int64_t collectives = 0;
  double t_comm_s = 0;
  Hardware hw;

  // KV bytes of one context token on a rank reading kvh KV heads.
  double kv_token_bytes(int64_t kvh) const {
    const int64_t width = shape.latent ? shape.head_dim : shape.head_dim + shape.v_dim;
    return as_double(kvh) * as_double(width) * b_kv;
  }
  // The roofline time of `heads` query heads over `keys` tokens of `kvh` KV heads.
  double attn_s(int64_t heads, int64_t kvh, double keys) const {
    const double bytes = as_double(batch) * keys * kv_token_bytes(kvh);
    const double flops = 2.0 * as_double(batch) * as_double(tokens) * as_double(heads) * keys *
                         as_double(shape.head_dim + shape.v_dim);
    return std::max(bytes / (hw.hbm_gbps * kGiga), flops / (hw.tflops * kTera));
  }
  double comm_bytes() const { return q_bytes + combine_bytes; }
};

// The KV heads read by the busiest rank of each DCP group (group g: ranks g N .. g N + N - 1).
int64_t max_kv_heads(const gpu::DcpGeometry& geo) {
  int64_t kvh = 0;
  for (int64_t rank = 0; rank < geo.tp; rank += geo.n) kvh = std::max(kvh, geo.kv_heads(rank));
  return kvh;
}

// The geometry of TP alone (N = 1) or of DCP (N = shape.dcp).
gpu::Result<gpu::DcpGeometry> geometry(const harness::ModelShape& s, int64_t n, int64_t tokens) {
  gpu::DcpConfig cfg;
  cfg.tp_size = s.tp;
  cfg.layout = {n, 1};
  const gpu::AttentionDims dims{tokens, s.heads, s.kv_heads, s.head_dim, s.v_dim, s.latent};
  return gpu::DcpGeometry::create(cfg, dims);
}

// The model for the flags, or the first bad flag in one line.
gpu::Result<Model> build_model(const ModelOptions& o) {
  const harness::ModelPreset* preset = harness::find_preset(o.preset);
  if (!preset)
    return DCP_GPU_ERROR("--preset: unknown '", o.preset, "'; expected ", harness::kPresetNames);
  Model m;
  harness::ModelShape& s = m.shape;
  s = preset->shape;
  s.heads = o.heads.value_or(s.heads);
  s.kv_heads = o.kv_heads.value_or(s.kv_heads);
  s.head_dim = o.head_dim.value_or(s.head_dim);
  s.v_dim = o.v_dim.value_or(s.v_dim);
  s.latent = o.latent.value_or(s.latent);
  s.tp = o.tp_size.value_or(s.tp);
  s.dcp = o.dcp_size.value_or(s.dcp);
  m.batch = o.batch;
  m.tokens = o.tokens;
  // Every number was range-checked as it was parsed (flags.hpp); what is left is how they combine.
  const auto q = gpu::parse_format(o.dtype);
  if (!q) return DCP_GPU_ERROR("--dtype: got '", o.dtype, "'; expected ", gpu::format_names(false));
  const std::string kv_name = o.kv_dtype.value_or(preset->kv_dtype ? preset->kv_dtype : o.dtype);
  const auto kv = gpu::parse_kv_format(kv_name);
  if (!kv)
    return DCP_GPU_ERROR("--kv-dtype: got '", kv_name, "'; expected ", gpu::format_names(true));
  const auto part = gpu::parse_format(o.partial_dtype);
  if (!part)
    return DCP_GPU_ERROR("--partial-dtype: got '", o.partial_dtype, "'; expected ",
                         gpu::format_names(false));
  const std::string comm = o.comm_backend.value_or(preset->comm_backend);
  const auto strategy = gpu::parse_strategy(comm);
  if (!strategy)
    return DCP_GPU_ERROR("--comm-backend: got '", comm, "'; expected ",
                         gpu::names_in(gpu::kStrategyNames));
  if (o.replicate_q && o.gather_q)
    return DCP_GPU_ERROR("--replicate-q and --gather-q: expected one of them");
  const bool replicate_q = o.replicate_q || (!o.gather_q && preset->replicate_q);
  m.b_kv = dtype_bytes(*kv);
  m.b_q = dtype_bytes(*q);
  m.kv_name = kv_name;
  m.b_o = dtype_bytes(*part);
  m.hw = o.hw;

  // Divisibility (heads by kv-heads and tp-size, tp-size by dcp-size) as gpu/ checks it.
  const auto tp_alone = geometry(s, 1, m.tokens);
  if (!tp_alone) return tp_alone.status();
  const auto dcp = geometry(s, s.dcp, m.tokens);
  if (!dcp) return dcp.status();
  m.h_loc = dcp->h_loc;
  m.hg = dcp->hg;
  m.kvh_tp = max_kv_heads(*tp_alone);
  m.kvh_dcp = max_kv_heads(*dcp);

  const double peers = as_double(s.dcp - 1), rows = as_double(m.batch) * as_double(m.tokens);
  const double h_loc = as_double(m.h_loc), hg = as_double(m.hg);
  m.q_bytes = replicate_q ? 0.0 : peers * rows * h_loc * as_double(s.head_dim) * m.b_q;
  m.strategy = *strategy;
  m.replicate_q = replicate_q;
  const bool a2a = m.strategy == gpu::CommStrategy::a2a;
  m.combine_bytes = a2a ? peers * rows * h_loc * (as_double(s.v_dim) * m.b_o + kLseBytes)
                        : peers * rows * (hg * kLseBytes + h_loc * as_double(s.v_dim) * m.b_o);
  m.collectives = s.dcp == 1 ? 0 : (replicate_q ? 0 : 1) + (a2a ? 1 : 2);
  m.t_comm_s = as_double(m.collectives) * m.hw.latency_us * kMicro +
               m.comm_bytes() / (m.hw.link_gbps * kGiga);
  return m;
}

// The S column: 10 wide, or as wide as the largest S printed.
int seq_width(const ModelOptions& o) {
  return std::max(10, static_cast<int>(std::to_string(o.seq.value_or(kSweepLast)).size()));
}

void print_header(const ModelOptions& o, const Model& m, std::ostream& out) {
  const harness::ModelShape& s = m.shape;
  const Hardware& hw = m.hw;
  out << "# dcp-verify model  preset=" << o.preset << "  comm=" << gpu::strategy_name(m.strategy)
      << (m.replicate_q ? " replicate-q" : " gather-q")
      << "  per decode layer, per rank: DCP against TP alone (N = 1)\n"
      << "#  shape: Hq=" << s.heads << " Hkv=" << s.kv_heads << (s.latent ? " (shared latent)" : "")
      << " Dk=" << s.head_dim << " Dv=" << s.v_dim << "  TP=" << s.tp << " N=" << s.dcp
      << "  B=" << m.batch << " T=" << m.tokens << "  KV " << m.kv_name << ", q " << o.dtype
      << ", partial O " << o.partial_dtype << ", LSE f32\n"
      << "#  per rank: query heads H_loc=" << m.h_loc << " -> Hg=" << m.hg << "; KV heads read "
      << m.kvh_tp << " -> " << m.kvh_dcp << "; KV bytes per token "
      << format("%.0f -> %.0f", m.kv_token_bytes(m.kvh_tp), m.kv_token_bytes(m.kvh_dcp))
      << " (TP alone -> DCP)\n"
      << format(
             "#  capacity: 1 GiB of KV cache a rank (per layer) holds %.0f tokens under TP alone "
             "and %.0f under DCP: the rank's rows, a 1/N share of the context, count N times in "
             "the widened slot space (x%.3g: N only where TP alone replicated the KV heads)\n",
             // whole tokens: a rank's rows, each a token of its 1/N share under DCP
             std::floor(kGiB / m.kv_token_bytes(m.kvh_tp)),
             std::floor(kGiB / m.kv_token_bytes(m.kvh_dcp)) * static_cast<double>(s.dcp),
             m.kv_token_bytes(m.kvh_tp) / m.kv_token_bytes(m.kvh_dcp) * static_cast<double>(s.dcp))
      << format(
             "#  hardware: HBM %g GB/s, tensor cores %g TFLOP/s, link %g GB/s per direction, "
             "%g us per collective (defaults: quoted H200 and NVLink4 peaks and an 8-GPU NCCL "
             "all-to-all, not measured here; docs/cli.md, model)\n",
             hw.hbm_gbps, hw.tflops, hw.link_gbps, hw.latency_us)
      << "#  T_attn = max(B s M_KV / HBM, 2 B T H s (Dk+Dv) / TFLOPs): TP alone H = H_loc, "
         "s = S; DCP H = Hg, s = ceil(S/N)\n";
  const std::string q = m.replicate_q
                            ? "q replicated (no AllGather)"
                            : format("q AllGather (N-1) B T H_loc Dk b_q = %.0f", m.q_bytes);
  const std::string combine =
      m.strategy == gpu::CommStrategy::a2a
          ? format("a2a (N-1) B T H_loc (Dv b_O + b_L) = %.0f", m.combine_bytes)
          : format("ag_rs (N-1) B T (Hg b_L + H_loc Dv b_O) = %.0f", m.combine_bytes);
  out << "#  comm bytes received per rank: " << q << "; " << combine << "; total "
      << format("%.0f", m.comm_bytes()) << " B\n"
      << format(
             "#  T_comm = %g x %g us + %.0f B / %g GB/s = %.3f us; DCP pays when "
             "T_attn(S) - T_attn(S/N) > T_comm\n",
             as_double(m.collectives), hw.latency_us, m.comm_bytes(), hw.link_gbps,
             m.t_comm_s / kMicro)
      << "#  ignores: comm/compute overlap, kernel launches, the local combine kernel, "
         "replicate-q's extra q GEMM, efficiency below the peaks\n"
      << format("#%*s %14s %12s %13s %15s %10s %8s  %s\n", seq_width(o), "S", "KV B/rank",
                "comm B/rank", "T_attn(S) us", "T_attn(S/N) us", "T_comm us", "speedup", "pays");
}

// " %W.Df", or " %W.3e" when the fixed form would not fit the column.
std::string fixed_cell(double v, int width, int decimals) {
  const std::string fixed = format(" %*.*f", width, decimals, v);
  return static_cast<int>(fixed.size()) <= width + 1 ? fixed : format(" %*.3e", width, v);
}

void print_row(const Model& m, int64_t seq, int seq_w, std::ostream& out) {
  const gpu::DcpLayout lay{m.shape.dcp, 1};
  const double local = as_double(lay.rows_for(0, seq));  // ceil(S / N): rank 0 is the busiest
  const double t_tp = m.attn_s(m.h_loc, m.kvh_tp, as_double(seq));
  const double t_dcp = m.attn_s(m.hg, m.kvh_dcp, local);
  const double kv_bytes = as_double(m.batch) * local * m.kv_token_bytes(m.kvh_dcp);
  const double speedup = t_tp / (t_dcp + m.t_comm_s);
  out << format(" %*lld", seq_w, static_cast<long long>(seq)) << fixed_cell(kv_bytes, 14, 0)
      << fixed_cell(m.comm_bytes(), 12, 0) << fixed_cell(t_tp / kMicro, 13, 3)
      << fixed_cell(t_dcp / kMicro, 15, 3) << fixed_cell(m.t_comm_s / kMicro, 10, 3)
      << fixed_cell(speedup, 8, 3) << "  " << (t_tp - t_dcp > m.t_comm_s ? "yes" : "no") << "\n";
}

int run_model(const ModelOptions& o, std::ostream& out, std::ostream& err) {
  const gpu::Result<Model> built = build_model(o);
  if (!built) return refuse("model", built.status().message(), err);
  const Model& m = *built;
  print_header(o, m, out);
  if (o.seq) {
    print_row(m, *o.seq, seq_width(o), out);
  } else {
    for (int64_t seq = kSweepFirst; seq <= kSweepLast; seq *= 2)
      print_row(m, seq, seq_width(o), out);
  }
  // Seconds per token on the rank: TP alone (S of them), DCP (S / N of them).
  const double c_tp = m.attn_s(m.h_loc, m.kvh_tp, 1.0);
  const double c_dcp = m.attn_s(m.hg, m.kvh_dcp, 1.0);
  const double n = as_double(m.shape.dcp);
  if (c_tp <= c_dcp / n) {
    out << "# break-even S*: never (DCP does not cut a rank's attention time per context "
           "token for this shape)\n";
  } else {
    out << format("# break-even S*: %.0f tokens\n", m.t_comm_s / (c_tp - c_dcp / n));
  }
  return kExitOk;
}

}  // namespace

Command add_model_command(CLI::App& app) {
  auto o = std::make_shared<ModelOptions>();
  const auto extent = int_in(1, kMaxExtent);
  CLI::App* cmd = app.add_subcommand(
      "model",
      "The design's cost model of one DCP decode layer: KV read, communication, and the "
      "context length from which DCP pays");
  cmd->add_option("--preset", o->preset, std::string("Shape: ") + harness::kPresetNames)
      ->capture_default_str();
  cmd->add_option("--heads", o->heads, "Hq, query heads (overrides the preset)")->check(extent);
  cmd->add_option("--kv-heads", o->kv_heads, "Hkv, KV heads (divides Hq)")->check(extent);
  cmd->add_option("--head-dim", o->head_dim, "Dk (MLA: the 576-d latent with its rope part)")
      ->check(extent);
  cmd->add_option("--v-dim", o->v_dim, "Dv")->check(extent);
  add_latent_flag(cmd, o->latent);
  cmd->add_option("--tp-size", o->tp_size, "Attention TP size, a multiple of N")
      ->check(int_in(1, kMaxRanks));
  cmd->add_option("--dcp-size", o->dcp_size, "N, ranks in a DCP group")
      ->check(int_in(1, kMaxRanks));
  cmd->add_option("--batch", o->batch, "B, sequences in the decode batch")
      ->check(int_in(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--tokens", o->tokens, "T, query tokens per sequence")
      ->check(extent)
      ->capture_default_str();
  cmd->add_option("--seq", o->seq, "S, context length (default: a sweep of 1K .. 1M)")
      ->check(int_in(1, kMaxSeq));
  cmd->add_option("--dtype", o->dtype,
                  "Storage of q, and of KV without --kv-dtype: bf16, f16 or f32")
      ->capture_default_str();
  cmd->add_option(
      "--kv-dtype", o->kv_dtype,
      "Storage of KV: " + gpu::format_names(true) + " (default: the preset's, else --dtype)");
  cmd->add_option("--partial-dtype", o->partial_dtype,
                  "Format of the partial O on the wire: f32, f16 or bf16")
      ->capture_default_str();
  cmd->add_option("--comm-backend", o->comm_backend,
                  "Combine: ag_rs or a2a (default: the preset's; k3-mla and deepseek-v3 a2a, "
                  "llama3-70b ag_rs)");
  add_switch(cmd, "--replicate-q", o->replicate_q,
             "Every rank projects its group's q, no gather (k3-mla's default)");
  add_switch(cmd, "--gather-q", o->gather_q,
             "Gather q with an AllGather (the other presets' default)");
  const auto rate = real_in(0.0, kMaxRate, true);
  cmd->add_option("--hbm-gbps", o->hw.hbm_gbps, "HBM bandwidth, GB/s")
      ->check(rate)
      ->capture_default_str();
  cmd->add_option("--tflops", o->hw.tflops, "Tensor-core peak for the KV format, TFLOP/s")
      ->check(rate)
      ->capture_default_str();
  cmd->add_option("--link-gbps", o->hw.link_gbps, "Link bandwidth per GPU and direction, GB/s")
      ->check(rate)
      ->capture_default_str();
  cmd->add_option("--latency-us", o->hw.latency_us, "Latency of one collective, us")
      ->check(real_in(0.0, kMaxRate))
      ->capture_default_str();
  return {cmd, [o](const harness::Limits&) { return run_model(*o, std::cout, std::cerr); }};
}

}  // namespace dcp::tools
