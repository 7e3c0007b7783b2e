// mutant_device.hpp — the catalogue's step mutants (catalogue.hpp, kInStep) planted at the
// device seam: a host device whose kernels, or their arguments, carry one bug, running the
// production step (device_step.hpp) unchanged around it. The production path itself holds no
// planted code; each bug here is the smallest change at the seam that reproduces it:
//   arguments   the scale, softcap, sink, queries, cache scales or head mapping handed to the
//               production attention body (scale_*, exp2_without_log2e, sink_on_every_rank,
//               sink_missing, sink_without_log2e, sink_softcapped, q_gated_by_owner, the KV-scale
//               family, gqa_*, the batch mutants' block tables, as handed or uploaded)
//   key lists   the keys a rank attends to, built with the bug and run through the body's top-k
//               path (the masks but softcap_after_mask and finite_mask_sentinel, top-k padding,
//               count_off_by_one, split_boundary_duplicate, global_lengths)
//   outputs     the production kernels' results changed afterwards (empty-shard LSEs, a2a
//               packing, the reported LSE slice, base and layout, ag_rs's send format)
//   kernels     a buggy merge in the combines (merge family, empty_split_clobbers), a buggy KV
//               write (layout family), a buggy online softmax (zero_initial_max,
//               partial_lse_scaled_max, softcap_after_mask, finite_mask_sentinel,
//               bf16_accumulation, sink_per_split, sink_skipped_when_empty, sink_no_max_shift)
//
//   gpu::RankStep step = mutant_step(Mutant::a2a_slices_permuted);
//   gpu::Result<gpu::GroupRun> run = gpu::run_dcp_threads(inputs, cfg, step);
#pragma once

#include "gpu/run_threads.hpp"
#include "mutants/catalogue.hpp"

namespace dcp::mutants {

// Whether the step plants m (kInStep).
bool planted_in_step(Mutant m);

// One TP rank's step on a host device carrying m (Mutant::none: the production step). With
// planted false the device runs m's code path, its copies of the production kernels included,
// with no bug in it: the step then equals the production step bit for bit
// (mutants/test_mutant_device.cpp), so a kill is the bug's, never a copy's difference.
gpu::RankStep mutant_step(Mutant m, bool planted = true);

}  // namespace dcp::mutants
