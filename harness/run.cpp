#include "harness/run.hpp"

#include <algorithm>
#include <ostream>

#include "gpu/kernels/storage_format.hpp"
#include "properties/case_gen.hpp"
#include "properties/footprint.hpp"

namespace dcp::harness {

using oracle::DType;
using props::CaseSpec;
using props::DcpSetup;
using props::KvScale;

namespace {

// Request b > 0 of a batch draws its values from seed * stride + b, apart from other cases' seeds.
constexpr uint64_t kRequestSeedStride = 1000003;

}  // namespace

std::vector<int64_t> whole_context_write(int64_t seq) {
  return seq > 0 ? std::vector<int64_t>{seq} : std::vector<int64_t>{};
}

std::string variant_of(const CaseSpec& s) {
  std::string v = s.causal ? "causal" : "full";
  if (s.explicit_pos) v += "+pos";
  if (s.window) v += "+win" + std::to_string(s.window);
  if (s.softcap > 0) v += "+cap";
  for (const props::FeatureInfo& f : props::kFeatures)
    if (f.toggle != nullptr && s.*f.toggle) v += "+" + std::string(f.name);
  if (s.topk) v += "+top" + std::to_string(s.topk);
  if (s.lse_base == oracle::LseBase::two) v += "+b2";
  if (s.kv_dtype != s.q_dtype || s.kv_scale != KvScale::none) {  // the caches' own format
    const gpu::StorageFormat f = props::to_storage_format(s.kv_dtype);
    v += "+kv=" + std::string(gpu::is_fp8(f) ? gpu::format_name(f).substr(3) : gpu::format_name(f));
    if (s.kv_scale != KvScale::none) v += "/" + std::string(props::kv_scale_name(s.kv_scale));
  }
  return v;
}

std::string math_tag(const gpu::KernelMath& m) {
  std::string v;
  if (m.exp == gpu::ExpImpl::poly3) v += "+exp3";
  if (m.p_cast != gpu::StorageFormat::f32) v += "+P" + std::string(gpu::format_name(m.p_cast));
  if (m.tf32) v += "+tf32";
  if (m.partial != gpu::StorageFormat::f32) v += "+Or" + std::string(gpu::format_name(m.partial));
  if (m.merge != gpu::StorageFormat::f32) v += "+rs" + std::string(gpu::format_name(m.merge));
  return v;
}

namespace {

CaseSpec gqa_shape(uint64_t seed) {
  return CaseSpec{.tokens = 2,
                  .q_heads = 8,
                  .kv_heads = 2,
                  .head_dim = 64,
                  .v_dim = 64,
                  .seq = 1500,
                  .q_dtype = DType::bf16,
                  .kv_dtype = DType::bf16,
                  .seed = seed};
}

CaseSpec mla_shape(uint64_t seed) {
  CaseSpec s = gqa_shape(seed);
  s.tokens = 1;
  s.q_heads = 16;
  s.kv_heads = 1;
  s.head_dim = 72;  // a 64-d latent plus 8 rope dims: the K3 576/512 layout scaled down
  s.v_dim = 64;
  s.shared_latent = true;
  return s;
}

DcpSetup make_row(CaseSpec spec, int64_t tp, int64_t n, int64_t il, gpu::CommStrategy st,
                  bool repl) {
  DcpSetup s;
  s.cfg.tp_size = tp;
  s.cfg.layout = {n, il};
  s.cfg.strategy = st;
  s.cfg.replicate_q = repl;
  s.cfg.base = props::to_gpu_base(spec.lse_base);
  s.chunks = whole_context_write(spec.seq);  // batch_request draws the writes
  s.spec = spec;
  return s;
}

}  // namespace

// Every row sets its own variant on top of a base shape.
std::vector<RunCase> default_rows(uint64_t seed) {
  using gpu::CommStrategy;
  const auto ag = CommStrategy::ag_rs, a2a = CommStrategy::a2a;
  std::vector<RunCase> rows;
  auto add = [&](CaseSpec s, int64_t tp, int64_t n, int64_t il, CommStrategy st, bool repl,
                 gpu::ReduceOrder order = gpu::ReduceOrder::sequential, int64_t splits = 1,
                 gpu::KernelMath math = {}, gpu::StorageFormat out = gpu::StorageFormat::f32) {
    DcpSetup r = make_row(s, tp, n, il, st, repl);
    r.cfg.order = order;
    r.cfg.order_seed = seed;
    r.cfg.splits = splits;
    r.cfg.math = math;
    r.cfg.out_dtype = out;
    rows.push_back({r, variant_of(s) + math_tag(math), 1});
  };
  CaseSpec s = gqa_shape(seed);
  add(s, 1, 1, 1, ag, false);  // one rank: the baseline
  add(s, 2, 2, 1, a2a, false);
  s.window = 256;
  add(s, 4, 4, 1, ag, false, gpu::ReduceOrder::pairwise);
  s = gqa_shape(seed + 1);
  s.softcap = 30.0;
  add(s, 4, 4, 16, a2a, true);
  s = gqa_shape(seed + 2);
  s.sink = true;
  add(s, 8, 8, 1, a2a, false, gpu::ReduceOrder::random, 2);
  s = gqa_shape(seed + 3);
  s.topk = 64;
  add(s, 8, 8, 4, ag, false);
  s = gqa_shape(seed + 4);
  s.lse_base = oracle::LseBase::two;
  add(s, 4, 2, 2, a2a, false);  // two DCP groups in a TP group of 4
  s = gqa_shape(seed + 5);
  s.explicit_pos = true;
  s.window = 100;
  s.sink = true;
  s.lse_base = oracle::LseBase::two;
  add(s, 4, 2, 8, ag, true, gpu::ReduceOrder::random, 3);
  s = gqa_shape(seed + 6);
  s.seq = 3;  // shorter than N: ranks with nothing to attend to
  add(s, 8, 8, 1, a2a, false);
  // A bf16 pipeline as engines ship it at DCP 8: a cheap exponential, P in bf16 for the MMA,
  // bf16 partials and a bf16 reduce-scatter into a bf16 output; then tf32 products with fp16
  // partials over a2a.
  const auto bf16 = gpu::StorageFormat::bf16, f16 = gpu::StorageFormat::f16;
  s = gqa_shape(seed + 11);
  s.seq = 2500;
  add(s, 8, 8, 1, ag, false, gpu::ReduceOrder::sequential, 1,
      {.exp = gpu::ExpImpl::poly3, .p_cast = bf16, .partial = bf16, .merge = bf16}, bf16);
  s = gqa_shape(seed + 12);
  s.sink = true;
  add(s, 4, 4, 2, a2a, false, gpu::ReduceOrder::pairwise, 1,
      {.p_cast = f16, .tf32 = true, .partial = f16}, f16);
  s = mla_shape(seed + 7);
  add(s, 1, 1, 1, a2a, false);
  add(s, 4, 4, 1, a2a, true);
  s.sink = true;
  add(s, 8, 8, 1, a2a, true, gpu::ReduceOrder::pairwise);
  s = mla_shape(seed + 8);
  s.topk = 128;
  add(s, 8, 8, 64, ag, false);
  s = mla_shape(seed + 9);
  s.window = 300;
  s.lse_base = oracle::LseBase::two;
  add(s, 4, 2, 1, ag, false);
  s = mla_shape(seed + 10);
  s.softcap = 4.0;
  add(s, 4, 4, 3, a2a, false, gpu::ReduceOrder::random, 3);
  return rows;
}

namespace {

// Request b's context: S - floor(b S / (2 B)).
int64_t request_seq(const RunCase& rc, int64_t b) {
  return rc.setup.spec.seq - b * rc.setup.spec.seq / (2 * rc.batch);
}

class LocalRunner final : public RequestRunner {
 public:
  explicit LocalRunner(const props::DcpBackend& backend) : backend_(backend) {}
  RequestResult run(const DcpSetup& s, size_t row, const oracle::Watch& watch,
                    std::ostream&) override {
    RequestResult r;
    if (!s.batch.empty()) {
      r.chk = props::check_dcp_setup(s, backend_, watch);
    } else {
      const auto c = props::make_case_unless(s.spec, props::KvHolding::stored, watch.stop);
      if (!c) {
        r.chk.interrupted = true;
        return r;
      }
      r.chk = props::check_dcp(*c, s.cfg, s.chunks, backend_, true, watch);
    }
    if (r.chk.oracle_error) {
      r.code = kExitBadInput;
      r.refusal = "row " + std::to_string(row) + ": the oracle cannot judge this case: " +
                  r.chk.report.substr(0, r.chk.report.find('\n'));
    }
    return r;
  }

 private:
  const props::DcpBackend& backend_;
};

}  // namespace

std::unique_ptr<RequestRunner> local_runner(const props::DcpBackend& backend) {
  return std::make_unique<LocalRunner>(backend);
}

DcpSetup batch_step(const RunCase& rc) {
  DcpSetup r = rc.setup;
  for (int64_t b = 0; b < rc.batch; ++b) r.batch.push_back(request_seq(rc, b));
  r.shared_prefix = rc.shared_prefix;
  r.retired = rc.retired;
  return r;
}

DcpSetup batch_request(const RunCase& rc, int64_t b) {
  DcpSetup r = rc.setup;
  if (b > 0) {
    r.spec.seq = request_seq(rc, b);
    r.spec.seed = rc.setup.spec.seed * kRequestSeedStride + static_cast<uint64_t>(b);
  }
  r.chunks = props::make_chunks(r.spec.seq, r.spec.seed);
  return r;
}

std::optional<std::string> over_budget(const RunCase& rc, const Limits& lim,
                                       const std::string& flags) {
  props::Footprint most;  // requests run one after another: the largest peak, the summed work
  double work = 0;
  if (rc.one_step) {  // every request at once
    most = props::dcp_check_footprint(batch_step(rc), props::KvHolding::doubles);
    work = most.work;
  }
  for (int64_t b = 0; !rc.one_step && b < rc.batch; ++b) {
    // Chunk writes differ with the seed (--cases): budget for the longest make_chunks draws.
    DcpSetup s{
        .spec = rc.setup.spec, .cfg = rc.setup.cfg, .chunks = {}, .batch = {}, .shared_prefix = 0};
    s.spec.seq = request_seq(rc, b);
    s.chunks = {std::min(s.spec.seq, props::kMaxWriteChunk)};
    const props::Footprint f = props::dcp_check_footprint(s, props::KvHolding::stored);
    work += f.work;
    if (f.bytes > most.bytes) most = f;
  }
  most.work = work;
  const auto why = over_limits(most, lim);
  if (!why) return std::nullopt;
  return (flags.empty() ? std::string("the case") : flags.substr(1)) + ": " + *why;
}

RowOutcome run_row(const RunCase& rc, size_t index, RequestRunner& runner,
                   const oracle::Watch& watch, std::chrono::milliseconds deadline,
                   std::ostream& err) {
  RowOutcome out;
  out.row.rc = &rc;
  const int64_t steps = rc.one_step ? 1 : rc.batch;  // a batch in one step, or request by request
  for (int64_t b = 0; b < steps; ++b) {
    DcpSetup s = rc.one_step ? batch_step(rc) : batch_request(rc, b);
    s.cfg.deadline = deadline;
    oracle::Watch request{.progress = nullptr, .stop = watch.stop};
    if (watch.progress)
      request.progress = [&](int64_t done, int64_t total) {
        watch.progress(b * total + done, steps * total);
      };
    RequestResult r = runner.run(s, index, request, err);
    if (r.code != kExitOk) return {r.code, std::move(r.refusal), {}};
    if (!runner.root) continue;
    if (r.chk.interrupted) {
      out.interrupted = true;
      return out;
    }
    const props::DcpCheck& chk = r.chk;
    if (chk.max_ratio >= out.row.worst.max_ratio) out.row.worst = chk;
    out.row.comparisons += chk.comparisons;
    out.row.stat_ratio = std::max(out.row.stat_ratio, chk.max_stat_ratio);
    if (chk.full.o_elements == 0) out.row.judged = false;
    if (!chk.pass || !chk.pass_statistical) {
      out.row.pass = out.row.pass && chk.pass;
      out.row.suspect = out.row.suspect || !chk.pass_statistical;
      out.row.report += chk.report + "case: " + props::describe(s) + "\n";
    }
  }
  return out;
}

}  // namespace dcp::harness
