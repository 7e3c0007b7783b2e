// catalogue.hpp — the mutation catalogue: plausible DCP bugs, each with one name, planted
// where the project can prove its checks catch them (docs/mutants.md):
//   step    in the production DCP step, at the device seam (mutant_device.hpp: the host device
//           with one kernel or its arguments changed); `dcp-verify mutants` runs the property
//           suite against each and must kill every one;
//   model   in the fp32 model of correct kernels (properties/fp32_model.hpp), whose outputs the
//           oracle's bounds must reject (the tolerance and check properties).
// Nothing under gpu/ knows this list: the production path carries no planted code in any build.
//
//   std::optional<Mutant> m = parse_mutant("merge_unweighted_mean");
//   for (const MutantInfo& x : kMutantCatalogue) if (x.where & kInStep) ...
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

namespace dcp::mutants {

enum class Mutant : uint8_t {
  none,
  merge_unweighted_mean,
  merge_base_mismatch,
  lse_out_wrong_base,
  exp2_without_log2e,
  merge_no_max_shift,
  merge_shift_by_first,
  zero_initial_max,
  partial_lse_scaled_max,
  empty_lse_zero,
  empty_nan_leak,
  empty_lse_pos_inf,
  empty_split_clobbers,
  count_off_by_one,
  chunk_share_uniform,
  chunk_share_no_phase,
  position_no_interleave,
  split_boundary_duplicate,
  block_table_ignored,
  kv_write_global_row,
  owner_from_local_row,
  causal_on_local_rows,
  window_on_local_rows,
  alibi_on_local_rows,
  window_off_by_one,
  softcap_after_mask,
  causal_local_minus_k,
  count_without_rank,
  finite_mask_sentinel,
  sink_on_every_rank,
  sink_missing,
  sink_per_split,
  sink_without_log2e,
  sink_softcapped,
  sink_skipped_when_empty,
  sink_no_max_shift,
  topk_as_local_rows,
  topk_pad_last_rank,
  a2a_slices_permuted,
  rs_lse_wrong_slice,
  gqa_head_mod,
  gqa_local_ratio,
  lse_layout_transposed,
  q_gated_by_owner,
  bf16_accumulation,
  scale_twice,
  scale_missing,
  a2a_lse_bf16,
  rs_bf16_claimed_f32,
  k_scale_missing,
  k_scale_twice,
  v_scale_missing,
  v_scale_twice,
  kv_scale_head0,
  kv_scales_swapped,
  token_scale_global_row,
  page_scale_logical_page,
  global_lengths,
  prefix_pages_without_n,
  shared_pages_freed,
  partial_page_shared,
  block_table_by_position,
  drop_token,
  duplicate_token,
  lost_token,
  count,  // (the number of entries, none included)
};

// Where a mutant is planted (a mask).
inline constexpr unsigned kInStep = 1, kInModel = 2;

// One catalogue entry: what `dcp-verify mutants --list` prints and docs/mutants.md's table is
// generated from (`--list --markdown`).
struct MutantInfo {
  Mutant id;
  std::string_view name;     // as --only and --bug take it
  std::string_view family;   // the bug class (docs/mutants.md section 4)
  unsigned where;            // kInStep, kInModel or both
  std::string_view bug;      // the wrong code, in one line
  std::string_view needs;    // what a case must have to show it
  std::string_view reports;  // public reports of the class (repository #number), or "none found"
};

inline constexpr MutantInfo kMutantCatalogue[] = {
    {Mutant::merge_unweighted_mean, "merge_unweighted_mean", "merge", kInStep | kInModel,
     "O = mean of the O_r, no LSE weights", "two nonempty partials with unequal LSEs",
     "none found (SGLang's combine test has only an equal-LSE case, where this is right)"},
    {Mutant::merge_base_mismatch, "merge_base_mismatch", "merge", kInStep | kInModel,
     "weights with exp for a base-2 LSE (exp2 for base e)",
     "N >= 2 or split-KV, partials with unequal LSEs",
     "vLLM #28840, #43919, #47079; FlashInfer #2113, #4547; SGLang #33064, #35045, #40903, #34240; "
     "attention-gym #205"},
    {Mutant::lse_out_wrong_base, "lse_out_wrong_base", "merge", kInStep | kInModel,
     "the final LSE converted to the other base", "any nonempty row (the LSE is checked)",
     "FlashInfer #4485; tokenspeed #571; FlashMLA #106"},
    {Mutant::exp2_without_log2e, "exp2_without_log2e", "merge", kInStep,
     "base-2 kernel: exp2(s - m) on natural-unit logits",
     "LSE base 2 and two keys with different logits",
     "none direct; CK #12229 (the sink analogue under FAST_EXP2)"},
    {Mutant::merge_no_max_shift, "merge_no_max_shift", "merge", kInStep,
     "weights base^L_r, not base^(L_r - max)",
     "an LSE beyond the format's exponent range (logits near +-100)",
     "NATTEN #202; FlashInfer #5119 (the sink fold)"},
    {Mutant::merge_shift_by_first, "merge_shift_by_first", "merge", kInStep,
     "shifted by the first partial's LSE, even when it is empty",
     "an empty partial merged first (S < N, or an empty split)",
     "vLLM #39148, #28181, #27491; FlashInfer #4051, #4054, #5262; TRT-LLM #16940; aiter #4420"},
    {Mutant::zero_initial_max, "zero_initial_max", "merge", kInStep,
     "online softmax starts its running max at 0, not -inf", "every logit of a tile far below 0",
     "analogue: FlashInfer #4401, #4267, #4450 (a finite -5e4 initial max); lattice #361"},
    {Mutant::partial_lse_scaled_max, "partial_lse_scaled_max", "merge", kInStep,
     "a partial reports tau m + log z: its max scaled twice",
     "a softmax scale tau != 1 and a nonzero max", "flash-sparse-attention #106; FA #404"},
    {Mutant::empty_lse_zero, "empty_lse_zero", "empty shard", kInStep,
     "an empty shard reports LSE 0", "a rank or split with no visible key (S < N, masks, top-k)",
     "vLLM #38416; FA #2573; aiter #3641"},
    {Mutant::empty_nan_leak, "empty_nan_leak", "empty shard", kInStep,
     "an empty shard's 0/0 output, merged with weight 0", "a rank or split with no visible key",
     "vLLM #47541, #47181; ATOM #1832; FlashInfer #4975, #3779; SGLang #22688, #33881; vllm-ascend "
     "#14782"},
    {Mutant::empty_lse_pos_inf, "empty_lse_pos_inf", "empty shard", kInStep,
     "an empty shard reports LSE +inf (another convention)", "a rank or split with no visible key",
     "FA #978; FlashMLA #77; FlashInfer #3943 (review)"},
    {Mutant::empty_split_clobbers, "empty_split_clobbers", "empty shard", kInStep,
     "an empty split stores its -inf LSE over the rank's merged one",
     "split-KV with more pieces than a rank has keys",
     "sgl-kernel-xpu #487; FA #2573 (an empty row's LSE written at another's offset)"},
    {Mutant::count_off_by_one, "count_off_by_one", "layout", kInStep,
     "count(r, x) counts [0, x] instead of [0, x)",
     "a key range ending where the rank owns the next position",
     "vLLM #24864 (the review's formula)"},
    {Mutant::chunk_share_uniform, "chunk_share_uniform", "layout", kInStep,
     "a chunk's rows on a rank taken as len / N, round-robin",
     "N >= 2, a KV write chunk not a multiple of I N", "vLLM #28514, #28526 (local_chunk_len)"},
    {Mutant::chunk_share_no_phase, "chunk_share_no_phase", "layout", kInStep,
     "a chunk's rows on a rank computed as if it started at 0",
     "N >= 2, a chunk starting off a multiple of I N",
     "vLLM #28514, #28526; SGLang's phase-free stride test"},
    {Mutant::position_no_interleave, "position_no_interleave", "layout", kInStep,
     "position(r, row) = row N + r, ignoring I", "N >= 2 and I >= 2",
     "vLLM #46514, #54541 (the interleave never plumbed)"},
    {Mutant::split_boundary_duplicate, "split_boundary_duplicate", "layout", kInStep,
     "split-KV pieces overlap by one key: a token counted twice",
     "split-KV of 2 or more pieces over 2 or more keys",
     "none; CK #12229 (the sink counted twice across splits)"},
    {Mutant::block_table_ignored, "block_table_ignored", "layout", kInStep,
     "a paged cache read as if its rows were in order: pool row = row",
     "a paged cache whose pages are not in order",
     "vLLM #47779 (review: the block stride of interleaved rows)"},
    {Mutant::kv_write_global_row, "kv_write_global_row", "layout", kInStep,
     "the KV write stores a token at its global position, not its local row", "N >= 2",
     "SGLang #36886, #36989; vllm-ascend #14536; local-inference-lab/vllm #4"},
    {Mutant::owner_from_local_row, "owner_from_local_row", "layout", kInStep,
     "the KV write finds a token's owner from its already local row", "N >= 2",
     "bytedance-iaas/sglang #747"},
    {Mutant::causal_on_local_rows, "causal_on_local_rows", "mask", kInStep,
     "causal mask compares the local row with q_pos", "N >= 2 and a query before the last position",
     "tokenspeed #364; vLLM #47181, #47542, #28990 (review); vllm-project/flash-attention #93; "
     "vLLM RFC #50391"},
    {Mutant::window_on_local_rows, "window_on_local_rows", "mask", kInStep,
     "sliding-window bound compares the local row with q_pos - W",
     "N >= 2 and a window shorter than the context",
     "accelerate #4177 (the window dropped under CP)"},
    {Mutant::alibi_on_local_rows, "alibi_on_local_rows", "mask", kInStep,
     "ALiBi's distance to the query takes the key's local row for its position", "ALiBi and N >= 2",
     "TransformerEngine #1046 (ALiBi refused under CP: chunks' offsets)"},
    {Mutant::window_off_by_one, "window_off_by_one", "mask", kInStep, "window keeps W + 1 keys",
     "a window shorter than the context", "AMDMIGraphX #5260 (not DCP)"},
    {Mutant::softcap_after_mask, "softcap_after_mask", "mask", kInStep,
     "softcap applied after -inf masking: masked keys get -c", "a softcap and a masked key",
     "sgl-kernel-xpu #491; FlashInfer #350; FA #1025"},
    {Mutant::causal_local_minus_k, "causal_local_minus_k", "mask", kInStep,
     "multi-token decode: query G - k keeps local(G) - k rows, not local(G - k)",
     "N >= 2, causal, two or more query tokens",
     "vLLM #47181, #47542; vLLM RFC #50391; ATOM #1746"},
    {Mutant::count_without_rank, "count_without_rank", "mask", kInStep,
     "the local key bound counted as rank 0's (no rank offset)",
     "N >= 2 and a causal or window bound inside the context", "tokenspeed #364 (review)"},
    {Mutant::finite_mask_sentinel, "finite_mask_sentinel", "mask", kInStep,
     "masked keys get a finite logit of -1e4, not -inf",
     "a rank or row whose keys are all masked, or logits below -1e4",
     "FlashInfer #4267, #4401 (its -5e4)"},
    {Mutant::sink_on_every_rank, "sink_on_every_rank", "sink/top-k", kInStep | kInModel,
     "every rank adds the sink", "N >= 2 and a sink",
     "lmdeploy #3951 (review); CK #12229 (per split)"},
    {Mutant::sink_missing, "sink_missing", "sink/top-k", kInStep | kInModel,
     "no rank adds the sink", "a sink", "prime-rl #3397 (training CP); vLLM #49815; CK #12229"},
    {Mutant::sink_per_split, "sink_per_split", "sink/top-k", kInStep,
     "every split-KV piece of the sink's rank adds the sink",
     "a sink and split-KV of 2 or more pieces", "CK #12229"},
    {Mutant::sink_without_log2e, "sink_without_log2e", "sink/top-k", kInStep,
     "base-2 kernel: the sink, a natural-unit logit, used as base-2 units", "a sink and LSE base 2",
     "CK #12229 (FAST_EXP2)"},
    {Mutant::sink_softcapped, "sink_softcapped", "sink/top-k", kInStep,
     "the softcap applied to the sink as to a logit", "a sink and a softcap", "CK #12229"},
    {Mutant::sink_skipped_when_empty, "sink_skipped_when_empty", "sink/top-k", kInStep,
     "the sink's rank drops the sink when its key range (split 0) is empty",
     "a sink on a rank, or split, with no visible key", "CK #12229"},
    {Mutant::sink_no_max_shift, "sink_no_max_shift", "sink/top-k", kInStep,
     "the sink added as base^(sink - m) without raising the running max",
     "a sink far above the logits (base^(sink - m) overflows)", "FlashInfer #5119"},
    {Mutant::topk_as_local_rows, "topk_as_local_rows", "sink/top-k", kInStep,
     "top-k positions read as this rank's local rows", "N >= 2 and a top-k list",
     "vLLM #46514, #54541; SGLang #39330, #31821"},
    {Mutant::topk_pad_last_rank, "topk_pad_last_rank", "sink/top-k", kInStep,
     "-1 padding owned by the last rank (its last row)", "a top-k list with -1 padding",
     "SGLang remap_dcp_local_topk_indices (a guard, no report)"},
    {Mutant::a2a_slices_permuted, "a2a_slices_permuted", "heads/comm", kInStep,
     "a2a sends destination d the heads of d + 1", "N >= 2 and the a2a combine",
     "TRT-LLM #10350 (rank order); vLLM #54494 (a guard)"},
    {Mutant::rs_lse_wrong_slice, "rs_lse_wrong_slice", "heads/comm", kInStep,
     "ag_rs: the LSE of the next rank's head slice", "N >= 2 and the ag_rs combine",
     "vLLM #46145, #46514 (LSE slices with padded heads)"},
    {Mutant::gqa_head_mod, "gqa_head_mod", "heads/comm", kInStep,
     "KV head of query head h is h % Hkv", "1 < Hkv < Hq", "SGLang #32858"},
    {Mutant::gqa_local_ratio, "gqa_local_ratio", "heads/comm", kInStep,
     "KV head from the rank's local Q:KV ratio", "TP ranks whose heads straddle a KV group",
     "SGLang #34161; vLLM #48392"},
    {Mutant::lse_layout_transposed, "lse_layout_transposed", "heads/comm", kInStep,
     "a partial's LSE [T, H] stored as [H, T]", "two or more query tokens and heads",
     "vllm-project/flash-attention #87; vLLM #45426, #22003 (strides); hpc-ops #6; MetaX #83"},
    {Mutant::q_gated_by_owner, "q_gated_by_owner", "heads/comm", kInStep,
     "a rank zeroes the query of a token whose position it does not own", "N >= 2", "aiter #4342"},
    {Mutant::bf16_accumulation, "bf16_accumulation", "arithmetic", kInStep,
     "P.V accumulated in bf16", "rows of a few keys or more",
     "none in a DCP engine; tpu-inference #3212 (a bf16 all-reduce)"},
    {Mutant::scale_twice, "scale_twice", "arithmetic", kInStep, "softmax scale applied twice",
     "a scale != 1 (Dk >= 2 or an explicit scale)", "flash-sparse-attention #106 (partial)"},
    {Mutant::scale_missing, "scale_missing", "arithmetic", kInStep, "softmax scale not applied",
     "a scale != 1", "flash-sparse-attention #106 (partial)"},
    {Mutant::a2a_lse_bf16, "a2a_lse_bf16", "arithmetic", kInStep,
     "the LSE packed into the a2a buffer rounded to bf16",
     "the a2a combine and an LSE not exact in bf16",
     "tpu-inference #3212 (weights rounded to bf16)"},
    {Mutant::rs_bf16_claimed_f32, "rs_bf16_claimed_f32", "arithmetic", kInStep,
     "ag_rs sends its scaled partials as bf16 where f32 is claimed",
     "the ag_rs combine and an f32 claim", "tpu-inference #3212; tt-metal #36749"},
    {Mutant::k_scale_missing, "k_scale_missing", "kv scales", kInStep,
     "the logits use the stored keys: K scale not folded in", "an fp8 cache with a K scale != 1",
     "local-inference-lab/vllm #14, #16; TRT-LLM #16916 and SGLang #20705 (not DCP)"},
    {Mutant::k_scale_twice, "k_scale_twice", "kv scales", kInStep,
     "the K scale folded in twice (dequantized keys scaled again)",
     "an fp8 cache with a K scale != 1", "none found"},
    {Mutant::v_scale_missing, "v_scale_missing", "kv scales", kInStep,
     "the output uses the stored values: V scale not applied", "an fp8 cache with a V scale != 1",
     "local-inference-lab/vllm #14, #16"},
    {Mutant::v_scale_twice, "v_scale_twice", "kv scales", kInStep, "the V scale applied twice",
     "an fp8 cache with a V scale != 1", "none found"},
    {Mutant::kv_scale_head0, "kv_scale_head0", "kv scales", kInStep,
     "per-head scales read as one: the rank's first KV head's for all",
     "per-head scales, 2 or more KV heads on a rank", "sgl-kernel-xpu #252 (review)"},
    {Mutant::kv_scales_swapped, "kv_scales_swapped", "kv scales", kInStep,
     "the K scale applied to V and the V scale to K", "an fp8 cache with k_scale != v_scale",
     "vLLM #55557 (the test's rationale)"},
    {Mutant::token_scale_global_row, "token_scale_global_row", "kv scales", kInStep,
     "the KV write stores a token's scale at the entry of its global position, not its row",
     "scales by token and N >= 2",
     "none found (the class of kv_write_global_row, for the scales written beside the cache)"},
    {Mutant::page_scale_logical_page, "page_scale_logical_page", "kv scales", kInStep,
     "the KV write stores a token's scale by page at its logical page (position / P), not its "
     "rank-local page (row / P)",
     "scales by page and N >= 2",
     "none found (the class of block_table_by_position, for the scales kept a page)"},
    {Mutant::global_lengths, "global_lengths", "batch", kInStep,
     "a rank reads as many rows as the request has global positions", "N >= 2",
     "vLLM #48003, #42205, #45426; SGLang #29760, #33325; ATOM #1746"},
    {Mutant::prefix_pages_without_n, "prefix_pages_without_n", "batch", kInStep,
     "a shared prefix counted in pages of P tokens, not virtual pages of P N",
     "a batch sharing a prefix, N >= 2", "ATOM #1701; vllm-ascend #9638; vLLM #49971, #50118"},
    {Mutant::shared_pages_freed, "shared_pages_freed", "batch", kInStep,
     "a retired request frees the shared prefix's pages too (no reference count)",
     "a batch with a shared prefix and a retired request", "none found"},
    {Mutant::partial_page_shared, "partial_page_shared", "batch", kInStep,
     "the prefix's last, partly filled page shared too: written twice",
     "a batch whose shared prefix ends inside a page", "none found"},
    {Mutant::block_table_by_position, "block_table_by_position", "batch", kInStep,
     "the attention finds a row's page by its position / P, not its row / P",
     "N >= 2 and a paged cache",
     "ATOM #1701; vllm-ascend #9638, #15851 (review); SGLang #36886 (the write side)"},
    {Mutant::drop_token, "drop_token", "tokens", kInModel,
     "the highest-scoring visible key of each row is skipped", "(the fp32 model)",
     "Automodel #2918"},
    {Mutant::duplicate_token, "duplicate_token", "tokens", kInModel,
     "the highest-scoring visible key of each row is counted twice", "(the fp32 model)",
     "none found"},
    {Mutant::lost_token, "lost_token", "tokens", kInModel,
     "the last shard loses its highest-scoring key (one rank's KV write lost)", "(the fp32 model)",
     "bytedance-iaas/sglang #747; TRT-LLM #9342"},
};
static_assert(std::size(kMutantCatalogue) == static_cast<size_t>(Mutant::count) - 1,
              "every mutant has one catalogue entry");

// The catalogue lists the enumerators in order, each name once (checked at compile time).
constexpr bool catalogue_well_formed() {
  for (size_t i = 0; i < std::size(kMutantCatalogue); ++i) {
    if (kMutantCatalogue[i].id != static_cast<Mutant>(i + 1)) return false;
    for (size_t j = 0; j < i; ++j)
      if (kMutantCatalogue[j].name == kMutantCatalogue[i].name) return false;
  }
  return true;
}
static_assert(catalogue_well_formed(), "catalogue entries in enum order, names unique");

constexpr const MutantInfo& mutant_info(Mutant m) {
  return kMutantCatalogue[static_cast<size_t>(m) - 1];
}

inline std::optional<Mutant> parse_mutant(std::string_view name) {
  for (const MutantInfo& m : kMutantCatalogue)
    if (m.name == name) return m.id;
  return std::nullopt;
}

}  // namespace dcp::mutants
