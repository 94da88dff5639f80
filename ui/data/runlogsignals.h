// RunLogSignals: what the run log's reader delivers, declared once. RunLogWorker emits these in
// its own thread; RunLog, the GUI thread's handle, re-emits each one (forwardRunLogSignals), so
// the panels connect to RunLog and are called in the GUI thread.
#pragma once

#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>

#include "ui/data/phasesdata.h"
#include "ui/data/runlogtypes.h"
#include "ui/data/samplesdata.h"

namespace shardscope::ui {

class RunLogSignals : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;

 signals:
  void opened(bool ok, const QString& message);
  void runsLoaded(const QVector<shardscope::ui::RunSummary>& runs);
  /// New points for the watched runs; a pass over them ends with seriesPassDone().
  void seriesLoaded(const QVector<shardscope::ui::SeriesChunk>& chunks);
  void seriesPassDone(const QList<qint64>& runIds, int generation);
  void logLoaded(const shardscope::ui::LogSnapshot& log);
  /// The watched sweep's summaries (no curves); its curves follow as sweepCurvesLoaded.
  void sweepLoaded(const shardscope::ui::SweepData& sweep);
  /// Curves of the sweep last delivered by sweepLoaded (after it, in batches).
  void sweepCurvesLoaded(const shardscope::ui::SweepCurves& curves);
  /// The figures of a sweep's trials asked for by loadTrialFigures (read once).
  void trialFiguresLoaded(const shardscope::ui::TrialFigures& figures);
  void hostsLoaded(const QVector<shardscope::ui::HostSummary>& hosts);
  /// The watched autotune's study as stored now (studyId -1 while it is not in the run log);
  /// delivered when it changed.
  void autotuneLoaded(const shardscope::ui::AutotuneData& autotune);
  /// The experiment a run was started from: its file's path and the TOML that ran.
  void experimentLoaded(qint64 experimentId, const QString& name, const QString& source,
                        const QString& toml);
  /// New phases of the watched run and the straggler verdict over all of them.
  void phasesLoaded(const shardscope::ui::PhasesDelta& delta);
  void unitStepLoaded(const shardscope::ui::UnitStepData& data);
  /// New probe answers of the watched runs.
  void samplesLoaded(const shardscope::ui::SamplesDelta& delta);
  void failed(const QString& message);
  /// A tag, note or verdict edit ended: ok, and what to tell the user.
  void edited(bool ok, const QString& message);
  /// Every tag of the run log by name (with each runs list): what a tag editor completes from.
  void knownTagsLoaded(const QStringList& names);
  /// Every group of runs by name (schema 12), with each one's id in the same order: what "Add to
  /// group" offers (with each runs list, just before it).
  void knownGroupsLoaded(const QStringList& names, const QList<qint64>& ids);
  /// Every study as stored (with each runs list, just before it): what tells a sweep's end.
  void studiesLoaded(const QVector<shardscope::backend::StudyRecord>& studies);
  /// The estimate's corrections from the completed runs (every kind of run), delivered when the
  /// set of completed runs changed.
  void calibrationsLoaded(const shardscope::ui::MemoryCalibrations& calibrations);
  /// The read asked for by sync(token) has been delivered.
  void synced(quint64 token);
};

/// Connects each signal of RunLogSignals on `from` to the same signal on `to` (queued when they
/// live in different threads).
void forwardRunLogSignals(const RunLogSignals* from, RunLogSignals* to);

}  // namespace shardscope::ui
