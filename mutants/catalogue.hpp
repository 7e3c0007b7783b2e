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
  // The merge of partials (merge.hpp) and the LSE it reports.
  merge_unweighted_mean,  // O = mean of the O_r, no LSE weights
  merge_base_mismatch,    // weights with exp for a base-2 LSE (exp2 for base e)
  lse_out_wrong_base,     // the final LSE converted to the other base
  exp2_without_log2e,     // base-2 kernel: exp2(s - m) on natural-unit logits
  merge_no_max_shift,     // weights base^L_r, not base^(L_r - max)
  merge_shift_by_first,   // shifted by the first partial's LSE, even when it is empty
  zero_initial_max,       // online softmax starts its running max at 0, not -inf
  // Empty shards (convention.hpp).
  empty_lse_zero,     // an empty shard reports LSE 0
  empty_nan_leak,     // an empty shard's 0/0 output, merged with weight 0
  empty_lse_pos_inf,  // an empty shard reports LSE +inf (another convention)
  // The token layout (layout.hpp) and KV writes.
  count_off_by_one,          // count(r, x) counts [0, x] instead of [0, x)
  chunk_share_uniform,       // a chunk's rows on a rank taken as len / N, round-robin
  chunk_share_no_phase,      // a chunk's rows on a rank computed as if it started at 0
  position_no_interleave,    // position(r, row) = row N + r, ignoring I
  split_boundary_duplicate,  // split-KV pieces overlap by one key: a token counted twice
  block_table_ignored,       // a paged cache read as if its rows were in order: pool row = row
  // Masks, on global positions.
  causal_on_local_rows,  // causal mask compares the local row with q_pos
  window_on_local_rows,  // sliding-window bound compares the local row with q_pos - W
  window_off_by_one,     // window keeps W + 1 keys
  softcap_after_mask,    // softcap applied after -inf masking: masked keys get -c
  // Sink and top-k.
  sink_on_every_rank,  // every rank adds the sink
  sink_missing,        // no rank adds the sink
  sink_per_split,      // every split-KV piece of the sink's rank adds the sink
  sink_without_log2e,  // base-2 kernel: the sink, a natural-unit logit, used as base-2 units
  sink_softcapped,     // the softcap applied to the sink as to a logit
  topk_as_local_rows,  // top-k positions read as this rank's local rows
  topk_pad_last_rank,  // -1 padding owned by the last rank (its last row)
  // Heads and communication.
  a2a_slices_permuted,  // a2a sends destination d the heads of d + 1
  rs_lse_wrong_slice,   // ag_rs: the LSE of the next rank's head slice
  gqa_head_mod,         // KV head of query head h is h % Hkv
  gqa_local_ratio,      // KV head from the rank's local Q:KV ratio
  // Arithmetic.
  bf16_accumulation,    // P.V accumulated in bf16
  scale_twice,          // softmax scale applied twice
  scale_missing,        // softmax scale not applied
  a2a_lse_bf16,         // the LSE packed into the a2a buffer rounded to bf16
  rs_bf16_claimed_f32,  // ag_rs sends its scaled partials as bf16 where f32 is claimed
  // The caches' dequantization scales (an fp8 cache's k_scale and v_scale, kv_view.hpp).
  k_scale_missing,    // the logits use the stored keys: K scale not folded in
  k_scale_twice,      // the K scale folded in twice (dequantized keys scaled again)
  v_scale_missing,    // the output uses the stored values: V scale not applied
  v_scale_twice,      // the V scale applied twice
  kv_scale_head0,     // per-head scales read as one: the rank's first KV head's for all
  kv_scales_swapped,  // the K scale applied to V and the V scale to K
  // A batch's paged-cache metadata, as engines build it (a radix cache's shared prefix).
  global_lengths,          // a rank reads as many rows as the request has global positions
  prefix_pages_without_n,  // a shared prefix counted in pages of P tokens, not virtual pages of P N
  shared_pages_freed,      // a retired request frees the shared prefix's pages too (no reference
                           // count): the next live request takes them and writes over the prefix
  partial_page_shared,     // the prefix's last, partly filled page shared too: written twice,
                           // each request's own tokens after the prefix over another's
  block_table_by_position,  // the attention finds a row's page by its position / P, not its slot's
                            // virtual page (row / P)
  // Tokens lost or doubled (the fp32 model).
  drop_token,       // the highest-scoring visible key of each row is skipped
  duplicate_token,  // ... or counted twice
  lost_token,       // the last shard loses its highest-scoring key (one rank's KV write lost)
  count,            // (the number of entries, none included)
};

// Where a mutant is planted (a mask).
inline constexpr unsigned kInStep = 1, kInModel = 2;

struct MutantInfo {
  Mutant id;
  std::string_view name;    // as --only and --bug take it
  std::string_view family;  // the bug class (docs/mutants.md)
  unsigned where = kInStep;
};

inline constexpr MutantInfo kMutantCatalogue[] = {
    {Mutant::merge_unweighted_mean, "merge_unweighted_mean", "merge", kInStep | kInModel},
    {Mutant::merge_base_mismatch, "merge_base_mismatch", "merge", kInStep | kInModel},
    {Mutant::lse_out_wrong_base, "lse_out_wrong_base", "merge", kInStep | kInModel},
    {Mutant::exp2_without_log2e, "exp2_without_log2e", "merge"},
    {Mutant::merge_no_max_shift, "merge_no_max_shift", "merge"},
    {Mutant::merge_shift_by_first, "merge_shift_by_first", "merge"},
    {Mutant::zero_initial_max, "zero_initial_max", "merge"},
    {Mutant::empty_lse_zero, "empty_lse_zero", "empty shard"},
    {Mutant::empty_nan_leak, "empty_nan_leak", "empty shard"},
    {Mutant::empty_lse_pos_inf, "empty_lse_pos_inf", "empty shard"},
    {Mutant::count_off_by_one, "count_off_by_one", "layout"},
    {Mutant::chunk_share_uniform, "chunk_share_uniform", "layout"},
    {Mutant::chunk_share_no_phase, "chunk_share_no_phase", "layout"},
    {Mutant::position_no_interleave, "position_no_interleave", "layout"},
    {Mutant::split_boundary_duplicate, "split_boundary_duplicate", "layout"},
    {Mutant::block_table_ignored, "block_table_ignored", "layout"},
    {Mutant::causal_on_local_rows, "causal_on_local_rows", "mask"},
    {Mutant::window_on_local_rows, "window_on_local_rows", "mask"},
    {Mutant::window_off_by_one, "window_off_by_one", "mask"},
    {Mutant::softcap_after_mask, "softcap_after_mask", "mask"},
    {Mutant::sink_on_every_rank, "sink_on_every_rank", "sink/top-k", kInStep | kInModel},
    {Mutant::sink_missing, "sink_missing", "sink/top-k", kInStep | kInModel},
    {Mutant::sink_per_split, "sink_per_split", "sink/top-k"},
    {Mutant::sink_without_log2e, "sink_without_log2e", "sink/top-k"},
    {Mutant::sink_softcapped, "sink_softcapped", "sink/top-k"},
    {Mutant::topk_as_local_rows, "topk_as_local_rows", "sink/top-k"},
    {Mutant::topk_pad_last_rank, "topk_pad_last_rank", "sink/top-k"},
    {Mutant::a2a_slices_permuted, "a2a_slices_permuted", "heads/comm"},
    {Mutant::rs_lse_wrong_slice, "rs_lse_wrong_slice", "heads/comm"},
    {Mutant::gqa_head_mod, "gqa_head_mod", "heads/comm"},
    {Mutant::gqa_local_ratio, "gqa_local_ratio", "heads/comm"},
    {Mutant::bf16_accumulation, "bf16_accumulation", "arithmetic"},
    {Mutant::scale_twice, "scale_twice", "arithmetic"},
    {Mutant::scale_missing, "scale_missing", "arithmetic"},
    {Mutant::a2a_lse_bf16, "a2a_lse_bf16", "arithmetic"},
    {Mutant::rs_bf16_claimed_f32, "rs_bf16_claimed_f32", "arithmetic"},
    {Mutant::k_scale_missing, "k_scale_missing", "kv scales"},
    {Mutant::k_scale_twice, "k_scale_twice", "kv scales"},
    {Mutant::v_scale_missing, "v_scale_missing", "kv scales"},
    {Mutant::v_scale_twice, "v_scale_twice", "kv scales"},
    {Mutant::kv_scale_head0, "kv_scale_head0", "kv scales"},
    {Mutant::kv_scales_swapped, "kv_scales_swapped", "kv scales"},
    {Mutant::global_lengths, "global_lengths", "batch"},
    {Mutant::prefix_pages_without_n, "prefix_pages_without_n", "batch"},
    {Mutant::shared_pages_freed, "shared_pages_freed", "batch"},
    {Mutant::partial_page_shared, "partial_page_shared", "batch"},
    {Mutant::block_table_by_position, "block_table_by_position", "batch"},
    {Mutant::drop_token, "drop_token", "tokens", kInModel},
    {Mutant::duplicate_token, "duplicate_token", "tokens", kInModel},
    {Mutant::lost_token, "lost_token", "tokens", kInModel},
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
