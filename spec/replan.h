// The replan ladder: what a run that ran out of memory is tried in next, with the same
// mathematics (search.on_oom = "replan" for a sweep's trials, `shardscope-cli run
// --replan-on-oom` and the builder's Launch option for one run). The plans keep the global batch
// and the loss: the loss is the sum of token losses over the all-reduced count of loss tokens, so
// any split of a step's batch into micro-batches computes the same quantity. The rungs, in order,
// each on top of the ones before:
//   1. halve train.micro_batch_size (gradient accumulation doubles; repeated down to 1),
//   2. shard.activation_checkpointing = true,
//   3. shard.offload_optimizer = true,
//   4. shard.offload_params = true.
// A plan the memory estimate says does not fit the budget is passed over (the next rung is tried
// on top of it); chat data's rows are bounded as the caller's memory check bounded them (by the
// data's samples when it read them, else by data.seq_len). A rung whose field is searched (a
// parameter of the study's space) is never taken; a plan that fails validation is passed over.
// The ladder reads only the experiment as it ran and that bound, so the next plan after an
// out-of-memory is a function of those alone.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "spec/estimate.h"
#include "spec/experiment.h"

namespace shardscope::spec {

/// The fields a plan may set, in the ladder's order.
inline constexpr std::array<const char*, 4> kReplanFields = {
    "train.micro_batch_size", "shard.activation_checkpointing", "shard.offload_optimizer",
    "shard.offload_params"};

/// One plan of the ladder, relative to the experiment that ran out of memory.
struct Replan {
  Experiment experiment;               ///< the experiment in the new plan
  std::vector<std::string> overrides;  ///< "dotted.field=value" of every field the plan changed
  /// For people: what changed, e.g. "train.micro_batch_size 4 -> 2 (gradient accumulation
  /// 1 -> 2)"; rungs joined with "; ".
  std::string change;
  std::vector<std::string> skipped;  ///< the plans passed over, each with why
};

/// The next plan after `ran` (the experiment as launched: its world shape is [launch]'s) ran out
/// of memory. `searched`: the dotted fields a study samples (never changed). `budget`: the
/// per-rank budget the estimate is held against (0 bytes: every plan fits). `data`: what the
/// run's chat data holds (the bound its memory check used; estimate_memory's), so a plan is held
/// against the figure the check and `shardscope-cli estimate` give; nullptr: rows bounded by
/// data.seq_len. No rung changes data.seq_len or the data, so one bound serves every plan. No
/// plan left: an error saying why each was passed over (for the run's error).
Result<Replan> next_plan(const Experiment& ran, const std::vector<std::string>& searched,
                         const DeviceBudget& budget, const DataBound* data = nullptr);

}  // namespace shardscope::spec
