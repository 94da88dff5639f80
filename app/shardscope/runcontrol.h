// RunControl: carries the dashboard's stop requests to the backend, off the GUI thread. A worker
// thread reads the run's recorded location, re-attaches to its ranks through the matching
// launcher and asks for a graceful stop (SIGKILL follows after the grace period, on the
// handle's timer in that thread). The process that follows the run records its end. A launch
// from the builder starts `shardscope-cli run --detach` beside this executable: its supervisor
// follows the run in its own session, so the run outlives the dashboard.
#pragma once

#include <QObject>
#include <QThread>

namespace shardscope::app {

class RunControl : public QObject {
  Q_OBJECT

 public:
  RunControl(QString dbPath, int graceS, QObject* parent = nullptr);
  ~RunControl() override;

 public slots:
  void stop(qint64 runId, const QString& runName);
  /// Starts the experiment file as a detached run in this run log.
  void launch(const QString& experimentPath);

 signals:
  /// What happened, for the status bar ("stop sent to run-3", or why not).
  void message(const QString& text);

 private:
  QThread m_thread;
  QObject* m_context = nullptr;  // lives in m_thread; owns the handles being stopped
  QString m_dbPath;
  int m_graceS;
};

}  // namespace shardscope::app
