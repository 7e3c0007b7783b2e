// make_result — writes the result file an implementation gives for a case, for the CLI tests of
// `dcp-verify check`: the fp32 implementation model (correct or with a planted bug) or the
// production host path, optionally with every rank's partial. Test-only; not installed.
//
//   make_result --case C --out R --impl model --dcp-size 4 --interleave 2 --bug unweighted_mean
//   make_result --case C --out R --impl host --dcp-size 4 --order rand --out-dtype bf16 --partials
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <string>

#include "gpu/kernels/merge.hpp"
#include "gpu/kernels/storage_format.hpp"
#include "mutants/catalogue.hpp"
#include "oracle/case_file.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/result_gen.hpp"

int main(int argc, char** argv) {
  namespace p = dcp::props;
  CLI::App app{"make_result: an implementation's result file for a case (tests only)"};
  std::string case_path, out_path, impl = "model", bug = "none", order = "seq", out_dtype = "f32";
  std::string merge = "ag_rs";
  int64_t n = 1, interleave = 1, splits = 1;
  uint64_t seed = 1;
  bool partials = false;
  app.add_option("--case", case_path, "Case file")->required();
  app.add_option("--out", out_path, "Result file to write")->required();
  app.add_option("--impl", impl, "model (fp32 implementation model) or host (production path)")
      ->check(CLI::IsMember({"model", "host"}));
  app.add_option("--dcp-size", n, "N");
  app.add_option("--interleave", interleave, "I");
  app.add_option("--splits", splits, "host: split-KV pieces per rank");
  app.add_option("--order", order, "host: seq, pair or rand; model: seq or rev");
  app.add_option("--merge", merge, "ag_rs or a2a");
  app.add_option("--out-dtype", out_dtype, "f32, f16 or bf16 (model: also f8_e4m3, f8_e5m2)");
  app.add_option("--seed", seed, "Seed of the model's perturbations, the order and the chunks");
  app.add_option("--bug", bug,
                 "model only: none, unweighted_mean, merge_wrong_base, drop_token, lse_wrong_base, "
                 "sink_per_shard, lost_token");
  app.add_flag("--partials", partials, "Write o_partial and lse_partial too");
  double exp_rel_err = 0.0, log_rel_err = 0.0;
  bool unclaimed = false;
  app.add_option("--exp-rel-err", exp_rel_err,
                 "model only: every exp low by this relative error, claimed as exp_rel_err");
  app.add_option("--log-rel-err", log_rel_err,
                 "model only: every log low by this error, claimed as log_rel_err");
  app.add_flag("--unclaimed", unclaimed,
               "Leave exp_rel_err, log_rel_err, tf32 and ftz out of the metadata");
  bool tf32 = false, ftz = false;
  app.add_flag("--tf32", tf32, "model only: products' operands rounded to tf32 (accum tf32)");
  app.add_flag("--ftz", ftz, "model only: stores and the P cast flush subnormals to zero");
  std::string partial_dtype = "f32", merge_accum = "f32";
  app.add_option("--partial-dtype", partial_dtype,
                 "model only: the partials' format (f32, bf16, f16)");
  app.add_option("--merge-accum", merge_accum,
                 "model only: the cross-rank products and sums rounded to this format");
  std::string p_cast = "none";
  app.add_option("--p-cast", p_cast, "model only: P rounded to this format before P.V")
      ->check(CLI::IsMember({"none", "bf16", "f16", "f8_e4m3", "f8_e5m2"}));
  std::string decode_kv = "bf16";
  app.add_option("--decode-kv", decode_kv,
                 "The decode case's K/V: bf16, or f8_e4m3 / f8_e5m2 with per-head scales")
      ->check(CLI::IsMember({"bf16", "f8_e4m3", "f8_e5m2"}));
  int64_t decode_seq = 0;
  app.add_option("--decode-case", decode_seq,
                 "First write a decode case of this many keys to --case: T 1, Hq 8, Hkv 1, D 128, "
                 "N(0, 1) inputs in bf16")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  CLI11_PARSE(app, argc, argv);

  if (decode_seq > 0) {
    p::CaseSpec spec;
    spec.q_heads = 8;
    spec.head_dim = 128;
    spec.v_dim = 128;
    spec.seq = decode_seq;
    spec.q_dtype = spec.kv_dtype = dcp::oracle::DType::bf16;
    if (decode_kv != "bf16") {
      spec.kv_dtype =
          decode_kv == "f8_e4m3" ? dcp::oracle::DType::f8e4m3 : dcp::oracle::DType::f8e5m2;
      spec.kv_scale = p::KvScale::per_head;
    }
    spec.seed = seed;
    if (const auto st = dcp::oracle::save_case(case_path, p::make_case(spec)); !st) {
      std::cerr << "make_result: " << st.message() << "\n";
      return 2;
    }
  }
  auto c = dcp::oracle::load_case(case_path);
  if (!c) {
    std::cerr << "make_result: " << c.status().message() << "\n";
    return 2;
  }
  // The formats by their metadata names (docs/format.md).
  const std::map<std::string, dcp::oracle::DType> formats = {
      {"f32", dcp::oracle::DType::f32},
      {"f16", dcp::oracle::DType::f16},
      {"bf16", dcp::oracle::DType::bf16},
      {"f8_e4m3", dcp::oracle::DType::f8e4m3},
      {"f8_e5m2", dcp::oracle::DType::f8e5m2}};
  const auto od = dcp::gpu::parse_format(out_dtype);  // the host path's: f32, f16, bf16
  if (!formats.count(out_dtype) || (impl == "host" && !od)) {
    std::cerr << "make_result: --out-dtype " << out_dtype << "\n";
    return 2;
  }
  dcp::oracle::DcpResult r;
  if (impl == "model") {
    // A catalogue name (mutants/catalogue.hpp) planted in the model, or none.
    const auto planted = dcp::mutants::parse_mutant(bug);
    if (bug != "none" && (!planted || !p::planted_in_model(*planted))) {
      std::cerr << "make_result: --bug " << bug << ": not a mutant planted in the fp32 model\n";
      return 2;
    }
    p::ModelConfig m;
    m.shards = n;
    m.interleave = interleave;
    m.merge = merge == "a2a" ? p::Merge::a2a : p::Merge::ag_rs;
    m.reverse_merge = order == "rev";
    m.base2 = c->lse_base == dcp::oracle::LseBase::two;
    m.out = formats.at(out_dtype);
    m.bug = bug == "none" ? p::Bug::none : *planted;
    m.seed = seed;
    m.exp_rel_err = exp_rel_err;
    m.log_rel_err = log_rel_err;
    m.approx_systematic = true;
    m.tf32 = tf32;
    m.ftz = ftz;
    const auto part = dcp::gpu::parse_format(partial_dtype);
    const auto sum = dcp::gpu::parse_format(merge_accum);
    if (!part || !sum) {
      std::cerr << "make_result: --partial-dtype/--merge-accum: expected f32, f16 or bf16\n";
      return 2;
    }
    m.partial = p::to_oracle_dtype(*part);
    m.merge_accum = p::to_oracle_dtype(*sum);
    if (p_cast != "none") m.p_cast = formats.at(p_cast);
    r = p::model_result(*c, m, partials);
    if (unclaimed) {
      for (dcp::oracle::Arithmetic* a : {&r.output_claim, &r.partial_claim}) {
        a->exp_rel_err.reset();
        a->log_rel_err.reset();
        a->tf32 = false;
        a->ftz = false;
      }
    }
  } else {
    dcp::gpu::DcpConfig cfg;
    cfg.tp_size = n;
    cfg.layout = {n, interleave};
    cfg.strategy = merge == "a2a" ? dcp::gpu::CommStrategy::a2a : dcp::gpu::CommStrategy::ag_rs;
    const auto ord = dcp::gpu::parse_reduce_order(order);
    if (!ord) {
      std::cerr << "make_result: --order " << order << "\n";
      return 2;
    }
    cfg.order = *ord;
    cfg.order_seed = seed;
    cfg.splits = splits;
    cfg.out_dtype = *od;
    cfg.base = p::to_gpu_base(c->lse_base);
    auto hr = p::host_result(*c, cfg, p::make_chunks(c->seq(), seed), partials);
    if (!hr) {
      std::cerr << "make_result: " << hr.status().message() << "\n";
      return 2;
    }
    r = std::move(*hr);
  }
  if (const auto st = dcp::oracle::write_safetensors(out_path, dcp::oracle::result_to_file(r, *c));
      !st) {
    std::cerr << "make_result: " << st.message() << "\n";
    return 2;
  }
  return 0;
}
