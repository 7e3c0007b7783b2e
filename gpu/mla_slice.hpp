// mla_slice.hpp — the attention slice of an absorbed MLA layer on the DCP path (the K3 example
// of docs/layout-and-flow.md), with its weights, so that gather and replicate-q differ in what
// each rank computes and not only in a flag.
//
// Per TP rank, with Hl = Hq / tp local heads and Hg = N Hl heads in its DCP group:
//   q_b_proj    q[h] = w_qb[h] c_q                     [T, Dc] -> [T, heads, Dn + Dr]
//               gather: the rank's Hl heads (its TP shard); replicate-q: all Hg group heads
//               (its full copy of the group's weights)
//   Q absorb    q_lat[h] = q_nope[h] w_kc[h]            [T, heads, Dn] -> [T, heads, Dl]
//   RoPE        q_pe rotated at the query's *global* position (optional: K3 skips it)
//   q gather    AllGather [T, Hl, Dl + Dr] -> [T, Hg, Dl + Dr] (gather path only)
//   attention   over the shared latent cache [c_kv, rope(k_pe)] (Dk = Dl + Dr, V = c_kv, Dv = Dl)
//   combine     ag_rs or a2a -> O_lat [T, Hl, Dl], LSE [T, Hl]
//   V absorb    out[h] = O_lat[h] w_vc[h]               [T, Hl, Dl] -> [T, Hl, Dvh]
// KV writes rotate k_pe at the token's global position in fp32 and store the latent row in the
// cache's format on its owner rank only. Arithmetic is fp32 throughout.
//
//   Result<MlaRun> run = run_mla_threads(inputs, cfg);   // out [T, Hq, Dvh], lse [T, Hq]
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/dcp_step.hpp"

namespace dcp::gpu {

struct MlaDims {
  int64_t tokens = 1;   // T
  int64_t heads = 1;    // Hq
  int64_t q_lora = 1;   // Dc, width of the q_b_proj input
  int64_t nope = 1;     // Dn, per-head no-position query/key dims
  int64_t rope = 2;     // Dr, rotary dims (even), shared by all heads
  int64_t kv_lora = 1;  // Dl, latent width
  int64_t v_head = 1;   // Dvh, per-head value dims after the V absorb
};

struct MlaInputs {
  MlaDims dims;
  std::vector<float> w_qb;  // [Hq, Dn + Dr, Dc]
  std::vector<float> w_kc;  // [Hq, Dn, Dl]
  std::vector<float> w_vc;  // [Hq, Dl, Dvh]
  std::vector<float> c_q;   // [T, Dc]
  std::vector<float> c_kv;  // [S, Dl] the latent of every context token
  std::vector<float> k_pe;  // [S, Dr] its rope part, before rotation
  StorageFormat kv_dtype = StorageFormat::bf16;
  std::vector<int64_t> q_pos;  // [T] global positions
  int64_t seq = 0;
  bool causal = true;
  bool apply_rope = false;      // DeepSeek: true; K3: false
  float rope_theta = 10000.0f;  // inverse frequency of pair i: theta^(-2 i / Dr)
  float scale = 1.0f;           // softmax scale, conventionally 1 / sqrt(Dn + Dr)
  std::vector<int64_t> chunks;  // KV write lengths (sum S); empty: one chunk
};

struct MlaRun {
  std::vector<float> out;  // [T, Hq, Dvh] after the V absorb, by global head
  std::vector<float> lse;  // [T, Hq] base cfg.base
  // What the attention kernels read, for judging each stage: every head's absorbed query
  // [T, Hq, Dl + Dr] (from the rank that computed it) and the cached latent rows [S, Dl + Dr]
  // (from their owner ranks), in fp32.
  std::vector<float> q_att;
  std::vector<float> k_att;
};

// Rotates pairs (i, i + Dr/2) of x [Dr] by pos * theta^(-2 i / Dr) in fp32 (NeoX layout).
void rope_rotate(float* x, int64_t dr, int64_t pos, float theta);

// Checks the inputs (one-line errors naming the tensor or flag) and runs every TP rank.
Result<MlaRun> run_mla_threads(const MlaInputs& in, const DcpConfig& cfg);

}  // namespace dcp::gpu
