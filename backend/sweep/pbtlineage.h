// The lineage of a population-based training study: one row per segment (which member, which
// segment, the run that trained it, whose checkpoint it started from and at which step, its
// values and its objective at the end). It lives in the study's `state` JSON under "pbt" (the
// study's own record, written by the one process that drives it, read by `study show` and
// Compare); the values are also the segment run's params, as for any trial.
#pragma once

#include <QJsonObject>
#include <QString>

#include <optional>
#include <vector>

#include "search/space.h"

namespace shardscope::backend {

/// One segment of one member.
struct PbtSegment {
  int member = 0;
  int segment = 0;
  qint64 trial = 0;             ///< its trial number: segment * population + member
  qint64 runId = 0;             ///< 0 until its run is made
  qint64 startStep = 0;         ///< the step it resumed at (0: from scratch)
  qint64 endStep = 0;           ///< its last optimizer step (train.max_steps of the segment)
  int fromMember = -1;          ///< whose checkpoint it started from (-1: none, segment 0)
  qint64 fromRunId = 0;         ///< that member's run of the segment before
  QString fromCheckpoint;       ///< the checkpoint folder it resumed from
  bool exploited = false;       ///< it took another member's checkpoint and explored values
  search::TrialParams params;   ///< its values
  std::optional<double> value;  ///< the objective at its end (none: not complete)
  QString state = QStringLiteral("running");  ///< running, complete, failed or stopped
};

/// Every segment, by (segment, member).
struct PbtLineage {
  int population = 0;
  std::vector<PbtSegment> segments;

  /// The row of (segment, member), or null.
  const PbtSegment* at(int segment, int member) const;
  PbtSegment* at(int segment, int member);
  /// The member best at the last segment every member finished (none: no segment complete).
  std::optional<int> bestMember(bool minimize) const;
  /// The chain of segments the best member's weights went through, first segment first (its
  /// source at each exploit): the best trial's parameter schedule.
  std::vector<PbtSegment> bestSchedule(bool minimize) const;

  QJsonObject toJson() const;
  /// The lineage stored in a study's state (`state["pbt"]`); empty when none.
  static PbtLineage fromJson(const search::SearchSpace& space, const QJsonObject& json);
};

}  // namespace shardscope::backend
