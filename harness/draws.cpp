#include "harness/draws.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "gpu/kernels/storage_format.hpp"
#include "oracle/case_file.hpp"
#include "oracle/safetensors.hpp"
#include "properties/case_gen.hpp"
#include "properties/footprint.hpp"
#include "properties/rc_gen.hpp"
#include "properties/suite.hpp"

namespace dcp::harness {
namespace {

// RapidCheck's largest size: the cases grow from size 0 to it as in a property run.
constexpr int kRcMaxSize = 100;

oracle::Status in_range(const char* flag, int64_t x, int64_t most) {
  if (x < 1 || x > most) return DCP_ERROR(flag, ": ", x, " is not in [1, ", most, "]");
  return {};
}

}  // namespace

oracle::Expected<Draws> read_draws(const DrawRanges& r) {
  Draws d;
  props::DcpLimits& lim = d.limits;
  const props::DcpLimits all;
  std::ostringstream flags;
  for (const auto& [flag, given, into, def, most] :
       {std::tuple{"--max-dcp", r.max_dcp, &lim.max_dcp, all.max_dcp, props::kMaxDrawnDcp},
        std::tuple{"--max-groups", r.max_groups, &lim.max_groups, all.max_groups,
                   props::kMaxDrawnGroups},
        std::tuple{"--max-seq", r.max_seq, &lim.max_seq, all.max_seq, props::kMaxDrawnSeq},
        std::tuple{"--max-head-dim", r.max_head_dim, &lim.max_head_dim, all.max_head_dim,
                   props::kMaxDrawnHeadDim},
        std::tuple{"--max-v-dim", r.max_v_dim, &lim.max_v_dim, all.max_v_dim,
                   props::kMaxDrawnHeadDim}}) {
    if (!given) continue;
    DCP_TRY(in_range(flag, *given, most));
    *into = *given;
    if (*given != def) flags << " " << flag << " " << *given;
  }
  // The values listed for N, Dk and Dv (each once, in the order given): the only ones drawn. The
  // largest becomes the maximum, which a maximum given beside the list must not be below.
  for (const auto& [flag, max_flag, given, list, into, most, bound] :
       {std::tuple{"--dcp-sizes", "--max-dcp", r.max_dcp, &r.dcp_sizes, &lim.dcp_sizes,
                   &lim.max_dcp, props::kMaxDrawnDcp},
        std::tuple{"--head-dims", "--max-head-dim", r.max_head_dim, &r.head_dims, &lim.head_dims,
                   &lim.max_head_dim, props::kMaxDrawnHeadDim},
        std::tuple{"--v-dims", "--max-v-dim", r.max_v_dim, &r.v_dims, &lim.v_dims, &lim.max_v_dim,
                   props::kMaxDrawnHeadDim}}) {
    if (list->empty()) continue;
    into->clear();
    std::string text;
    for (const int64_t x : *list) {
      DCP_TRY(in_range(flag, x, bound));
      if (std::find(into->begin(), into->end(), x) != into->end()) continue;
      into->push_back(x);
      text += (text.empty() ? "" : ",") + std::to_string(x);
    }
    const int64_t top = *std::max_element(into->begin(), into->end());
    if (given && *most < top) return DCP_ERROR(flag, ": ", top, " is over ", max_flag, " ", *most);
    *most = top;
    flags << " " << flag << " " << text;
  }
  std::string names;
  for (const std::string& w : r.without) {
    const props::FeatureInfo* f = props::find_feature(w);
    if (f == nullptr)
      return DCP_ERROR("--without: unknown feature '", w, "'; expected ", props::feature_names());
    lim.lack(f->feature);
    names += (names.empty() ? "" : ",") + w;
  }
  if (!names.empty()) flags << " --without " << names;
  // A list's names, parsed by the project's own readers, into `into` (replaced, each once).
  const auto read_list = [&](const char* flag, const std::vector<std::string>& given, auto& into,
                             auto parse, const std::string& expected) -> oracle::Status {
    if (given.empty()) return {};
    into.clear();
    std::string list;
    for (const std::string& g : given) {
      const auto x = parse(g);
      if (!x) return DCP_ERROR(flag, ": unknown value '", g, "'; expected ", expected);
      if (std::find(into.begin(), into.end(), *x) == into.end()) into.push_back(*x);
      list += (list.empty() ? "" : ",") + g;
    }
    flags << " " << flag << " " << list;
    return {};
  };
  const auto format = [](const std::string& g) -> std::optional<oracle::DType> {
    const auto f = gpu::parse_format(g);
    if (!f) return std::nullopt;
    return props::to_oracle_dtype(*f);
  };
  const auto kv_format = [](const std::string& g) -> std::optional<oracle::DType> {
    const auto f = gpu::parse_kv_format(g);
    if (!f) return std::nullopt;
    return props::to_oracle_dtype(*f);
  };
  DCP_TRY(read_list("--q-dtypes", r.q_dtypes, lim.q_dtypes, format, "f32, bf16 or f16"));
  DCP_TRY(read_list("--kv-dtypes", r.kv_dtypes, lim.kv_dtypes, kv_format, gpu::format_names(true)));
  DCP_TRY(read_list(
      "--lse-bases", r.lse_bases, lim.lse_bases,
      [](const std::string& g) { return oracle::parse_lse_base(g); }, oracle::lse_base_names()));
  d.flags = flags.str();
  return d;
}

std::optional<std::string> draws_over_limits(const Draws& d, double cases,
                                             const std::string& count_flag, const Limits& lim) {
  props::Footprint one = props::suite_case_footprint(d.limits).most;
  const double work = one.work * cases;
  one.work = 0.0;
  if (const auto why = over_limits(one, lim))
    return (d.flags.empty() ? std::string("the default ranges") : d.flags.substr(1)) +
           ": the largest case they draw " + *why;
  one.work = work;
  if (const auto why = over_limits(one, lim)) return count_flag + ": " + *why;
  return std::nullopt;
}

oracle::Status write_cases(const Draws& d, const CasesParams& p, const Limits& lim) {
  if (p.count < 1 || p.count > kMaxWrittenCases)
    return DCP_ERROR("--count: ", p.count, " is not in [1, ", kMaxWrittenCases, "]");
  std::error_code ec;
  if (!std::filesystem::is_directory(p.folder, ec))
    return DCP_ERROR("--out ", p.folder, ": not an existing folder");
  if (const auto why = draws_over_limits(d, static_cast<double>(p.count),
                                         "--count " + std::to_string(p.count), lim))
    return DCP_ERROR(*why);
  // The dcp-path property's cases, or dcp-fp8's when the K/V formats are only quantized ones.
  const props::CacheKind kind = props::cache_formats(d.limits, props::CacheKind::values).empty()
                                    ? props::CacheKind::fp8
                                    : props::CacheKind::values;
  const rc::Gen<props::DcpSetup> gen = props::gen_dcp_setup(d.limits, kind);
  const auto file = [&](int64_t i) {
    char name[48];
    std::snprintf(name, sizeof name, "case-%04lld.safetensors", static_cast<long long>(i));
    return (std::filesystem::path(p.folder) / name).string();
  };
  for (int64_t i = 0; i < p.count; ++i)  // never over a file already there
    if (std::filesystem::exists(file(i), ec))
      return DCP_ERROR("--out ", p.folder, ": ", file(i), " exists; give an empty folder");
  rc::Random random(p.seed);
  for (int64_t i = 0; i < p.count; ++i) {
    const int size = static_cast<int>(p.count > 1 ? i * kRcMaxSize / (p.count - 1) : 0);
    const props::DcpSetup setup = gen(random.split(), size).value();
    oracle::StFile f = oracle::case_to_file(props::make_case(setup.spec));
    f.metadata["x_setup"] = props::to_json(setup).dump();
    DCP_TRY(oracle::write_safetensors(file(i), f));
  }
  return {};
}

}  // namespace dcp::harness
