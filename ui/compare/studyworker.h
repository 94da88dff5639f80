// StudyWorker: the Compare panel's reads of the study tables (schema v3) and of the overlay's
// loss curves, in its own thread with its own read-only RunReader, so the GUI thread never runs
// a query. The panel asks again whenever RunLog delivers the sweep (the run log changed).
// TODO(lead): this belongs in ui/data/RunLogWorker (SweepData carrying the study); see the report.
#pragma once

#include <QObject>
#include <QThread>

#include <optional>

#include "backend/store/runreader.h"
#include "ui/compare/studyplots.h"

namespace shardscope::ui::compare {

class StudyWorker : public QObject {
  Q_OBJECT

 public slots:
  /// Reads the newest study of experiment `experimentId` from `path` and the loss of `curveRuns`.
  void load(const QString& path, qint64 experimentId, const QList<qint64>& curveRuns);

 signals:
  void loaded(const shardscope::ui::compare::StudyInfo& info);
  void failed(const QString& message);

 private:
  [[nodiscard]] Result<StudyInfo> read(qint64 experimentId, const QList<qint64>& curveRuns);

  QString m_path;
  std::optional<backend::RunReader> m_reader;
};

/// Owns the worker's thread; posts requests and hands results back on the GUI thread.
class StudyLoader : public QObject {
  Q_OBJECT

 public:
  explicit StudyLoader(QObject* parent = nullptr);
  ~StudyLoader() override;
  void request(const QString& path, qint64 experimentId, const QList<qint64>& curveRuns);

 signals:
  void loaded(const shardscope::ui::compare::StudyInfo& info);
  void failed(const QString& message);

 private:
  QThread m_thread;
  StudyWorker* m_worker = nullptr;
};

}  // namespace shardscope::ui::compare
