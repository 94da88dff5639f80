// Launchers for the CLI: the one for a [launch] kind, and attaching to a run the store knows.
#pragma once

#include <memory>

#include "backend/launch/launcher.h"
#include "backend/store/runrecords.h"
#include "trainer/spec/experiment.h"

namespace shardscope::cli {

/// The launcher for `kind` ("local", "ssh"); an error naming launch.kind when this build cannot
/// start that kind (slurm until its launcher lands).
[[nodiscard]] Result<std::unique_ptr<backend::Launcher>> launcherFor(const QString& kind,
                                                                     int graceS = 5);
/// Re-attaches to the ranks of a stored run through its recorded location.
[[nodiscard]] Result<std::unique_ptr<backend::RunHandle>> attachRun(const backend::RunRecord& run);

}  // namespace shardscope::cli
