#include "oracle/check.hpp"

#include <algorithm>

#include "oracle/shard.hpp"
#include "oracle/tolerance.hpp"

namespace dcp::oracle {
namespace {

// One rank's slice [T, Hq, ...] of a stacked [N, T, Hq, ...] tensor.
Tensor<double> rank_slice(const Tensor<double>& stacked, int64_t rank) {
  Shape shape(stacked.shape.begin() + 1, stacked.shape.end());
  Tensor<double> out(shape);
  const auto n = static_cast<int64_t>(out.data.size());
  std::copy_n(stacked.data.begin() + rank * n, n, out.data.begin());
  return out;
}

Expected<PartCheck> judge(const Case& c, const Tensor<double>& o, const Tensor<double>& lse,
                          const Arithmetic& a, Tier tier, std::optional<int64_t> rank,
                          const Watch& watch) {
  auto ref = reference(c, tier, watch);
  if (!ref) return ref.status();
  auto bound = derive_bound(c, *ref, a, watch);
  if (!bound) return bound.status();
  auto cmp = compare(o, lse, *ref, *bound);
  if (!cmp) return cmp.status();
  PartCheck part{rank, *cmp, bound->kappa, {}};
  // The worst elements' terms, one row each (an index of -1: the tensor has no elements).
  if (const auto& w = cmp->o_worst.index; w[0] >= 0) {
    auto terms = bound_terms(c, *ref, a, w[0], w[1], w[2]);
    if (!terms) return terms.status();
    part.worst_terms.o = std::move(terms->o);
  }
  if (const auto& w = cmp->lse_worst.index; w[0] >= 0) {
    auto terms = bound_terms(c, *ref, a, w[0], w[1], 0);
    if (!terms) return terms.status();
    part.worst_terms.lse = std::move(terms->lse);
  }
  return part;
}

}  // namespace

bool ResultCheck::pass() const {
  return std::all_of(parts.begin(), parts.end(), [](const PartCheck& p) { return p.cmp.pass(); });
}

bool ResultCheck::pass_statistical() const {
  return std::all_of(parts.begin(), parts.end(),
                     [](const PartCheck& p) { return p.cmp.pass_statistical(); });
}

double ResultCheck::max_ratio() const {
  double m = 0.0;
  for (const PartCheck& p : parts) m = std::max(m, p.cmp.max_ratio());
  return m;
}

double ResultCheck::max_stat_ratio() const {
  double m = 0.0;
  for (const PartCheck& p : parts) m = std::max(m, p.cmp.max_stat_ratio());
  return m;
}

size_t ResultCheck::worst_part() const {
  size_t w = 0;
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i].cmp.max_ratio() > parts[w].cmp.max_ratio()) w = i;
  return w;
}

std::vector<int64_t> ResultCheck::failing_ranks() const {
  std::vector<int64_t> out;
  for (const PartCheck& p : parts)
    if (p.rank && !p.cmp.pass()) out.push_back(*p.rank);
  return out;
}

Expected<PartCheck> check_part(const Case& c, const DcpResult& r, std::optional<int64_t> which,
                               Tier tier, const Watch& watch) {
  const int64_t T = c.tokens(), Hq = c.q_heads(), dv = c.v_dim;
  if (!which) return judge(c, r.o, r.lse, r.output_claim, tier, std::nullopt, watch);
  const int64_t rank = *which;
  if (!r.o_partial || !r.lse_partial || rank < 0 || rank >= r.dcp_size)
    return DCP_ERROR("rank ", rank, ": the result holds no partial for it");
  if (r.o_partial->shape != Shape{r.dcp_size, T, Hq, dv})
    return DCP_ERROR("tensor 'o_partial': shape ", shape_string(r.o_partial->shape),
                     "; expected [N, T, Hq, Dv] = ", shape_string({r.dcp_size, T, Hq, dv}));
  if (r.lse_partial->shape != Shape{r.dcp_size, T, Hq})
    return DCP_ERROR("tensor 'lse_partial': shape ", shape_string(r.lse_partial->shape),
                     "; expected [N, T, Hq] = ", shape_string({r.dcp_size, T, Hq}));
  const Case shard = shard_case(c, Ownership{r.dcp_size, r.interleave, r.owner}, rank, r.sink_rank);
  auto part = judge(shard, rank_slice(*r.o_partial, rank), rank_slice(*r.lse_partial, rank),
                    r.partial_claim, tier, rank, watch);
  if (!part) return DCP_ERROR("rank ", rank, ": ", part.status().message());
  return part;
}

int64_t part_count(const DcpResult& r) {
  return 1 + (r.o_partial && r.lse_partial ? r.dcp_size : 0);
}

Expected<ResultCheck> check_result(const Case& c, const DcpResult& r, Tier tier) {
  DCP_TRY(validate(c));
  ResultCheck out;
  for (int64_t part = 0; part < part_count(r); ++part) {
    // Part 0 is the merged output, part k >= 1 the partial of rank k - 1.
    auto p = check_part(c, r, part == 0 ? std::nullopt : std::optional<int64_t>(part - 1), tier);
    if (!p) return p.status();
    out.parts.push_back(*p);
  }
  return out;
}

}  // namespace dcp::oracle
