// SweepLoop: one study's sweep on this machine's slots (or as Slurm jobs, at most
// search.concurrency queued or running): ask (study.h) -> run the trial (trialrunner.h,
// scheduler.h) -> the runner records its end in the run log, which the next ask reads.
// Intermediate `eval` values go through the study's pruner; the user's pause, resume, stop and
// per-trial requests arrive through SweepControl. Started again on the same study it continues:
// the trials a killed sweep left running are reattached (their ranks outlive it) and followed to
// their own end; those that never launched are failed as lost and retried. The experiment's
// [notify] commands run here, in the sweep's own process (started from the CLI or the
// dashboard): each trial's end, a trial's stall, and the sweep's end in finish(). It prints
// nothing: each event is a signal, and the caller (the CLI's `sweep`, a future autotune) says it
// its way.
//
// Use: readInput -> (prepareData) -> openStudy -> SweepLoop -> start -> the event loop runs until
// ended() -> finish.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QString>

#include <optional>
#include <string>
#include <vector>

#include "backend/notifycommand.h"
#include "backend/store/runreader.h"
#include "backend/sweep/scheduler.h"
#include "backend/sweep/study.h"
#include "backend/sweep/sweepcontrol.h"
#include "backend/sweep/trialrunner.h"
#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// What a sweep reads before it touches the run log (SweepLoop::readInput).
struct SweepInput {
  QString experimentPath;              ///< absolute
  std::vector<std::string> overrides;  ///< "dotted.key=value", as `sweep --set`
  /// The experiment as overridden (paths unchecked): the one parse of the file this sweep makes;
  /// the study, the check of the overrides and every trial start from it.
  spec::Experiment experiment;
  search::SearchSpace space;  ///< its [search] section
  /// `experiment` for shardtrain trials; none for a program.
  std::optional<spec::Experiment> shape;
};

/// A study opened for a sweep (SweepLoop::openStudy).
struct SweptStudy {
  search::Study study;
  bool continued = false;  ///< it existed: this sweep continues it
};

/// How a sweep ended (SweepLoop::finish).
struct SweepOutcome {
  search::StudySummary summary;
  bool stopped = false;  ///< stopped by the user: sweeping again continues it
};

class SweepLoop : public QObject {
  Q_OBJECT
 public:
  struct Options {
    QString runsRoot;  ///< TrialRunner::Options::runsRoot
    QString trainer;   ///< TrialRunner::Options::trainer (the shardtrain beside the caller)
  };

  /// Reads the experiment at `experimentPath` with `overrides`, once, and its [search] section (a
  /// Slurm launch of shardtrain trials must name launch.device_memory_gib). Every error is the
  /// input's.
  [[nodiscard]] static Result<SweepInput> readInput(const QString& experimentPath,
                                                    std::vector<std::string> overrides);
  /// Makes the bundled demo's data for local shardtrain trials (nothing otherwise).
  [[nodiscard]] static Result<void> prepareData(const SweepInput& input);
  /// Opens the study `name` (empty: [search] name), creating it on the first sweep with
  /// `maxRetries`; a sweep started at the same moment may create it first: then it is opened.
  /// Every error is the input's (overrides an existing study refuses, an invalid study).
  [[nodiscard]] static Result<SweptStudy> openStudy(RunStore& store, const SweepInput& input,
                                                    const QString& name, int maxRetries);

  /// Sets up the runner, the scheduler and the control of `study`'s sweep. The study's space
  /// takes the sweep settings an override may change on an existing study from `input`.
  /// `store` must outlive the loop.
  SweepLoop(RunStore& store, search::Study study, const SweepInput& input, const Options& options,
            QObject* parent = nullptr);
  ~SweepLoop() override;

  const search::Study& study() const { return m_study; }
  /// Trials that may run at once.
  int slotCount() const { return m_scheduler.slotCount(); }

  /// Marks the study running, starts following the user's control, reattaches the trials a
  /// killed sweep left running (trialReattached / trialNotReattached, before it returns) and
  /// asks for the first trials from the event loop.
  [[nodiscard]] Result<void> start();
  /// Once ended() was emitted and control is back in the caller: records how the study ended
  /// (stopped by the user; complete unless another process still runs some of its trials) and
  /// returns its summary. An error of the loop itself (an ask refused) is returned here.
  [[nodiscard]] Result<SweepOutcome> finish();

 signals:
  /// A trial was asked for and queued (`attempt` > 0: a retry of a failed or lost trial).
  void trialStarting(qint64 number, int attempt, const shardscope::search::TrialParams& params);
  /// A trial ran out of memory and runs again in another plan (TrialRunner::trialReplanned).
  void trialReplanned(qint64 number, qint64 runId, int attempt, const QString& change);
  /// A trial ended (stopped by the user, or the state the study recorded).
  void trialEnded(const shardscope::backend::TrialOutcome& outcome);
  /// A trial could not even be recorded (the run log refused it).
  void trialRejected(qint64 number, const QString& error);
  /// A trial a killed sweep left running is followed again.
  void trialReattached(qint64 number, const shardscope::search::TrialParams& params);
  /// A trial a killed sweep left running could not be followed again.
  void trialNotReattached(qint64 number, const QString& error);
  /// An intermediate value of a trial could not be recorded (the trial is not pruned for it).
  void reportFailed(qint64 number, const QString& error);
  /// The user paused, resumed or stopped the sweep (SweepControl::controlChanged).
  void controlChanged(shardscope::backend::StudyControl control);
  /// A user's request for one trial was carried out (SweepControl::trialRequestHandled).
  void trialRequestHandled(qint64 number, shardscope::backend::TrialRequest request, bool done);
  /// Nothing runs and nothing is left to ask (an error, search.timeout_s or the user's stop
  /// also end the asking): return to the caller, which calls finish(). May come again.
  void ended();

 private:
  void fill();
  bool judge(qint64 number, qint64 step, double value);
  /// The facts a [notify] command gets about run `runId` (what the run log holds of it).
  NotifyFacts factsOf(qint64 runId);
  /// Runs [notify] on_sweep_end for `outcome` and waits for every command still running.
  void notifySweepEnd(const SweepOutcome& outcome, const QString& status);

  RunStore& m_store;
  search::Study m_study;
  TrialRunner m_runner;
  Scheduler m_scheduler;
  SweepControl m_control;
  NotifyCommands m_notify;
  std::optional<RunReader> m_notifyReader;  // opened at the first command that needs a run's facts
  QElapsedTimer m_clock;
  bool m_stopped = false;  // an error, search.timeout_s or the user's stop: ask no more
  std::string m_error;
  // Asks the run log could not take in a row (a lost server, a full disk), waited out by
  // kRecordRetry (retrypolicy.h); past its tries (about 10 minutes) the sweep ends with the error.
  int m_askTries = 0;
  bool m_askWaiting = false;  // a retry of the ask is scheduled
};

/// What a TrialRunner of `study`'s sweep (SweepLoop's or PbtLoop's) is given: the sweep's
/// experiment and overrides, its runs folder and trainer.
TrialRunner::Options sweepRunnerOptions(const search::Study& study, const SweepInput& input,
                                        const SweepLoop::Options& options);

}  // namespace shardscope::backend
