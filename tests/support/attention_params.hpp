// attention_params.hpp — a valid PartialAttentionParams over host memory (one token, one head,
// Dk = Dv = dim, four rows of a one-rank layout), for tests of argument checks that read no
// tensor: change one field, expect the error that names it.
//
//   std::vector<float> buf(16);  std::vector<int64_t> pos{3};
//   PartialAttentionParams p = host_attention_params(buf, pos, 8);  p.rows = 3;
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/kernels/attention_params.hpp"

namespace dcp::test_support {

inline gpu::PartialAttentionParams host_attention_params(std::vector<float>& buf,
                                                         std::vector<int64_t>& pos, int64_t dim) {
  gpu::PartialAttentionParams p;
  p.q = buf.data();
  p.tokens = 1;
  p.heads = 1;
  p.head_dim = dim;
  p.q_heads_total = 1;
  p.kv_heads_total = 1;
  p.q_pos = pos.data();
  p.seq = 4;
  p.kv.k = buf.data();
  p.kv.v = buf.data();
  p.kv.rows = 4;
  p.kv.kv_heads = 1;
  p.kv.head_dim = dim;
  p.kv.v_dim = dim;
  p.kv.v_head_stride = dim;
  p.rows = 4;
  p.v_dim = dim;
  p.o = buf.data();
  p.lse = buf.data();
  return p;
}

}  // namespace dcp::test_support
