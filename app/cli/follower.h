// RunFollower: follows one run's ranks into the run log until the run ends, and decides its final
// status. Interim: this is the job of backend/monitor (issue #5), which did not exist when the
// CLI was written; once it lands the CLI should drive the monitor instead and this file goes.
// It reads each rank's events and log from the offsets stored with the rows (so a second
// follower catches up without loss or duplication), holds the run's lease while it follows, and
// records: complete (every rank's `done` says complete), stopped, oom (an `error` of kind oom),
// failed (anything else, with the first rank's last words as the error).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <functional>
#include <vector>

#include "backend/launch/launcher.h"
#include "backend/store/runstore.h"
#include "trainer/spec/events.h"

namespace shardscope::cli {

/// What the attached `run` shows on its progress line.
struct Progress {
  qint64 step = 0;
  qint64 maxSteps = 0;
  double loss = 0;
  double etaS = -1;  // seconds left; -1 while unknown
};

class RunFollower : public QObject {
  Q_OBJECT
 public:
  RunFollower(backend::RunStore& store, backend::RunHandle& handle, qint64 runId, qint64 maxSteps);
  ~RunFollower() override;

  /// Takes the run's lease and loads the stored offsets. Returns false (and follows nothing)
  /// when another live process holds the lease; an error when the store fails.
  [[nodiscard]] Result<bool> begin();
  /// Runs the event loop until every rank has exited and the status is recorded.
  spec::RunStatus followToEnd();
  /// Asks the ranks for a graceful stop (SIGTERM; SIGKILL after launch.grace_s).
  void requestStop();
  /// Called on each new step of rank 0.
  std::function<void(const Progress&)> onProgress;
  /// The error recorded with a failed run (empty otherwise).
  const QString& error() const { return m_error; }

 private:
  struct RankStream {
    qint64 eventsOffset = 0;
    qint64 logOffset = 0;
    qint64 lastSeq = -1;
    bool done = false;
    spec::DoneStatus doneStatus = spec::DoneStatus::complete;
    std::vector<double> objective;
    bool hasError = false;
    spec::ErrorEvent error;
    QString lastLogLine;  // the rank's last stderr line: its last words when it crashes
  };

  void poll();
  Result<void> drainEvents(int rank);
  Result<void> drainLog(int rank);
  void takeEvent(int rank, const spec::Event& event, backend::FileChunk& chunk, qint64 lineOffset,
                 const QByteArray& line);
  bool allExited() const;
  void finish();
  spec::RunStatus decide();
  QString lastWords(int rank) const;

  backend::RunStore& m_store;
  backend::RunHandle& m_handle;
  qint64 m_runId;
  qint64 m_maxSteps;
  backend::LeaseRecord m_lease;
  std::vector<RankStream> m_ranks;
  QTimer m_pollTimer;
  QTimer m_leaseTimer;
  QString m_launcherReason;  // a rank that failed by the launcher's account
  QString m_error;
  bool m_finished = false;
  bool m_stopRequested = false;
  spec::RunStatus m_status = spec::RunStatus::running;
  double m_firstStepT = -1;
  qint64 m_firstStep = 0;
};

}  // namespace shardscope::cli
