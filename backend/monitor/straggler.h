// Why a sharded run is slow, from its ranks' `phases` events (docs/trainer.md, "Phase timings"):
// each step's slowest rank (the most busy time: its wall less its waits on collectives) and how
// long the others waited, then one verdict for the run, as `shardscope-cli why RUN` prints it.
#pragma once

#include <QJsonObject>
#include <QString>

#include <map>

#include "backend/store/runreader.h"
#include "spec/events.h"
#include "spec/result.h"

namespace shardscope::backend {

/// Each rank's phases by step.
using RankPhases = std::map<int, std::map<qint64, spec::PhasesEvent>>;

/// What one rank's phases were on average over the run's steps, in seconds.
struct RankPhaseSummary {
  int rank = 0;
  qint64 steps = 0;
  qint64 slowestSteps = 0;  ///< steps on which this rank was the busiest
  double wall = 0, data = 0, forward = 0, backward = 0, optimizer = 0, commExposed = 0,
         commTotal = 0, copy = 0, other = 0;
  double busy() const { return wall - commExposed; }
};

struct StragglerVerdict {
  qint64 steps = 0;  ///< steps that every rank reported
  int ranks = 0;
  int slowest = -1;         ///< the rank that was the busiest most often (-1: fewer than 2 ranks)
  double slowestShare = 0;  ///< of the steps
  QString phase;            ///< its phase furthest above the others' ("forward", ...)
  double phaseRatio = 0;    ///< that phase's mean over the others' mean
  double busyRatio = 0;     ///< its busy time over the others' mean busy time
  double othersWaitShare = 0;  ///< the others' mean comm_exposed / wall
  std::map<int, RankPhaseSummary> perRank;
  QString text;  ///< the verdict in one sentence
};

/// The verdict over every step that all ranks reported.
StragglerVerdict nameStraggler(const RankPhases& phases);

/// The phases of run `runId` from the run log (its `phase.*` metrics).
[[nodiscard]] Result<RankPhases> phasesOfRun(RunReader& reader, qint64 runId);
/// The phases in a run directory's events-rank-N.jsonl files (a run outside the run log).
[[nodiscard]] Result<RankPhases> phasesOfRunDir(const QString& runDir);

QJsonObject verdictToJson(const StragglerVerdict& verdict);

}  // namespace shardscope::backend
