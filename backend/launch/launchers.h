// The launcher for a launch kind: one place that maps "local", "ssh" and "slurm" to their
// Launcher, for starting runs and for re-attaching to stored ones (CLI and dashboard alike).
#pragma once

#include <QString>

#include <memory>

#include "backend/launch/launcher.h"
#include "spec/result.h"

namespace shardscope::backend {

/// The launcher for `kind` ("local", "ssh", "slurm", or "program": a search trial's program, for
/// attach()) with a stop grace of `graceS` seconds; an error naming launch.kind for others.
/// Slurm commands get SLURM_CONF of this process (also when they run over SSH).
[[nodiscard]] Result<std::unique_ptr<Launcher>> makeLauncher(const QString& kind, int graceS = 5);

}  // namespace shardscope::backend
