// check.hpp — judges an external implementation's DCP result against the oracle.
//
// The output is compared with the case's full attention, and, when the result carries partials,
// every rank's (O_r, L_r) with the oracle's attention of that rank's shard (shard.hpp), each
// within the bound derive_bound gives for the arithmetic the result claims (tensor dtypes and
// metadata, case_file.hpp). A wrong merge shows on the output; a wrong rank shows on its partial.
//
//   Expected<ResultCheck> chk = check_result(c, r);
//   if (chk && !chk->pass()) std::cout << chk->parts[chk->worst_part()].cmp.summary();
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "oracle/attention.hpp"
#include "oracle/case.hpp"
#include "oracle/case_file.hpp"
#include "oracle/compare.hpp"
#include "oracle/status.hpp"
#include "oracle/tolerance.hpp"

namespace dcp::oracle {

struct PartCheck {
  std::optional<int64_t> rank;  // the DCP rank of the partial; nullopt: the merged output
  Comparison cmp;
  double kappa = 0.0;  // the case's (or shard's) first-order relative coefficient
  // What each step of the derivation adds to the sound bound of the worst O element
  // (cmp.o_worst.index) and of the worst LSE row (cmp.lse_worst.index): tolerance.hpp.
  BoundTerms worst_terms;
};

struct ResultCheck {
  std::vector<PartCheck> parts;   // the output first, then ranks 0 .. N-1 when partials were given
  bool pass() const;              // no part over its sound bound
  bool pass_statistical() const;  // no part over its statistical bound (else SUSPECT or FAILED)
  double max_ratio() const;
  double max_stat_ratio() const;
  size_t worst_part() const;  // index of the part with the largest error / bound
  std::vector<int64_t> failing_ranks() const;
};

// One part: the merged output (rank nullopt) against the full attention, or rank r's partial
// against the oracle on r's shard. The case must be valid.
// `watch` (attention.hpp) stops the part's oracle early when asked: an "interrupted" error.
Expected<PartCheck> check_part(const Case& c, const DcpResult& r, std::optional<int64_t> rank,
                               Tier tier = Tier::fast, const Watch& watch = {});
// The parts a result has: the output, and one per rank when partials are given.
int64_t part_count(const DcpResult& r);

// All parts in order. Fails (bad input, not a violation) when the oracle cannot compute the case or
// cannot derive a meaningful bound for the claimed arithmetic (kappa > 0.1, tolerance.hpp).
Expected<ResultCheck> check_result(const Case& c, const DcpResult& r, Tier tier = Tier::fast);

}  // namespace dcp::oracle
