// Launchers for the CLI: the one for a [launch] kind, attaching to a run the store knows, and
// following a run to its end through backend/monitor's RunMonitor (attached `run`, the detached
// run's supervisor, `stop`), plus the supervisor process a detached run leaves behind.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "app/cli/cli_common.h"
#include "backend/launch/launcher.h"
#include "backend/store/runrecords.h"
#include "backend/store/runstore.h"
#include "trainer/spec/experiment.h"

namespace shardscope::cli {

/// Re-attaches to the ranks of a stored run through its recorded location.
[[nodiscard]] Result<std::unique_ptr<backend::RunHandle>> attachRun(const backend::RunRecord& run);

/// What the attached `run` shows on its progress line.
struct Progress {
  qint64 step = 0;
  qint64 maxSteps = 0;
  double loss = 0;
  double etaS = -1;  // seconds left; -1 while unknown
};

/// How followRun behaves.
struct FollowOptions {
  qint64 maxSteps = 0;                          ///< for the ETA (0: unknown)
  std::function<void(const Progress&)> onStep;  ///< rank 0's steps, with the ETA
  bool stopAtOnce = false;                      ///< `stop`: a graceful stop once following
  bool stopOnInterrupt = false;                 ///< SIGINT/SIGTERM ask the ranks to stop
  std::function<void()> onFollowing;            ///< called once the lease is held
};

/// How followRun ended.
struct FollowOutcome {
  bool followed = false;  ///< false: another live process holds the run's lease
  spec::RunStatus status = spec::RunStatus::running;
};

/// Follows run `runId` with a RunMonitor in this process until the run's status is final (or
/// another process holds its lease: followed = false). An error when the store fails or the
/// lease is lost to another monitor.
[[nodiscard]] Result<FollowOutcome> followRun(backend::RunStore& store, backend::RunHandle& handle,
                                              qint64 runId, const FollowOptions& options);

/// Starts `shardscope-cli supervise RUN` in its own session (double fork, a child of init) with
/// its output appended to `<run dir>/supervisor.log`; returns its pid.
[[nodiscard]] Result<qint64> spawnSupervisor(const Globals& g, const backend::RunRecord& run);

/// For each live run (not final, started) that no live process follows (no lease, a dead
/// holder on this machine, or a stale heartbeat), starts a supervisor that takes it over.
/// Returns how many were started; notes each on stderr.
int adoptOrphans(const Globals& g, backend::RunReader& reader,
                 const std::vector<backend::RunRecord>& runs);

}  // namespace shardscope::cli
