// Population-based training in the CLI: `sweep` of an experiment with [search.pbt] runs
// backend::PbtLoop (runPbtSweep), and `study show` prints its lineage and the best member's
// parameter schedule (printPbtLineage, pbtJson); `pbt-replay STUDY` runs that schedule as one
// run (backend/sweep/pbtreplay.h).
#pragma once

#include <QJsonObject>

#include "app/cli/cli_common.h"
#include "backend/sweep/sweeploop.h"

namespace shardscope::cli {

/// Runs the PBT study `opened` of `input` to its end, printing a line per segment event and the
/// best member's schedule; exits as `sweep` does (docs/cli.md).
void runPbtSweep(backend::RunStore& store, backend::SweptStudy opened,
                 const backend::SweepInput& input, const backend::SweepLoop::Options& options);
/// The lineage and the best member's schedule of a PBT study (nothing for another study).
void printPbtLineage(const search::Study& study);
/// The same as JSON ({} for another study): the lineage rows and "best_schedule".
QJsonObject pbtJson(const search::Study& study);

}  // namespace shardscope::cli
