// RunFollower: how the lifecycle follows a run. A RunMonitor holds the run's lease and records its
// events and status in the run log while this thread's event loop runs: the sweep's trial runner
// follows many runs at once this way, and RunLifecycle::follow one run in a nested loop.
#pragma once

#include <QList>
#include <QObject>
#include <QTimer>

#include <memory>

#include "backend/launch/launcher.h"
#include "backend/store/runstore.h"
#include "spec/result.h"
#include "spec/status.h"

namespace shardscope::backend {

class RunMonitor;

class RunFollower : public QObject {
  Q_OBJECT
 public:
  /// Follows run `runId` through `handle` (its ranks, started by RunLifecycle::startAttempt or
  /// attached by RunLifecycle::attach) once start() is called. `store` must outlive it.
  RunFollower(RunStore& store, qint64 runId, std::unique_ptr<RunHandle> handle,
              QObject* parent = nullptr);
  /// The same through a handle the caller keeps; it must outlive the follower.
  RunFollower(RunStore& store, qint64 runId, RunHandle& handle, QObject* parent = nullptr);
  ~RunFollower() override;

  /// Takes the run's lease and reads what the ranks wrote so far; `finished` may come from here
  /// (a run that ended before anyone followed it). An error when the store fails or another live
  /// process follows the run.
  [[nodiscard]] Result<void> start();
  /// True when the last start() failed because another live process follows the run.
  bool refused() const;
  bool isFinished() const;

  qint64 runId() const { return m_runId; }
  /// The monitor's view of the run: running until `finished`, then its recorded status.
  spec::RunStatus status() const;
  QString runDir() const;          ///< the folder the ranks run in (a remote path for SSH, Slurm)
  QList<RankState> ranks() const;  ///< how each rank runs or ended, as its launcher sees it
  /// Up to maxBytes of rank `rank`'s events file from byte `offset` (empty when nothing new).
  [[nodiscard]] Result<QByteArray> readEvents(int rank, qint64 offset, qint64 maxBytes);

  /// Reports stalled() after `seconds` without an event while every rank lives (0: never).
  void setStallAfter(double seconds);

  /// A graceful stop: SIGTERM to every rank now, SIGKILL after `graceS` seconds to any left.
  void stop(double graceS);
  /// SIGKILL to every rank now.
  void kill();

 signals:
  /// The run's status is final and recorded. Not a place to destroy this follower: defer it.
  void finished();
  /// A rank's files grew (best effort: a reader polls too).
  void filesGrew();
  /// Rank 0 reported a training step (its loss, and the event's unix time `t`).
  void stepReached(qint64 step, double loss, double t);
  /// Another process took the run's lease: this one stopped following.
  void leaseLost(const QString& message);
  /// No event for `silentS` seconds while every rank lives (RunMonitor::stalled).
  void stalled(double silentS);

 private:
  qint64 m_runId = 0;
  std::unique_ptr<RunHandle> m_owned;  // empty when the caller keeps the handle
  RunHandle* m_handle = nullptr;
  std::unique_ptr<RunMonitor> m_monitor;  // after the handle: destroyed first, it reads through it
  QTimer m_killTimer;
};

}  // namespace shardscope::backend
