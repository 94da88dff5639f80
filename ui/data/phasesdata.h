// What the run-log worker sends the Timeline (ui/timeline/): new `phases` of the watched run per
// rank, read from its `phase.*` metrics, and the straggler verdict over every step read so far
// (backend::nameStraggler, the one `shardscope-cli why` prints).
#pragma once

#include <QMetaType>
#include <QString>
#include <QVector>

#include "backend/monitor/unittrace.h"
#include "spec/events.h"

namespace shardscope::ui {

/// One rank's phases of one step.
struct RankStepPhases {
  int rank = 0;
  spec::PhasesEvent phases;
};

/// New phases of run `runId` (reset: they replace what the view holds), in rank, step order.
struct PhasesDelta {
  qint64 runId = -1;
  bool reset = false;
  QVector<RankStepPhases> points;
  QString verdict;   ///< nameStraggler(...).text over every step read
  int slowest = -1;  ///< the rank it names (-1: none)
};

/// One step of a run's per-unit trace ([trace] every_n_steps), or why there is none.
struct UnitStepData {
  qint64 runId = -1;
  qint64 step = -1;
  bool found = false;  ///< the step was recorded in detail
  backend::UnitTraceStep detail;
  QString message;  ///< when not found: why, and how to record it
};

}  // namespace shardscope::ui

Q_DECLARE_METATYPE(shardscope::ui::PhasesDelta)
Q_DECLARE_METATYPE(shardscope::ui::UnitStepData)
