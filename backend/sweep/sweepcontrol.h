// SweepControl: carries out in the process that runs a sweep what a user asked of it from
// any other process (the GUI, `shardscope-cli study pause|resume|stop`, `prune`), through the
// run log (schema v5): it polls the study's control and its trials' pending requests, prunes or
// stops the trials its TrialRunner runs, clears each request it handled, and tells the sweep
// loop when to ask for no more trials (pause), to go on (run) or to end (stop). It also stamps
// the study as fed by this process (schema v6) every RunStore::kSweepStampMs, and clears the
// stamp when destroyed, so a sweep whose process died is seen as such (RunStore::sweepAlive).
#pragma once

#include <QObject>
#include <QTimer>

#include <memory>

#include "backend/store/runstore.h"

namespace shardscope::backend {

class TrialRunner;

class SweepControl : public QObject {
  Q_OBJECT
 public:
  /// Reads the run log every `pollMs`. `store` and `runner` must outlive it.
  SweepControl(RunStore& store, qint64 studyId, TrialRunner& runner, int pollMs = 300,
               QObject* parent = nullptr);
  ~SweepControl() override;

  /// Sets the study's control to `run` (a sweep that starts goes on, whatever the last one was
  /// told), stamps the study as this process's and starts polling.
  [[nodiscard]] Result<void> start();
  StudyControl control() const { return m_control; }
  /// Reads the run log now (also done every pollMs).
  void poll();

 signals:
  /// The user paused, resumed or stopped the sweep. On stop the running trials were told to stop.
  void controlChanged(shardscope::backend::StudyControl control);
  /// A trial's request was carried out (false: the trial had ended, or runs elsewhere).
  void trialRequestHandled(qint64 trialNumber, shardscope::backend::TrialRequest request,
                           bool done);

 private:
  RunStore& m_store;
  qint64 m_studyId;
  TrialRunner& m_runner;
  std::unique_ptr<RunReader> m_reader;
  QTimer m_timer;
  QTimer m_stampTimer;
  StudyControl m_control = StudyControl::run;
};

}  // namespace shardscope::backend
