// RunControl: carries the dashboard's stop and launch requests to backend/lifecycle's
// RunLifecycle, off the GUI thread. A stop re-attaches to the run's ranks through its recorded
// location and asks for a graceful stop (SIGKILL follows after the grace period, on the handle's
// timer in the control thread); the process that follows the run records its end. A launch
// starts the experiment as a detached run whose supervisor (`shardscope-cli supervise RUN`
// beside this executable) follows it in its own session, so the run outlives the dashboard; an
// experiment with a [search] table starts `shardscope-cli sweep EXP` in its own session instead.
#pragma once

#include <QObject>
#include <QThread>

#include <atomic>

#include "backend/lifecycle/runlifecycle.h"

namespace shardscope::app {

class RunControl : public QObject {
  Q_OBJECT

 public:
  /// `settings`: the run log, and shardscope-cli as the supervisor; `graceS`: the stop grace.
  RunControl(backend::RunLifecycle::Settings settings, int graceS, QObject* parent = nullptr);
  ~RunControl() override;

 public slots:
  void stop(qint64 runId, const QString& runName);
  /// Starts the experiment file as a detached run in this run log (a sweep when it has [search]).
  void launch(const QString& experimentPath);
  /// The builder's Launch option: runs launched from now replan an attempt that runs out of
  /// memory (RunLifecycle::startDetached's replanOnOom; a sweep follows search.on_oom).
  void setReplanOnOom(bool on);
  /// Resumes a stopped or failed run from its newest checkpoint (a new attempt, detached).
  void resume(qint64 runId, const QString& runName);
  /// Starts a new run from run `runId`'s sharded checkpoint of `step`, detached
  /// (RunLifecycle::startFromCheckpoint).
  void resumeFromCheckpoint(qint64 runId, const QString& runName, qint64 step);
  /// Pauses, resumes or stops the sweep of study `studyId` (named `name` in messages).
  void steerSweep(qint64 studyId, const QString& name, backend::StudyControl control);
  /// Prunes or stops one running trial of a sweep.
  void requestTrial(qint64 runId, const QString& runName, backend::TrialRequest request);
  /// Starts again the sweep of study `studyId` (named `name`) whose process died.
  void adoptSweep(qint64 studyId, const QString& name);
  /// Starts `shardscope-cli autotune` of the experiment file in its own session, recorded as
  /// study `study` in this run log (autotuneStarted), after the checks it would fail on first:
  /// the experiment and its device budget (autotuneFailed, with the message naming the field).
  void autotune(const QString& experimentPath, const QString& study, const QString& objective,
                double budgetMinutes, int steps, int warmup);
  /// Acts on run log `path` from now (File > Open): its runs folder beside it.
  void setRunLog(const QString& path);

 signals:
  /// What happened, for the status bar ("stop sent to run-3", or why not).
  void message(const QString& text);
  /// The autotune recording study `study` runs as process `pid`, its output in `log`.
  void autotuneStarted(const QString& study, qint64 pid, const QString& log);
  /// The autotune of study `study` did not start: why.
  void autotuneFailed(const QString& study, const QString& message);

 private:
  /// Logs `text` and emits it as message().
  void say(const QString& text);
  /// Says how the request `verb` (capitalised: "Stop") sent to `target` went: "VERB sent to
  /// TARGET", or "Could not verb TARGET: why".
  void sayRequest(const Result<void>& done, const QString& verb, const QString& target);

  QThread m_thread;
  QObject* m_context = nullptr;  // lives in m_thread; owns the handles being stopped
  backend::RunLifecycle m_lifecycle;
  int m_graceS;
  std::atomic<bool> m_replanOnOom{false};
};

}  // namespace shardscope::app
