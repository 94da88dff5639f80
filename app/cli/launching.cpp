#include "app/cli/launching.h"

#include <QCoreApplication>

#include <atomic>
#include <csignal>
#include <iostream>

namespace shardscope::cli {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void onInterrupt(int /*sig*/) { g_interrupted = true; }

}  // namespace

backend::RunLifecycle lifecycle(const Globals& g) {
  backend::RunLifecycle::Settings settings;
  settings.dbPath = dbPath(g);
  settings.runsRoot = runsRoot(g);
  settings.supervisor = QString::fromStdString(g.self);
  settings.trainerDir = QCoreApplication::applicationDirPath();
  return backend::RunLifecycle(settings);
}

Result<backend::FollowOutcome> followRun(backend::RunStore& store, backend::RunHandle& handle,
                                         qint64 runId, backend::FollowOptions options,
                                         bool stopOnInterrupt) {
  if (stopOnInterrupt) {
    // Not cleared here: a SIGINT between two follows of one process (autotune's candidates)
    // stops the next one at once instead of being lost.
    std::signal(SIGINT, onInterrupt);
    std::signal(SIGTERM, onInterrupt);
    // The caller's own stop (autotune's: the study's control in the run log) still counts.
    options.stopRequested = [inner = std::move(options.stopRequested)] {
      if (!g_interrupted.exchange(false)) return inner && inner();
      std::cerr << "\nstopping the run (graceful)...\n";
      return true;
    };
  }
  return backend::RunLifecycle::follow(store, handle, runId, options);
}

int adoptOrphans(const Globals& g, backend::RunReader& reader,
                 const std::vector<backend::RunRecord>& runs) {
  int started = 0;
  for (const backend::Adoption& a : lifecycle(g).adoptOrphans(reader, runs)) {
    if (!a.error.empty()) {
      std::cerr << "warning: " << a.error << '\n';
      continue;
    }
    std::cerr << "note: run " << a.runName.toStdString() << " had no live follower; supervisor "
              << a.supervisorPid << " took it over\n";
    ++started;
  }
  return started;
}

}  // namespace shardscope::cli
