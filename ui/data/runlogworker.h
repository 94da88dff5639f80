// RunLogWorker: lives in its own thread with its own read-only RunReader. It notices commits to
// the run log by this or another process (the reader's PRAGMA data_version, polled), re-reads
// what the panels watch, and sends plain values by signals.
// Every slot is called through queued connections from RunLog (ui/data/runlog.h).
// Order of a refresh: the sweep's summaries and the run table first (indexed queries only), then
// hosts, log and the selected runs' series; the sweep's curves last, streamed in batches of about
// curveBatchRows points, one batch per turn of this thread's event loop, so requests posted
// meanwhile (a new selection, a new sweep) are served between batches.
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QJsonObject>
#include <QObject>
#include <QSet>
#include <QTimer>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backend/monitor/straggler.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "ui/data/phasesdata.h"
#include "ui/data/runlogsignals.h"
#include "ui/data/runlogtypes.h"
#include "ui/data/samplesdata.h"
#include "ui/data/sweepsource.h"

namespace shardscope::ui {

class RunLogWorker : public RunLogSignals {
  Q_OBJECT

 public:
  explicit RunLogWorker(int pollMs, QObject* parent = nullptr);

  /// Default points per streamed batch of sweep curves.
  static constexpr int kCurveBatchRows = 100000;
  /// Most runs a sweep-curve read asks for in one statement.
  static constexpr int kCurveRunsPerRead = 256;

  /// The metric keys the Plots panel draws (the monitor's names).
  static QStringList plottedKeys();

 public slots:
  void open(const QString& path);
  /// `generation` comes back with each seriesPassDone, so a pass of an earlier watch of the
  /// same runs is told apart from this one's.
  void watchRuns(const QList<qint64>& runIds, int generation = 0);
  void watchLog(qint64 runId, int rank, int limit);
  void watchSweep(qint64 experimentId);
  /// The runs whose "loss" the Compare overlay shows (delivered as CurveSet::overlay).
  void watchOverlay(const QList<qint64>& runIds);
  /// The autotune study `name` the worker keeps delivering (autotuneLoaded) until another is
  /// asked for; "": none.
  void watchAutotune(const QString& name);
  /// The run whose `phases` the worker keeps delivering (phasesLoaded; runlogphases.cpp); -1:
  /// none. A new watch delivers everything stored (reset), then only what is new.
  void watchPhases(qint64 runId);
  /// The runs whose probe answers (`sample` events) the worker keeps delivering (samplesLoaded;
  /// runlogsamples.cpp); empty: none. A new watch delivers everything stored (reset), then only
  /// what is new. With `objectiveKey` (a metric, "eval.loss"), each run's best step by it too.
  void watchSamples(const QList<qint64>& runIds, const QString& objectiveKey, bool minimize);
  /// Reads step `step` of run `runId`'s per-unit trace (its run directory's trace/) once.
  void loadUnitStep(qint64 runId, qint64 step);
  /// Reads the figures of `runIds` (trials of sweep `experimentId`) once (trialFiguresLoaded;
  /// failed when they cannot be read).
  void loadTrialFigures(qint64 experimentId, const QList<qint64>& runIds);
  /// Reads one experiment row once (experimentLoaded; failed when it cannot be read).
  void loadExperiment(qint64 experimentId);
  /// Points per batch of streamed sweep curves (default kCurveBatchRows).
  void setCurveBatchRows(int rows);
  /// Re-reads everything watched now (also done whenever the file changed).
  void refresh();
  /// See RunLog::setQueryKeys; emits the runs again with those values.
  void setQueryKeys(const QStringList& params, const QStringList& metrics);
  /// See RunLog::editTags and RunLog::setNote: the only writes of this worker, through a
  /// RunStore it opens on the first one.
  void editTags(const QList<qint64>& runIds, const QStringList& add, const QStringList& remove);
  void setNote(qint64 runId, const QString& note);
  void editGroup(const QString& name, const QList<qint64>& add, const QList<qint64>& remove);
  void renameGroup(const QString& from, const QString& to);
  void deleteGroup(const QString& name);
  /// See RunLog::setVerdicts: each mark through the same RunStore, then a refresh (the Samples
  /// view gets the run's verdicts again, the runs table its counts).
  void setVerdicts(const QVector<VerdictEdit>& edits);
  /// refresh(), then synced(token): what that read delivered is in before synced arrives.
  void sync(quint64 token);

 private:
  void poll();
  /// Emits the run table's rows (m_runs, as last listed) with their last steps.
  void loadRuns();
  /// Fills the runs filter's values (m_queryParams, m_queryMetrics) of every row.
  void loadQueryValues(QVector<RunSummary>& rows);
  /// A running row's eventBytes and followed.
  void loadProgress(RunSummary& row);
  /// A lease whose heartbeat is older than this has no live follower (RunMonitor's default).
  static constexpr double kLeaseStaleS = 10;
  /// The value at dotted `key` of experiment `experimentId`'s TOML (cached per refresh).
  QVariant experimentValue(qint64 experimentId, const QString& key);
  void loadSeries();
  void loadSeriesOf(const backend::RunRecord& run, QVector<SeriesChunk>& out);
  void appendEstimate(const backend::RunRecord& run, qint64 lastStep, QVector<SeriesChunk>& out);
  /// Each rank's exposed-communication share of the steps not delivered yet (kExposedShareKey:
  /// phase.comm_exposed / phase.wall per step; runlogphases.cpp).
  void appendExposedShare(const backend::RunRecord& run, bool fresh, QVector<SeriesChunk>& out);
  void forgetRetried(const std::vector<backend::RunRecord>& fresh);
  void loadLog();
  void loadSweep();
  void queueSweepCurves();
  void loadCurveBatch();
  void loadOverlay();
  void loadHosts();
  void loadAutotune();
  void loadCalibrations();
  void loadPhases();
  void loadSamples();
  /// The step of run `runId`'s best m_sampleObjective value (rank 0); nullopt without one.
  std::optional<qint64> bestSampleStep(qint64 runId);
  /// Reads run `runId`'s verdicts into `chunk` when they differ from those last delivered (or the
  /// chunk resets the run); true when they were put in.
  bool readVerdicts(qint64 runId, RunSamples& chunk);
  /// A digest of what a sweepLoaded shows: the trials' ids, statuses, objectives and the study.
  static quint64 sweepPrint(const SweepData& sweep);
  void report(const Error& error);

  int m_pollMs;
  QString m_path;
  std::optional<backend::RunReader> m_reader;
  QTimer* m_pollTimer = nullptr;
  qint64 m_dataVersion = -1;  // PRAGMA data_version when last read
  /// The writer of tag and note edits, opened on the first (nullptr until then).
  backend::RunStore* writer();
  /// One edit through writer(): edited(false, the error) when `write` fails, else
  /// edited(true, `done`) and a refresh (the runs come again with the change).
  void writeEdit(const std::function<Result<void>(backend::RunStore&)>& write, const QString& done);
  std::unique_ptr<backend::RunStore> m_store;
  std::vector<backend::RunRecord> m_runs;
  QStringList m_queryParams;
  QStringList m_queryMetrics;
  QHash<qint64, QString> m_experimentToml;  // experiment id -> its resolved TOML
  QList<qint64> m_watchedRuns;
  // (run, key) -> last step seen per rank; a run is new when absent (its first chunk resets).
  int m_watchGeneration = 0;  // of the watchRuns call m_watchedRuns came from
  QHash<qint64, QHash<QString, QHash<int, qint64>>> m_seen;
  QHash<qint64, qint64> m_estimates;  // run -> mem_estimate of rank 0's hello (0: none)
  // The completed runs (id, attempt) the last calibrationsLoaded was read from.
  QList<QPair<qint64, int>> m_calibratedRuns;
  bool m_calibrationsSent = false;
  qint64 m_logRun = -1;
  int m_logRank = 0;
  int m_logLimit = 2000;
  qint64 m_sweep = -2;  // -2: not asked yet; -1: the largest sweep
  ExperimentSweepSource m_sweepSource;
  // The sweep whose curves stream, its key, and per run the last step delivered (absent: none
  // yet, so its first chunk resets); the runs still to read in this pass.
  qint64 m_curveSweep = -1;
  QSet<qint64> m_curveMembers;  // the runs of m_curveSweep (an experiment's or a group's)
  QString m_curveKey;
  QHash<qint64, qint64> m_curveSeen;
  QList<qint64> m_curveQueue;
  QHash<qint64, qint64> m_curveLast;  // each run's last step of the curve key, at queueing
  int m_curveDone = 0;
  int m_curveTotal = 0;
  bool m_curveBatchPosted = false;
  bool m_curvePassDone = false;  // the last pass over m_curveSweep ended (its "last" batch sent)
  int m_curveBatchRows = kCurveBatchRows;
  QList<qint64> m_overlayRuns;
  QHash<qint64, qint64> m_overlaySeen;
  // Overlay runs read to their end after they had ended: nothing more to read for them (a
  // retry makes the run live again, and it is read on).
  QSet<qint64> m_overlayEnded;
  bool m_overlayAsked = false;  // watchOverlay() since the last delivery: deliver even if empty
  // What the last sweepLoaded carried (sweepPrint()): a refresh that changes none of it (a
  // commit of another experiment's runs) re-delivers nothing, so a 10,000-trial sweep is not
  // redrawn at every step of a live run.
  quint64 m_sweepPrint = 0;
  // A refresh costs more with a bigger run log: the next one waits twice the last one's time,
  // so following live runs takes at most a third of this thread.
  double m_refreshMs = 0;
  QElapsedTimer m_sinceRefresh;
  QString m_lastError;
  QString m_autotune;  // the watched autotune study ("": none)
  // What the last autotuneLoaded showed (nullopt: nothing sent since the watch began).
  struct AutotuneShown {
    bool present = false;
    QJsonObject state;
    backend::StudyStatus status{};
    qint64 sweepPid = 0;
    bool operator==(const AutotuneShown&) const = default;
  };
  std::optional<AutotuneShown> m_autotuneShown;
  // The Timeline's run: what has been read of its phases (steps read whole: their phase.wall was
  // read first), and whether the next delivery replaces what the view holds.
  qint64 m_phasesRun = -1;
  backend::RankPhases m_phases;
  bool m_phasesReset = false;
  // The Samples view's runs: per run the last event row read (rank 0) and the attempt its
  // answers are of, the best step last sent; thumbnails already sent (by path).
  QList<qint64> m_sampleRuns;
  QString m_sampleObjective;
  bool m_sampleMinimize = true;
  QHash<qint64, qint64> m_sampleAfter;
  QHash<qint64, int> m_sampleAttempt;
  QHash<qint64, std::optional<qint64>> m_sampleBest;
  QHash<qint64, QHash<AnswerKey, backend::Verdict>> m_sampleVerdicts;  // run -> delivered marks
  QSet<QString> m_thumbnailsSent;
  bool m_samplesReset = false;
};

}  // namespace shardscope::ui
