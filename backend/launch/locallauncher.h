// LocalLauncher: every rank of a run on this machine, each in its own session with its output in
// the run directory, so the ranks outlive the backend. See locallauncher.cpp for the rendezvous
// port, the environment each rank gets and the failure policy.
#pragma once

#include <QDeadlineTimer>
#include <QHash>
#include <QList>
#include <QTimer>

#include "backend/launch/launcher.h"

class QSocketNotifier;

namespace shardscope::backend {

/// Starts runs on this machine with the torchrun environment (launch.kind = "local").
class LocalLauncher final : public Launcher {
 public:
  /// `attachGraceS`: SIGTERM-to-SIGKILL grace for runs found by attach() (the location does
  /// not carry launch.grace_s).
  explicit LocalLauncher(int attachGraceS = 5) : m_attachGraceS(attachGraceS) {}

  QString kind() const override { return QStringLiteral("local"); }
  [[nodiscard]] Result<std::unique_ptr<RunHandle>> start(const LaunchRequest& request) override;
  [[nodiscard]] Result<std::unique_ptr<RunHandle>> attach(const RunLocation& location) override;

  /// Where rank 0 publishes the TCP port it listens on (SHARDSCOPE_RDZV_FILE), in a run dir.
  static QString portFile(const QString& runDir);

 private:
  int m_attachGraceS;
};

/// A local run: watches each rank through a pidfd (a timer where pidfds are missing), and ends
/// the run itself when a rank fails: SIGTERM to every other rank, SIGKILL after the grace.
class LocalRunHandle final : public RunHandle {
  Q_OBJECT
 public:
  LocalRunHandle(RunLocation location, int graceS, QObject* parent = nullptr);
  ~LocalRunHandle() override;

  RunLocation location() const override { return m_location; }
  QList<RankState> ranks() const override;
  Result<QByteArray> readEvents(int rank, qint64 offset, qint64 maxBytes) override;
  Result<QByteArray> readLog(int rank, qint64 offset, qint64 maxBytes) override;
  Result<RankFileStat> statRankFile(int rank, RankFile file) override;
  void stop() override;
  void kill() override;

  /// True once every rank has exited and no process is left in the ranks' sessions.
  bool finished() const;

 signals:
  /// Rank `rank` failed (killed by a signal, non-zero exit, or gone without `done`) and the
  /// handle is ending the other ranks; `reason` is a sentence for the run's error.
  void rankFailed(int rank, const QString& reason);

 private:
  struct Rank {
    RankState state;
    qint64 pid = 0;
    qint64 startTicks = 0;
    int pidfd = -1;
    QSocketNotifier* notifier = nullptr;
    qint64 eventsSize = -1;
    qint64 logSize = -1;
  };

  void watch(int rank);
  void unwatch(Rank& r);
  void checkRank(int rank);
  void onRankExited(int rank);
  bool exitedWithDone(int rank) const;
  void doom(int rank, int sig);
  void armGraceTimer();
  void onGraceTimer();
  void poll();
  void reportExitedAtStart();
  bool checkGrowth();
  Result<QByteArray> readFile(const QString& path, qint64 offset, qint64 maxBytes) const;
  QString eventsPath(int rank) const;
  QString logPath(int rank) const;

  RunLocation m_location;
  int m_graceS;
  QList<Rank> m_ranks;
  QHash<int, QDeadlineTimer> m_killAt;  // rank -> when its session gets SIGKILL
  QTimer m_pollTimer;
  QTimer m_graceTimer;
  QTimer m_startTimer;  // reports ranks found already exited, from the event loop
  QList<int> m_exitedAtStart;
  bool m_failing = false;
};

}  // namespace shardscope::backend
