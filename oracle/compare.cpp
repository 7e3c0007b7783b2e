#include "oracle/compare.hpp"

#include <cmath>
#include <limits>
#include <sstream>

namespace dcp::oracle {
namespace {

// error / bound for one element, with the hygiene rules for non-finite values.
double judge(double got, double expected, double bound, double* error) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (std::isnan(got)) {
    *error = kInf;
    return kInf;
  }
  if (std::isinf(expected) || std::isinf(got)) {
    const bool same = got == expected;
    *error = same ? 0.0 : kInf;
    return same ? 0.0 : kInf;
  }
  *error = std::fabs(got - expected);
  if (bound > 0.0) return *error / bound;
  return *error == 0.0 ? 0.0 : kInf;
}

void update(Worst& w, double ratio, double got, double expected, double error, double bound,
            std::array<int64_t, 3> index) {
  if (ratio > w.ratio || w.index[0] < 0) {
    w = {index, got, expected, error, bound, ratio};
  }
}

// A NaN without its sign bit (set or not by the instruction that made it), so reports are stable.
double unsigned_nan(double x) { return std::isnan(x) ? std::fabs(x) : x; }

std::string describe(const char* name, const Worst& w, int64_t violations, int64_t elements) {
  std::ostringstream os;
  os.precision(6);
  os << name << ": max err/bound " << w.ratio << " at (t=" << w.index[0] << ", h=" << w.index[1];
  if (w.index[2] >= 0) os << ", i=" << w.index[2];
  os << ") got " << unsigned_nan(w.got) << " expected " << unsigned_nan(w.expected) << " err "
     << unsigned_nan(w.error) << " bound " << w.bound << "; " << violations << "/" << elements
     << " over bound";
  return os.str();
}

}  // namespace

std::string Comparison::summary() const {
  return describe("O", o_worst, o_violations, o_elements) + "\n" +
         describe("LSE", lse_worst, lse_violations, lse_elements);
}

std::string Comparison::statistical_summary() const {
  return describe("O (statistical)", o_worst_stat, o_suspects, o_elements) + "\n" +
         describe("LSE (statistical)", lse_worst_stat, lse_suspects, lse_elements);
}

Expected<Comparison> compare(const Tensor<double>& o_got, const Tensor<double>& lse_got,
                             const Attention& ref, const Bound& bound) {
  if (o_got.shape != ref.o.shape) {
    return DCP_ERROR("tensor 'o': shape ", shape_string(o_got.shape), "; expected ",
                     shape_string(ref.o.shape));
  }
  if (lse_got.shape != ref.lse.shape) {
    return DCP_ERROR("tensor 'lse': shape ", shape_string(lse_got.shape), "; expected ",
                     shape_string(ref.lse.shape));
  }
  const bool tiered = !bound.o_stat.data.empty();
  const Tensor<double>& o_stat = tiered ? bound.o_stat : bound.o;
  const Tensor<double>& lse_stat = tiered ? bound.lse_stat : bound.lse;
  Comparison c;
  const int64_t rows = ref.lse.numel();
  const int64_t dv = rows ? ref.o.numel() / rows : 0;
  const int64_t hq = ref.lse.dim(1);
  c.o_elements = ref.o.numel();
  c.lse_elements = rows;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r / hq, h = r % hq;
    for (int64_t i = 0; i < dv; ++i) {
      const int64_t x = r * dv + i;
      double err;
      const double ratio = judge(o_got.data[x], ref.o.data[x], bound.o.data[x], &err);
      if (!(ratio <= 1.0)) ++c.o_violations;
      update(c.o_worst, ratio, o_got.data[x], ref.o.data[x], err, bound.o.data[x], {t, h, i});
      const double stat = judge(o_got.data[x], ref.o.data[x], o_stat.data[x], &err);
      if (!(stat <= 1.0)) ++c.o_suspects;
      update(c.o_worst_stat, stat, o_got.data[x], ref.o.data[x], err, o_stat.data[x], {t, h, i});
    }
    double err;
    const double ratio = judge(lse_got.data[r], ref.lse.data[r], bound.lse.data[r], &err);
    if (!(ratio <= 1.0)) ++c.lse_violations;
    update(c.lse_worst, ratio, lse_got.data[r], ref.lse.data[r], err, bound.lse.data[r],
           {t, h, -1});
    const double stat = judge(lse_got.data[r], ref.lse.data[r], lse_stat.data[r], &err);
    if (!(stat <= 1.0)) ++c.lse_suspects;
    update(c.lse_worst_stat, stat, lse_got.data[r], ref.lse.data[r], err, lse_stat.data[r],
           {t, h, -1});
  }
  return c;
}

}  // namespace dcp::oracle
