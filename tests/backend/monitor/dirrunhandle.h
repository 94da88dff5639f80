// DirRunHandle (tests only): a RunHandle over a local run directory whose ranks were started by
// the test itself. It reads the real events-rank-N.jsonl and rank-N.log files and watches real
// pids; it launches nothing. A rank with pid 0 has no process: it is running until the test
// calls markExited().
#pragma once

#include <QList>
#include <QString>

#include "backend/launch/launcher.h"

namespace shardscope::backend {

class DirRunHandle : public RunHandle {
  Q_OBJECT
 public:
  DirRunHandle(QString runDir, QList<qint64> pids, QObject* parent = nullptr);

  RunLocation location() const override;
  QList<RankState> ranks() const override;
  Result<QByteArray> readEvents(int rank, qint64 offset, qint64 maxBytes) override;
  Result<QByteArray> readLog(int rank, qint64 offset, qint64 maxBytes) override;
  Result<RankFileStat> statRankFile(int rank, RankFile file) override;
  void stop() override;
  void kill() override;

  /// For a rank without a process (pid 0): it has now exited with `exitCode`.
  void markExited(int rank, int exitCode);
  /// How many times stop() was called.
  int stopCalls() const { return m_stopCalls; }

 private:
  Result<QByteArray> readFile(const QString& name, qint64 offset, qint64 maxBytes) const;

  QString m_runDir;
  QList<qint64> m_pids;
  QList<int> m_exitCodes;  // markExited() values; -2: not exited
  int m_stopCalls = 0;
};

}  // namespace shardscope::backend
