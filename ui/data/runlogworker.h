// RunLogWorker: lives in its own thread with its own read-only RunReader. It notices commits to
// the run log by this or another process (the reader's PRAGMA data_version, polled), re-reads
// what the panels watch, and sends plain values by signals.
// Every slot is called through queued connections from RunLog (ui/data/runlog.h).
#pragma once

#include <QHash>
#include <QObject>
#include <QSet>
#include <QTimer>

#include <memory>
#include <optional>
#include <vector>

#include "backend/store/runreader.h"
#include "ui/data/runlogtypes.h"
#include "ui/data/sweepsource.h"

namespace shardscope::ui {

class RunLogWorker : public QObject {
  Q_OBJECT

 public:
  explicit RunLogWorker(int pollMs, QObject* parent = nullptr);

  /// The metric keys the Plots panel draws (the monitor's names).
  static QStringList plottedKeys();

 public slots:
  void open(const QString& path);
  void watchRuns(const QList<qint64>& runIds);
  void watchLog(qint64 runId, int rank, int limit);
  void watchSweep(qint64 experimentId);
  /// Re-reads everything watched now (also done whenever the file changed).
  void refresh();

 signals:
  void opened(bool ok, const QString& message);
  void runsLoaded(const QVector<shardscope::ui::RunSummary>& runs);
  /// New points for the watched runs; `pass` ends with seriesPassDone().
  void seriesLoaded(const QVector<shardscope::ui::SeriesChunk>& chunks);
  void seriesPassDone(const QList<qint64>& runIds);
  void logLoaded(const shardscope::ui::LogSnapshot& log);
  void sweepLoaded(const shardscope::ui::SweepData& sweep);
  void hostsLoaded(const QVector<shardscope::ui::HostSummary>& hosts);
  void failed(const QString& message);

 private:
  void poll();
  void loadRuns();
  void loadSeries();
  void loadSeriesOf(const backend::RunRecord& run, QVector<SeriesChunk>& out);
  void loadLog();
  void loadSweep();
  void loadHosts();
  void report(const Error& error);

  int m_pollMs;
  QString m_path;
  std::optional<backend::RunReader> m_reader;
  QTimer* m_pollTimer = nullptr;
  qint64 m_dataVersion = -1;  // PRAGMA data_version when last read
  std::vector<backend::RunRecord> m_runs;
  QList<qint64> m_watchedRuns;
  // (run, key) -> last step seen per rank; a run is new when absent (its first chunk resets).
  QHash<qint64, QHash<QString, QHash<int, qint64>>> m_seen;
  qint64 m_logRun = -1;
  int m_logRank = 0;
  int m_logLimit = 2000;
  qint64 m_sweep = -2;  // -2: not asked yet; -1: the largest sweep
  ExperimentSweepSource m_sweepSource;
  QString m_lastError;
};

}  // namespace shardscope::ui
