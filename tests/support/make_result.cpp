// make_result — writes the result file an implementation gives for a case, for the CLI tests of
// `dcp-verify check`: the fp32 implementation model (correct or with a planted bug) or the
// production host path, optionally with every rank's partial. Test-only; not installed.
//
//   make_result --case C --out R --impl model --dcp-size 4 --interleave 2 --bug unweighted_mean
//   make_result --case C --out R --impl host --dcp-size 4 --order rand --out-dtype bf16 --partials
//   make_result --batch 300,1000,40 --bug-request 1 --case C --out R --impl model --dcp-size 4 ...
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "gpu/kernels/merge.hpp"
#include "gpu/kernels/storage_format.hpp"
#include "mutants/catalogue.hpp"
#include "oracle/case_file.hpp"
#include "properties/case_gen.hpp"
#include "properties/dcp_bridge.hpp"
#include "properties/dcp_setup.hpp"
#include "properties/result_gen.hpp"

namespace {

// Tensors of the same name concatenated along dimension `axis` (one file per request, in order).
dcp::oracle::StTensor concat(const std::vector<const dcp::oracle::StTensor*>& parts, size_t axis) {
  dcp::oracle::StTensor out = *parts.front();
  out.values.clear();
  out.ints.clear();
  out.shape[axis] = 0;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= out.shape[d];
  for (size_t d = axis + 1; d < out.shape.size(); ++d) inner *= out.shape[d];
  for (const auto* p : parts) out.shape[axis] += p->shape[axis];
  for (int64_t o = 0; o < outer; ++o) {
    for (const auto* p : parts) {
      const int64_t n = p->shape[axis] * inner;
      auto take = [&](const auto& from, auto& to) {
        to.insert(to.end(), from.begin() + o * n, from.begin() + (o + 1) * n);
      };
      if (p->dtype == dcp::oracle::DType::i64) {
        take(p->ints, out.ints);
      } else {
        take(p->values, out.values);
      }
    }
  }
  return out;
}

// One batch file from per-request files (docs/format.md, "Batches"): every tensor of `by_rows`
// concatenated along its axis, the rest (and the metadata) taken from the first request.
dcp::oracle::StFile batch_of(const std::vector<dcp::oracle::StFile>& files,
                             const std::map<std::string, size_t>& by_rows) {
  dcp::oracle::StFile out = files.front();
  for (const auto& [name, axis] : by_rows) {
    if (!out.tensors.count(name)) continue;
    std::vector<const dcp::oracle::StTensor*> parts;
    for (const auto& f : files) parts.push_back(&f.tensors.at(name));
    out.tensors[name] = concat(parts, axis);
  }
  return out;
}

}  // namespace

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
  app.add_option("--merge", merge,
                 "ag_rs or a2a (model: also pairwise, a chain of normalized merges, claimed as "
                 "merge_depth)");
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
  std::optional<double> rescale_exp_rel_err;
  app.add_option("--rescale-exp-rel-err", rescale_exp_rel_err,
                 "model only: the rescales' own exp, every result low by this relative error (0: "
                 "the library's), claimed as rescale_exp_rel_err");
  app.add_flag("--unclaimed", unclaimed,
               "Leave exp_rel_err, log_rel_err, rescale_exp_rel_err, merge_depth, tf32, ftz and "
               "kv_dequant out of the metadata");
  bool tf32 = false, ftz = false;
  app.add_flag("--tf32", tf32, "model only: products' operands rounded to tf32 (accum tf32)");
  app.add_flag("--ftz", ftz, "model only: stores and the P cast flush subnormals to zero");
  std::string partial_dtype = "f32", merge_accum = "f32", merge_lse_accum = "f32";
  app.add_option("--partial-dtype", partial_dtype,
                 "model only: the partials' format (f32, bf16, f16)");
  app.add_option("--merge-accum", merge_accum,
                 "model only: the cross-rank products and sums rounded to this format");
  app.add_option("--merge-lse-accum", merge_lse_accum,
                 "model only: the merge's weight sum (the merged LSE's) rounded to this format");
  std::string kv_dequant = "none";
  app.add_option("--kv-dequant", kv_dequant,
                 "model only: K and V dequantized (rounded) into this format before the products, "
                 "claimed as kv_dequant")
      ->check(CLI::IsMember({"none", "bf16", "f16"}));
  std::string p_cast = "none";
  app.add_option("--p-cast", p_cast, "model only: P rounded to this format before P.V")
      ->check(CLI::IsMember({"none", "bf16", "f16", "f8_e4m3", "f8_e5m2"}));
  std::string decode_kv = "bf16";
  app.add_option("--decode-kv", decode_kv,
                 "The decode case's K/V: bf16, or f8_e4m3 / f8_e5m2 with per-head scales")
      ->check(CLI::IsMember({"bf16", "f8_e4m3", "f8_e5m2"}));
  std::vector<int64_t> batch;
  int64_t bug_request = 0;
  app.add_option("--batch", batch,
                 "model only: write a batch of decode cases of these key counts to --case (T 1 "
                 "and 2 in turn, otherwise as --decode-case) and the batch's result to --out")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--bug-request", bug_request, "With --batch: the request --bug is planted in");
  int64_t decode_seq = 0;
  app.add_option("--decode-case", decode_seq,
                 "First write a decode case of this many keys to --case: T 1, Hq 8, Hkv 1, D 128, "
                 "N(0, 1) inputs in bf16")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  CLI11_PARSE(app, argc, argv);

  // A decode case of `seq` keys and `tokens` query tokens: 8 query heads on one KV head of dim 128.
  auto decode_spec = [&](int64_t seq, int64_t tokens, uint64_t case_seed) {
    p::CaseSpec spec;
    spec.tokens = tokens;
    spec.q_heads = 8;
    spec.head_dim = 128;
    spec.v_dim = 128;
    spec.seq = seq;
    spec.q_dtype = spec.kv_dtype = dcp::oracle::DType::bf16;
    if (decode_kv != "bf16") {
      spec.kv_dtype =
          decode_kv == "f8_e4m3" ? dcp::oracle::DType::f8e4m3 : dcp::oracle::DType::f8e5m2;
      spec.kv_scale = p::KvScale::per_head;
    }
    spec.seed = case_seed;
    return spec;
  };
  if (decode_seq > 0) {
    if (const auto st =
            dcp::oracle::save_case(case_path, p::make_case(decode_spec(decode_seq, 1, seed)));
        !st) {
      std::cerr << "make_result: " << st.message() << "\n";
      return 2;
    }
  }
  if (!batch.empty() && impl != "model") {
    std::cerr << "make_result: --batch needs --impl model\n";
    return 2;
  }
  std::vector<dcp::oracle::Case> requests;
  for (size_t b = 0; b < batch.size(); ++b)
    requests.push_back(
        p::make_case(decode_spec(batch[b], 1 + static_cast<int64_t>(b % 2), seed + b)));
  auto c = batch.empty() ? dcp::oracle::load_case(case_path)
                         : dcp::oracle::Expected<dcp::oracle::Case>(requests.front());
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
    m.merge = merge == "a2a"        ? p::Merge::a2a
              : merge == "pairwise" ? p::Merge::pairwise
                                    : p::Merge::ag_rs;
    m.reverse_merge = order == "rev";
    m.base2 = c->lse_base == dcp::oracle::LseBase::two;
    m.out = formats.at(out_dtype);
    m.bug = bug == "none" ? p::Bug::none : *planted;
    m.seed = seed;
    m.exp_rel_err = exp_rel_err;
    m.log_rel_err = log_rel_err;
    m.rescale_exp_rel_err = rescale_exp_rel_err;
    m.approx_systematic = true;
    m.tf32 = tf32;
    m.ftz = ftz;
    const auto part = dcp::gpu::parse_format(partial_dtype);
    const auto sum = dcp::gpu::parse_format(merge_accum);
    const auto lse_sum = dcp::gpu::parse_format(merge_lse_accum);
    if (!part || !sum || !lse_sum) {
      std::cerr << "make_result: --partial-dtype/--merge-accum/--merge-lse-accum: expected f32, "
                   "f16 or bf16\n";
      return 2;
    }
    m.partial = p::to_oracle_dtype(*part);
    m.merge_accum = p::to_oracle_dtype(*sum);
    m.merge_lse_accum = p::to_oracle_dtype(*lse_sum);
    if (p_cast != "none") m.p_cast = formats.at(p_cast);
    if (kv_dequant != "none") m.dequantize_to = formats.at(kv_dequant);
    auto result_of = [&](const dcp::oracle::Case& one, const p::ModelConfig& config) {
      dcp::oracle::DcpResult out = p::model_result(one, config, partials);
      if (unclaimed) {
        for (dcp::oracle::Arithmetic* a : {&out.output_claim, &out.partial_claim}) {
          a->exp_rel_err.reset();
          a->log_rel_err.reset();
          a->rescale_exp_rel_err.reset();
          a->merge_depth = 0;
          a->tf32 = false;
          a->ftz = false;
          a->kv_dequant.reset();
        }
      }
      return out;
    };
    if (!batch.empty()) {
      // Every request judged by the same claim; the bug only in request --bug-request.
      std::vector<dcp::oracle::StFile> cases, results;
      for (size_t b = 0; b < requests.size(); ++b) {
        p::ModelConfig mb = m;
        if (static_cast<int64_t>(b) != bug_request) mb.bug = p::Bug::none;
        mb.seed = seed + b;
        cases.push_back(dcp::oracle::case_to_file(requests[b]));
        results.push_back(dcp::oracle::result_to_file(result_of(requests[b], mb), requests[b]));
      }
      dcp::oracle::StFile case_file = batch_of(cases, {{"q", 0}, {"k", 0}, {"v", 0}, {"q_pos", 0}});
      const dcp::oracle::StFile* case_out = &case_file;
      std::vector<int64_t> cu_q{0}, cu_k{0};
      for (const auto& one : requests) {
        cu_q.push_back(cu_q.back() + one.tokens());
        cu_k.push_back(cu_k.back() + one.seq());
      }
      const auto rows = [](const std::vector<int64_t>& cu) {
        return dcp::oracle::StTensor{
            dcp::oracle::DType::i64, {static_cast<int64_t>(cu.size())}, {}, cu};
      };
      case_file.tensors["cu_seqlens_q"] = rows(cu_q);
      case_file.tensors["cu_seqlens_k"] = rows(cu_k);
      const dcp::oracle::StFile result_file = batch_of(
          results, {{"o", 0}, {"lse", 0}, {"o_partial", 1}, {"lse_partial", 1}, {"owner", 0}});
      for (const auto& [path, file] :
           {std::pair{case_path, case_out}, std::pair{out_path, &result_file}}) {
        if (const auto st = dcp::oracle::write_safetensors(path, *file); !st) {
          std::cerr << "make_result: " << st.message() << "\n";
          return 2;
        }
      }
      return 0;
    }
    r = result_of(*c, m);
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
