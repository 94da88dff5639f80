// The CLI's side of backend/lifecycle: the RunLifecycle for this process's --db (its supervisor
// is this executable), following a run with SIGINT/SIGTERM as a graceful stop, and the notes that
// adopting orphaned runs prints.
#pragma once

#include <vector>

#include "app/cli/cli_common.h"
#include "backend/lifecycle/runlifecycle.h"
#include "backend/store/runrecords.h"

namespace shardscope::cli {

/// The run lifecycle of this invocation: --db's run log and runs folder, this executable as the
/// supervisor, the trainer built beside it.
backend::RunLifecycle lifecycle(const Globals& g);

/// RunLifecycle::follow with SIGINT and SIGTERM asking the ranks for a graceful stop (a note on
/// stderr) when `stopOnInterrupt`.
[[nodiscard]] Result<backend::FollowOutcome> followRun(backend::RunStore& store,
                                                       backend::RunHandle& handle, qint64 runId,
                                                       backend::FollowOptions options,
                                                       bool stopOnInterrupt);

/// RunLifecycle::adoptOrphans, with a note on stderr for each supervisor it started (a warning
/// for each it could not start). Returns how many were started.
int adoptOrphans(const Globals& g, backend::RunReader& reader,
                 const std::vector<backend::RunRecord>& runs);

}  // namespace shardscope::cli
