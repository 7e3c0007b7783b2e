#include "properties/result_gen.hpp"

#include "gpu/run_threads.hpp"
#include "properties/dcp_bridge.hpp"

namespace dcp::props {

using oracle::Case;
using oracle::DcpResult;
using oracle::Tensor;

DcpResult model_result(const Case& c, const ModelConfig& m, bool partials) {
  ModelOutput out = run_fp32_model(c, m);
  DcpResult r;
  r.o = std::move(out.o);
  r.lse = std::move(out.lse);
  r.dcp_size = m.shards;
  r.interleave = m.interleave;
  r.output_claim = claim_of(m);
  r.partial_claim = r.output_claim;
  r.partial_claim.shards = 1;
  r.partial_claim.layout.reset();
  r.partial_claim.out = r.output_claim.partial_o;
  r.partial_claim.lse_out = r.output_claim.partial_lse;
  if (partials) {
    r.o_partial = std::move(out.o_partial);
    r.lse_partial = std::move(out.lse_partial);
  }
  return r;
}

oracle::Expected<DcpResult> host_result(const Case& c, const gpu::DcpConfig& cfg,
                                        const std::vector<int64_t>& chunks, bool partials) {
  if (cfg.tp_size != cfg.layout.ranks) {
    return DCP_ERROR("host_result: tp_size ", cfg.tp_size, " != dcp size ", cfg.layout.ranks,
                     "; one DCP group holds every head");
  }
  for (const auto& [name, t] : {std::pair{"q", c.q_dtype}, std::pair{"k", c.kv_dtype}}) {
    if (t != oracle::DType::f32 && t != oracle::DType::f16 && t != oracle::DType::bf16)
      return DCP_ERROR("host_result: tensor '", name, "' is ", oracle::dtype_name(t),
                       "; the production path stores F32, F16 or BF16");
  }
  if (!c.k_scale.empty() || !c.v_scale.empty())
    return DCP_ERROR("host_result: the case has K/V scales; the production path has none");
  gpu::Result<gpu::GroupRun> run = gpu::run_dcp_threads(to_dcp_inputs(c, chunks), cfg);
  if (!run) return DCP_ERROR("host path: ", run.status().message());
  const int64_t T = c.tokens(), Hq = c.q_heads(), dv = c.v_dim, n = cfg.layout.ranks;
  DcpResult r;
  r.o = Tensor<double>({T, Hq, dv});
  r.lse = Tensor<double>({T, Hq});
  for (size_t i = 0; i < run->o.size(); ++i) r.o.data[i] = run->o[i];
  for (size_t i = 0; i < run->lse.size(); ++i) r.lse.data[i] = run->lse[i];
  r.dcp_size = n;
  r.interleave = cfg.layout.interleave;
  r.splits = cfg.splits;
  r.sink_rank = gpu::kSinkRank;
  r.output_claim = host_claim(cfg, false);
  r.partial_claim = host_claim(cfg, true);
  if (partials) {
    Tensor<double> po({n, T, Hq, dv}), pl({n, T, Hq});
    for (int64_t rank = 0; rank < n; ++rank) {
      const auto& o = run->partial_o[static_cast<size_t>(rank)];
      const auto& l = run->partial_lse[static_cast<size_t>(rank)];
      for (size_t i = 0; i < o.size(); ++i)
        po.data[static_cast<size_t>(rank) * o.size() + i] = o[i];
      for (size_t i = 0; i < l.size(); ++i)
        pl.data[static_cast<size_t>(rank) * l.size() + i] = l[i];
    }
    r.o_partial = std::move(po);
    r.lse_partial = std::move(pl);
  }
  return r;
}

}  // namespace dcp::props
