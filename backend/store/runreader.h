// RunReader: a read-only connection to the run log, for one thread. Every query sees whole
// committed transactions and never blocks the writer (SQLite's WAL, PostgreSQL's MVCC).
#pragma once

#include <QHash>
#include <QList>
#include <QString>

#include <optional>
#include <vector>

#include "backend/store/db.h"
#include "backend/store/rungroups.h"
#include "backend/store/runrecords.h"
#include "backend/store/runtags.h"
#include "backend/store/storeclock.h"
#include "backend/store/verdicts.h"
#include "spec/calibration.h"
#include "spec/result.h"

namespace shardscope::backend {

/// A point of a metric curve.
struct MetricPoint {
  qint64 step = 0;
  double value = 0;
  int rank = 0;
  double time = 0;
};

/// A metric's last value (at the highest step) and its lowest value, of one run and rank.
struct MetricExtremes {
  double last = 0;
  double lowest = 0;
};

/// A run's figures over its steps, for colouring trials (nullopt: the run has none).
struct RunFigures {
  std::optional<double> mfu;  ///< mean `mfu` of rank 0's steps
  /// Per rank the mean over its steps of phase.comm_exposed / phase.wall (steps with a
  /// positive wall), averaged over the ranks that have phases.
  std::optional<double> exposedShare;
};

class RunReader {
 public:
  /// Opens `path` (a file, or a postgresql:// URL) read-only; the run log must exist
  /// (RunStore::open creates it).
  [[nodiscard]] static Result<RunReader> open(const QString& path);

  /// Every run, newest first.
  [[nodiscard]] Result<std::vector<RunRecord>> listRuns();
  [[nodiscard]] Result<std::optional<RunRecord>> run(qint64 id);
  [[nodiscard]] Result<std::optional<RunRecord>> runByName(const QString& name);

  /// Names of the metrics a run has.
  [[nodiscard]] Result<QStringList> metricKeys(qint64 runId);
  /// One metric of a run in step order; afterStep: only steps > afterStep.
  [[nodiscard]] Result<std::vector<MetricPoint>> metric(qint64 runId, const QString& key,
                                                        qint64 afterStep = -1);
  /// One rank's points of metric `key` for several runs in one statement (a server answers
  /// thousands of curves in a few round trips, not one each), each run's in step order; only
  /// steps > afterStep. Runs without the metric are absent.
  [[nodiscard]] Result<QHash<qint64, std::vector<MetricPoint>>> metricOfRuns(
      const QList<qint64>& runIds, const QString& key, int rank, qint64 afterStep = -1);
  /// The figures of each of `runIds` (runs with neither are absent), in one statement per
  /// 500 runs.
  [[nodiscard]] Result<QHash<qint64, RunFigures>> runFigures(const QList<qint64>& runIds);
  [[nodiscard]] Result<qint64> metricCount(qint64 runId);
  /// The highest step of metric `key` per run (runs without it are absent), in one statement.
  [[nodiscard]] Result<QHash<qint64, qint64>> lastSteps(const QString& key);
  /// Metric `key`'s last and lowest value of rank `rank` per run (runs without it are absent),
  /// in one statement (the runs filter's `loss<1.6` and `best.loss<1.6`).
  [[nodiscard]] Result<QHash<qint64, MetricExtremes>> lastAndBest(const QString& key, int rank = 0);
  /// Changes whenever another connection (any process) commits (SQLite: PRAGMA data_version;
  /// PostgreSQL: the data_version row every write transaction bumps).
  [[nodiscard]] Result<qint64> dataVersion();

  /// Events of one rank of every attempt, in (attempt, file) order; afterId: only rows with a
  /// larger id. The other per-rank readers below see the run's current attempt only.
  [[nodiscard]] Result<std::vector<EventRow>> events(qint64 runId, int rank, qint64 afterId = 0);
  /// Events of one rank of every attempt whose kind is one of `kinds` ("ckpt", "eval"), in
  /// (attempt, file) order, in one statement (the checkpoint browser).
  [[nodiscard]] Result<std::vector<EventRow>> eventsOfKinds(qint64 runId, int rank,
                                                            const QStringList& kinds);
  [[nodiscard]] Result<qint64> eventCount(qint64 runId, int rank);
  /// The highest seq stored for a rank (-1 when none).
  [[nodiscard]] Result<qint64> maxSeq(qint64 runId, int rank);
  /// The last `kind` event of a rank (e.g. its last "error").
  [[nodiscard]] Result<std::optional<EventRow>> lastEvent(qint64 runId, int rank,
                                                          const QString& kind);
  /// Log lines of one rank in file order (both files); the last `limit` when limit > 0.
  [[nodiscard]] Result<std::vector<LogLine>> logLines(qint64 runId, int rank, int limit = 0);
  /// Every attempt's anomalies, or those of `attempt` alone.
  [[nodiscard]] Result<std::vector<Anomaly>> anomalies(qint64 runId,
                                                       std::optional<int> attempt = {});

  /// The stored read offset of a rank's file in the current attempt (0 when none).
  [[nodiscard]] Result<qint64> offset(qint64 runId, int rank, RankFile file);
  [[nodiscard]] Result<std::optional<LeaseRecord>> lease(qint64 runId);
  /// The newest complete sharded checkpoint of attempt `attempt` of a run, unless that attempt
  /// reported an oom or config error; nullopt when there is none.
  [[nodiscard]] Result<std::optional<ResumePoint>> resumePoint(qint64 runId, int attempt);
  /// A random token of this run log (made once, with the file's schema 4): remote run folders
  /// carry it, so two run logs that both have a run 1 named "exp-1" never share one.
  [[nodiscard]] Result<QString> runLogToken();
  [[nodiscard]] Result<std::vector<HostRecord>> hosts();

  /// The experiment a run was resolved from (its file's path and resolved TOML); nullopt when
  /// no row has that id.
  [[nodiscard]] Result<std::optional<ExperimentRecord>> experiment(qint64 id);
  /// Every study, newest first (schema v3).
  [[nodiscard]] Result<std::vector<StudyRecord>> listStudies();
  [[nodiscard]] Result<std::optional<StudyRecord>> study(qint64 id);
  [[nodiscard]] Result<std::optional<StudyRecord>> studyByName(const QString& name);
  /// The trials of a study with a request of the user pending (schema v5), in trial order.
  [[nodiscard]] Result<std::vector<RunRecord>> requestedTrials(qint64 studyId);
  /// The runs of a study in trial-number order (params, status, objective values filled in).
  [[nodiscard]] Result<std::vector<RunRecord>> trials(qint64 studyId);

  /// Every tag of the run log by name, with how many runs and studies carry it (schema v9).
  [[nodiscard]] Result<std::vector<TagRecord>> knownTags();
  /// The tags of one run or study, by name.
  [[nodiscard]] Result<QStringList> tags(TagOwner owner, qint64 id);
  /// The tags of every run (or every study) that carries any, each list by name, in one
  /// statement (the runs table reads them all at once).
  [[nodiscard]] Result<QHash<qint64, QStringList>> allTags(TagOwner owner);
  /// The non-empty notes of every run (or every study), in one statement.
  [[nodiscard]] Result<QHash<qint64, QString>> allNotes(TagOwner owner);
  /// The note of one run or study ('' when it has none); nullopt when it is not in the run log.
  [[nodiscard]] Result<std::optional<QString>> note(TagOwner owner, qint64 id);

  /// Run `runId`'s verdicts on its probe answers (schema v11), by step then probe.
  [[nodiscard]] Result<std::vector<VerdictRecord>> verdicts(qint64 runId);
  /// Run `runId`'s verdicts counted (zero when it has none).
  [[nodiscard]] Result<VerdictCounts> verdictCounts(qint64 runId);
  /// The counts of every run that has a verdict, in one statement (the runs table).
  [[nodiscard]] Result<QHash<qint64, VerdictCounts>> verdictCounts();

  /// The estimate's corrections by spec::calibration_key, from the run log's completed runs: per
  /// run (its current attempt) the largest over its ranks of measured peak (`mem.cuda_peak` on
  /// CUDA, else `mem.peak`, the highest of its `mem` events) over `hello.mem_estimate`, then a
  /// robust mean per key (spec::robust_calibration). A run without a hello estimate or a mem
  /// event, or whose experiment no longer parses, is left out. Two statements in all.
  [[nodiscard]] Result<spec::Calibrations> memoryCalibrations();

  /// Every group of the run log by name, with its run counts (schema v12).
  [[nodiscard]] Result<std::vector<GroupRecord>> groups();
  /// Group `name`; nullopt when the run log has none of that name.
  [[nodiscard]] Result<std::optional<GroupRecord>> group(const QString& name);
  /// The ids of group `groupId`'s runs, ascending.
  [[nodiscard]] Result<std::vector<qint64>> groupRuns(qint64 groupId);
  /// The groups of every run that is in any, each list by name, in one statement (the runs
  /// table reads them all at once).
  [[nodiscard]] Result<QHash<qint64, QStringList>> allGroups();

  /// "ok" when the run log is sound (SQLite: PRAGMA integrity_check).
  [[nodiscard]] Result<std::string> integrityCheck();
  Db& db() { return m_db; }
  /// The clocks lease() measures a heartbeat's age with (storeclock.h; the machine's unless
  /// set: RunStore::reader() passes its own).
  void setClock(const StoreClock& clock) { m_clock = &clock; }

 private:
  explicit RunReader(Db db) : m_db(std::move(db)) {}
  Result<std::vector<RunRecord>> queryRuns(const std::string& where, qint64 id,
                                           const QString& name);
  Result<std::vector<StudyRecord>> queryStudies(const std::string& where, qint64 id,
                                                const QString& name);

  Db m_db;
  const StoreClock* m_clock = &StoreClock::system();
};

}  // namespace shardscope::backend
