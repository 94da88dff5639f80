// A PBT schedule as one run (`shardscope-cli pbt-replay STUDY`): the best member's chain of
// segments (PbtLineage::bestSchedule) replayed on one new run outside the study, segment k as its
// attempt k: attempt 0 trains from scratch with the first segment's values up to its end step;
// each next attempt (RunStore::beginNextSegment) resumes from the previous attempt's end
// checkpoint with the next segment's values, in a folder of its own, and the run's curve goes on.
// The segments' experiment overrides are the ones PbtLoop runs them with (pbtSegmentOverrides).
#pragma once

#include <string>
#include <vector>

#include "backend/lifecycle/runlifecycle.h"
#include "backend/sweep/pbtlineage.h"
#include "search/space.h"
#include "spec/result.h"

namespace shardscope::backend {

/// The "dotted.key=value" overrides of a segment: its values, train.max_steps at its end, a
/// sharded checkpoint every interval and at its end.
std::vector<std::string> pbtSegmentOverrides(const search::PbtConfig& config,
                                             const PbtSegment& segment, bool withValues);

/// Starts `segment` (not the first) of a replay as the next attempt of run `runId`, whose last
/// attempt completed: RunStore::beginNextSegment with the segment's values as params, a folder
/// `<first folder>-segment-K`, `--resume` at the last attempt's newest sharded checkpoint. `exp`:
/// the experiment with pbtSegmentOverrides applied. The caller follows the returned ranks and
/// records the location once it holds the lease.
[[nodiscard]] Result<LaunchedRun> startNextSegment(RunStore& store, qint64 runId,
                                                   const spec::Experiment& exp,
                                                   const PbtSegment& segment);

}  // namespace shardscope::backend
