// presets.hpp — real models' attention shapes and DCP layouts, shared by `run` and `model`.
//
//   const ModelPreset* p = find_preset("k3-mla");   // nullptr when unknown
//   p->shape.heads == 96;  p->replicate_q == true;
#pragma once

#include <cstdint>
#include <string_view>

namespace dcp::harness {

// A model's attention shape and parallel layout.
struct ModelShape {
  int64_t heads = 1;     // Hq
  int64_t kv_heads = 1;  // Hkv
  int64_t head_dim = 1;  // Dk (for MLA the latent plus its rope part: 512 + 64)
  int64_t v_dim = 1;     // Dv
  bool latent = false;   // shared latent (MLA): V is the first Dv components of K
  int64_t tp = 1;        // attention TP size
  int64_t dcp = 1;       // N
};

struct ModelPreset {
  const char* name;
  ModelShape shape;
  const char* comm_backend;        // the combine `run` uses: a2a or ag_rs
  bool replicate_q;                // `run` projects q on every rank instead of gathering it
  const char* kv_dtype = nullptr;  // the caches' format (`--kv-dtype`); nullptr: `--dtype`'s
};

inline constexpr ModelPreset kPresets[] = {
    // Kimi-K3 MLA: 96 heads over one 576-d latent (512 + 64 rope), V 512; TP8 x DCP8, a2a with
    // the q projection replicated (docs/layout-and-flow.md).
    {"k3-mla", {96, 1, 576, 512, true, 8, 8}, "a2a", true},
    // The same with the latent cache in fp8 E4M3 and one scale for it, as engines quantize an
    // MLA cache (the scale folded into the logit scale and the output).
    {"k3-mla-fp8", {96, 1, 576, 512, true, 8, 8}, "a2a", true, "fp8e4m3"},
    // DeepSeek-V3 MLA: 128 heads over the same latent; a2a with the q gather.
    {"deepseek-v3", {128, 1, 576, 512, true, 8, 8}, "a2a", false},
    // Llama-3-70B GQA: 64 query heads, 8 KV heads, head dim 128; ag_rs with the q gather.
    {"llama3-70b", {64, 8, 128, 128, false, 8, 8}, "ag_rs", false},
};

inline const ModelPreset* find_preset(std::string_view name) {
  for (const ModelPreset& p : kPresets)
    if (name == p.name) return &p;
  return nullptr;
}

// For messages: the names, listed.
inline constexpr const char* kPresetNames = "k3-mla, k3-mla-fp8, deepseek-v3 or llama3-70b";

}  // namespace dcp::harness
