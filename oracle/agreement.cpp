#include "oracle/agreement.hpp"

#include <algorithm>

namespace dcp::oracle {

std::vector<std::pair<double, double>> agreement_scales(const Case& c) {
  const int64_t T = c.tokens(), Hq = c.q_heads(), dk = c.head_dim(), dv = c.v_dim;
  const double tau = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<std::pair<double, double>> scales(T * Hq);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int64_t> keys = visible_keys(c, t);
    const int64_t qpos = c.query_pos(t);
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = c.kv_head_of(h);
      double smax = c.has_sink() ? std::fabs(c.sink[h]) : 0.0;
      double vmax = 0.0;
      for (int64_t j : keys) {
        double dot = 0.0;
        for (int64_t d = 0; d < dk; ++d) dot += c.q.at({t, h, d}) * c.k.at({j, g, d});
        // The scaled product and the variant's logit (which its transform may move).
        smax = std::max(
            {smax, std::fabs(tau * dot), std::fabs(variant_logit(c, tau * dot, h, qpos, j))});
        for (int64_t i = 0; i < dv; ++i) vmax = std::max(vmax, std::fabs(c.v_at(j, g, i)));
      }
      const double s_scale = std::max(1.0, smax);
      // A row whose values are all zero still has a meaningful LSE; give O the smallest scale.
      scales[t * Hq + h] = {std::max(vmax, std::ldexp(1.0, -1000)) * s_scale, s_scale};
    }
  }
  return scales;
}

}  // namespace dcp::oracle
