#include "properties/mla_check.hpp"

#include <cmath>
#include <random>
#include <sstream>

#include "gpu/mla_slice.hpp"
#include "oracle/attention.hpp"
#include "oracle/compare.hpp"
#include "properties/dcp_setup.hpp"

namespace dcp::props {
namespace {

using oracle::DType;
using oracle::Tensor;

Tensor<double> random_tensor(std::vector<int64_t> shape, double sd, DType d, std::mt19937_64& g) {
  Tensor<double> t(std::move(shape));
  std::normal_distribution<double> n(0.0, sd);
  for (double& x : t.data) x = oracle::round_to(d, n(g));
  return t;
}

std::vector<float> to_float(const Tensor<double>& t) {
  return std::vector<float>(t.data.begin(), t.data.end());
}

}  // namespace

oracle::MlaCase make_mla_case(const MlaSpec& s) {
  std::mt19937_64 g(s.seed);
  oracle::MlaCase m;
  const int64_t dq = s.nope + s.rope;
  // Weights scaled by 1/sqrt(fan-in) (as trained layers are), stored in bf16.
  m.w_qb =
      random_tensor({s.heads, dq, s.q_lora}, 1.0 / std::sqrt(double(s.q_lora)), DType::bf16, g);
  m.w_kc =
      random_tensor({s.heads, s.nope, s.kv_lora}, 1.0 / std::sqrt(double(s.nope)), DType::bf16, g);
  m.w_vc = random_tensor({s.heads, s.kv_lora, s.v_head}, 1.0 / std::sqrt(double(s.kv_lora)),
                         DType::bf16, g);
  m.c_q = random_tensor({s.tokens, s.q_lora}, 1.0, DType::bf16, g);
  m.c_kv = random_tensor({s.seq, s.kv_lora}, 1.0, s.kv_dtype, g);
  m.k_pe = random_tensor({s.seq, s.rope}, 1.0, s.kv_dtype, g);
  m.kv_dtype = s.kv_dtype;
  std::uniform_int_distribution<int64_t> pos(0, s.seq + 1);
  for (int64_t t = 0; t < s.tokens; ++t)
    m.q_pos.push_back(s.explicit_pos ? pos(g) : std::max<int64_t>(0, s.seq - s.tokens + t));
  m.causal = s.causal;
  m.apply_rope = s.apply_rope;
  m.scale = static_cast<float>(1.0 / std::sqrt(double(dq)));
  m.lse_base = s.lse_base;
  return m;
}

DcpCheck check_mla(const MlaSpec& s, const gpu::DcpConfig& cfg) {
  DcpCheck out;
  const oracle::MlaCase m = make_mla_case(s);
  gpu::MlaInputs in;
  in.dims = {s.tokens, s.heads, s.q_lora, s.nope, s.rope, s.kv_lora, s.v_head};
  in.w_qb = to_float(m.w_qb);
  in.w_kc = to_float(m.w_kc);
  in.w_vc = to_float(m.w_vc);
  in.c_q = to_float(m.c_q);
  in.c_kv = to_float(m.c_kv);
  in.k_pe = to_float(m.k_pe);
  in.kv_dtype = to_storage_format(s.kv_dtype);
  in.q_pos = m.q_pos;
  in.seq = s.seq;
  in.causal = s.causal;
  in.apply_rope = s.apply_rope;
  in.rope_theta = static_cast<float>(m.rope_theta);
  in.scale = static_cast<float>(m.scale);
  in.chunks = make_chunks(s.seq, s.seed);
  gpu::Result<gpu::MlaRun> run = gpu::run_mla_threads(in, cfg);
  if (!run) {
    out.backend_error = true;
    out.report = "backend: " + run.status().message() + "\n";
    return out;
  }
  const int64_t dk = s.kv_lora + s.rope;
  Tensor<double> q_att({s.tokens, s.heads, dk}), k_att({s.seq, dk});
  q_att.data.assign(run->q_att.begin(), run->q_att.end());
  k_att.data.assign(run->k_att.begin(), run->k_att.end());
  oracle::Arithmetic a = host_claim(cfg, false);
  oracle::Expected<oracle::Bound> b = oracle::derive_mla_bound(m, q_att, k_att, a);
  oracle::Expected<oracle::Attention> ref = oracle::reference(oracle::unabsorbed_case(m));
  if (!b || !ref) {
    out.oracle_error = true;
    out.report = "oracle: " + (b ? ref.status().message() : b.status().message()) + "\n";
    return out;
  }
  Tensor<double> o({s.tokens, s.heads, s.v_head}), lse({s.tokens, s.heads});
  o.data.assign(run->out.begin(), run->out.end());
  lse.data.assign(run->lse.begin(), run->lse.end());
  oracle::Expected<oracle::Comparison> cmp = oracle::compare(o, lse, *ref, *b);
  if (!cmp) {
    out.report = "compare: " + cmp.status().message() + "\n";
    return out;
  }
  out.full = *cmp;
  out.max_ratio = cmp->max_ratio();
  out.max_stat_ratio = cmp->max_stat_ratio();
  out.pass = cmp->pass();
  out.pass_statistical = cmp->pass_statistical();
  if (!out.pass) out.report = "mla output: " + cmp->summary() + "\n";
  return out;
}

std::string describe(const MlaSpec& s) {
  std::ostringstream os;
  os << "T=" << s.tokens << " Hq=" << s.heads << " Dc=" << s.q_lora << " Dn=" << s.nope
     << " Dr=" << s.rope << " Dl=" << s.kv_lora << " Dvh=" << s.v_head << " S=" << s.seq
     << " rope=" << s.apply_rope << " pos=" << (s.explicit_pos ? "random" : "tail")
     << " causal=" << s.causal << " kv=" << oracle::dtype_name(s.kv_dtype)
     << " base=" << oracle::lse_base_name(s.lse_base) << " seed=" << s.seed;
  return os.str();
}

}  // namespace dcp::props
