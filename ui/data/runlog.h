// RunLog: the GUI thread's handle on the run log. It owns a worker thread (RunLogWorker) that does
// every read; its methods only post requests, and results arrive as the worker's signals,
// re-emitted here. So the GUI thread never blocks on SQL and never touches the store's writer.
#pragma once

#include <QObject>
#include <QThread>

#include "ui/data/phasesdata.h"
#include "ui/data/runlogsignals.h"
#include "ui/data/runlogtypes.h"
#include "ui/data/samplesdata.h"

namespace shardscope::ui {

class RunLogWorker;

class RunLog : public RunLogSignals {
  Q_OBJECT

 public:
  /// pollMs: how often the worker checks the file for commits by any process.
  explicit RunLog(int pollMs = 250, QObject* parent = nullptr);
  ~RunLog() override;

  /// Opens `path` (read-only) in the worker; opened() tells how it went.
  void open(const QString& path);
  const QString& path() const { return m_path; }
  /// The runs whose curves the worker keeps delivering (seriesLoaded).
  void watchRuns(const QList<qint64>& runIds, int generation = 0);
  /// The rank whose last `limit` log lines the worker keeps delivering (logLoaded).
  void watchLog(qint64 runId, int rank, int limit = 2000);
  /// The sweep the worker keeps delivering (sweepLoaded); -1: the largest one.
  void watchSweep(qint64 experimentId);
  /// The runs whose "loss" the worker keeps delivering for the Compare overlay.
  void watchOverlay(const QList<qint64>& runIds);
  /// Reads the figures (mean MFU, mean exposed-communication share) of sweep `experimentId`'s
  /// trials `runIds` once, in one statement; trialFiguresLoaded() delivers them.
  void loadTrialFigures(qint64 experimentId, const QList<qint64>& runIds);
  /// The autotune study the worker keeps delivering (autotuneLoaded); "": none.
  void watchAutotune(const QString& studyName);
  /// The run whose phases the worker keeps delivering (phasesLoaded) for the Timeline; -1: none.
  void watchPhases(qint64 runId);
  /// The runs whose probe answers the worker keeps delivering (samplesLoaded) for the Samples
  /// view; empty: none. `objectiveKey` (optional): each run's best step by that metric comes too.
  void watchSamples(const QList<qint64>& runIds, const QString& objectiveKey = {},
                    bool minimize = true);
  /// Reads step `step` of run `runId`'s per-unit trace once (unitStepLoaded).
  void loadUnitStep(qint64 runId, qint64 step);
  /// Reads an experiment row once; experimentLoaded() delivers it.
  void loadExperiment(qint64 experimentId);
  /// Points per streamed batch of sweep curves (smaller: more, earlier batches).
  void setCurveBatchRows(int rows);
  /// The parameters and metrics the runs filter compares: each RunSummary carries their values
  /// from now on (values, last, best), read again with every list of runs.
  void setQueryKeys(const QStringList& params, const QStringList& metrics);
  /// Adds `add` to and removes `remove` from the tags of each run (written in the worker's
  /// thread); edited() says how it went, and the runs come again with their tags.
  void editTags(const QList<qint64>& runIds, const QStringList& add, const QStringList& remove);
  /// Replaces a run's note ("" clears it); edited() says how it went.
  void setNote(qint64 runId, const QString& note);
  /// Adds the runs `add` to group `name` (made when new) and takes the runs `remove` out of it
  /// (written in the worker's thread, schema 12); edited() says how it went, and the runs come
  /// again with their groups.
  void editGroup(const QString& name, const QList<qint64>& add, const QList<qint64>& remove);
  /// Renames group `from` to `to`, or deletes group `name` (its runs stay, in no group): written
  /// in the worker's thread; edited() says how it went, and the runs come again with their groups.
  void renameGroup(const QString& from, const QString& to);
  void deleteGroup(const QString& name);
  /// Marks answers good or bad, or clears their marks (written in the worker's thread, schema 11);
  /// edited() says how it went, and the Samples view gets the runs' verdicts again.
  void setVerdicts(const QVector<VerdictEdit>& edits);
  void refresh();
  /// Re-reads everything watched now, then emits synced(token): the summaries that read
  /// delivers (sweepLoaded, runsLoaded) arrive before it (streamed curves may follow), so a record
  /// older than `sync` is not taken for what the run log holds (the sweep watch: a study shown as
  /// running whose process has since ended it and exited).
  void sync(quint64 token);

 private:
  QThread m_thread;
  RunLogWorker* m_worker = nullptr;  // lives in m_thread; deleted when it finishes
  QString m_path;
};

}  // namespace shardscope::ui
