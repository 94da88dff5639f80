// TrialRunner: one search trial = one attempt of a run, started and followed through the run
// lifecycle. start() applies the trial's values to the experiment (as --set overrides for
// shardtrain, as `--name=value` arguments for a program trial; RunLifecycle::experimentForTrial),
// refuses a configuration whose memory estimate exceeds the device budget (infeasible, never
// launched), starts it (RunLifecycle::startAttempt, from the failed attempt's checkpoint on a
// retry: resumeArguments), follows it into the run log (RunFollower), feeds its `eval` events to
// the caller's prune callback (a prune: RunFollower::stop, SIGKILL after search.stop_grace_s) and
// reports the trial's end with its state and objective values. A sweep loop is: ask -> start ->
// (finished)
// -> tell. Scheduler (scheduler.h) runs up to N trials at once on top of it.
#pragma once

#include <QJsonObject>
#include <QObject>
#include <QString>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/lifecycle/runfollower.h"
#include "backend/store/runstore.h"
#include "search/space.h"
#include "search/trial.h"
#include "spec/calibration.h"
#include "spec/estimate.h"
#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// How a trial ended, as the study records it.
struct TrialOutcome {
  qint64 number = 0;
  qint64 runId = 0;
  search::TrialState state = search::TrialState::Failed;
  std::vector<double> values;                   ///< one per objective (complete only)
  std::map<std::int64_t, double> intermediate;  ///< step -> reported eval value
  QString error;                                ///< why it failed/was infeasible; empty otherwise
  QList<RankState> ranks;  ///< how each rank ended, as its launcher saw it (empty: never launched)
  bool stopped = false;    ///< stopped by the user (TrialRunner::stop): the run ends `stopped`
};

/// The budget a trial of `exp` is held against on its target (spec::device_budget over what
/// detectMemory finds: launch.device_memory_gib wins; nvidia-smi locally or on the first SSH
/// host; the host's memory for CPU runs). Slurm without launch.device_memory_gib is an error.
Result<spec::DeviceBudget> budgetFor(const spec::Experiment& exp);

/// A configuration's memory estimate held against a budget (estimateAgainstBudget).
struct BudgetCheck {
  qint64 need = 0;  ///< the estimate's bytes per rank that the budget holds (budgeted_bytes)
  QString over;     ///< why it does not fit (an infeasible trial's error); empty: it fits
  spec::Calibration calibration;  ///< the correction applied to the estimate (runs 0: none)
  /// What the estimate's rows were bounded by: chat data's samples (backend/databound.h), or
  /// nullopt for data.seq_len (other formats, data this machine cannot read). A trial holds it
  /// against the plans of its replan ladder, so they are estimated as this check estimated.
  std::optional<spec::DataBound> rows;
};

/// Holds the per-rank memory estimate of `exp` (at the world shape [launch] asks for) against
/// `budget`: the one check that keeps a sweep's trial and an autotune candidate from starting.
/// A budget of 0 bytes (unknown) holds nothing: everything fits. Errors are the estimate's.
/// `calibrations` (RunReader::memoryCalibrations): the correction of `exp`'s kind of run, when
/// they hold one, is applied to the estimate first (the check holds what runs measured).
Result<BudgetCheck> estimateAgainstBudget(const spec::Experiment& exp,
                                          const spec::DeviceBudget& budget,
                                          const spec::Calibrations& calibrations = {});

/// The run-log status of a trial state.
spec::RunStatus runStatusOf(search::TrialState state);

class TrialRunner : public QObject {
  Q_OBJECT
 public:
  struct Options {
    qint64 studyId = 0;  ///< runs are created as trials of this study (createTrialRun)
    QString runsRoot;    ///< run directories: runsRoot/study-<id>/trial-<number>
    /// Per-rank memory budget in bytes held against the estimate's total, winning over
    /// everything; unset: budgetFor() (launch.device_memory_gib, the target's GPU memory from
    /// nvidia-smi, or its physical memory divided by the ranks per node for CPU runs).
    std::optional<qint64> deviceBudgetBytes;
    /// launch.trainer for shardtrain trials whose launch.trainer is a bare name, when not empty
    /// (the shardtrain built beside the caller); a path in the experiment wins.
    QString trainer;
    /// "dotted.key=value" overrides (sweep --set) applied to the experiment before a trial's own
    /// values.
    std::vector<std::string> overrides;
    /// The experiment as the caller parsed it with `overrides` (paths unchecked): trials start
    /// from it and the file is not read again. None: the runner reads the file once.
    std::optional<spec::Experiment> experiment;
  };
  /// Called for each `eval` event of a running trial (rank 0) with the value of the first
  /// objective's metric; true prunes the trial. Its history (the intermediate values) is in the
  /// outcome.
  using PruneCallback = std::function<bool(qint64 number, qint64 step, double value)>;

  /// `experimentPath`: the experiment file (program paths and overrides resolve against it);
  /// `space`: its parsed [search] section. `store` must outlive the runner.
  TrialRunner(RunStore& store, const QString& experimentPath, search::SearchSpace space,
              Options options, QObject* parent = nullptr);
  ~TrialRunner() override;

  void setPruneCallback(PruneCallback callback) { m_prune = std::move(callback); }
  /// One segment of a longer training (population-based training, pbtloop.h).
  struct Segment {
    /// "dotted.key=value" applied after the trial's values (its last step, its checkpoints).
    std::vector<std::string> overrides;
    /// The sharded checkpoint folder its first attempt resumes from (empty: from scratch). A
    /// retry resumes from its failed attempt's newest checkpoint, else from this one.
    QString resumeFrom;
  };
  /// Makes trial `number` a segment (shardtrain trials; before start() or attach()).
  void setSegment(qint64 number, Segment segment) { m_segments[number] = std::move(segment); }
  /// Trials followed from now on report trialStalled after `seconds` without an event while
  /// their ranks live (RunMonitor's stall); 0: never.
  void setStallAfter(double seconds) { m_stallAfterS = seconds; }
  const search::SearchSpace& space() const { return m_space; }
  /// True when trials run `[search] program` rather than shardtrain.
  bool programTrials() const { return !m_space.program.empty(); }
  /// Ranks (processes) one trial takes on its machine: 1 for a program, else
  /// launch.nproc_per_node of the experiment.
  int ranksPerTrial() const;
  /// True when trials run on this machine (a program, or launch.kind local).
  bool runsHere() const;
  /// Trials started and not yet finished (a launch waiting for the run log counts).
  int running() const { return static_cast<int>(m_trials.size() + m_waiting.size()); }

  /// Starts trial `number` with `params` (active parameters only). Creates its run in the store
  /// unless `runId` names one that exists (a run the study already created). Returns the run
  /// id; trialFinished follows from the event loop, also for a trial that never launched
  /// (infeasible, an invalid configuration, a launch error). A launch that the run log refuses
  /// before any rank starts, with an error that may pass (a lost server, a full disk), is tried
  /// again with a backoff (kLaunchRetry), not counted as a failed attempt; trialStarted
  /// follows once it launches.
  [[nodiscard]] Result<qint64> start(qint64 number, const search::TrialParams& params,
                                     std::optional<qint64> runId = std::nullopt);
  /// Follows trial `number` whose run `runId` was launched by a process that died (a killed
  /// sweep): attaches to its ranks through the stored run location, takes over the run's lease
  /// and follows it to its end like a trial started here (trialFinished with its own result).
  /// Evaluations already written are read without asking the prune callback again. Fails when
  /// the run has no location (it never launched) or another live process follows it.
  [[nodiscard]] Result<void> attach(qint64 number, qint64 runId);
  /// Prunes a running trial now (as if the callback said so); false when it is not running.
  bool prune(qint64 number);
  /// Stops a running trial as the user asked (SIGTERM, SIGKILL after search.stop_grace_s): it
  /// ends `stopped`, which a study never retries; false when it is not running.
  bool stop(qint64 number);
  /// Stops every running trial (stop()).
  void stopAll();

 signals:
  void trialStarted(qint64 number, qint64 runId);
  void trialFinished(const shardscope::backend::TrialOutcome& outcome);
  /// Trial `number`'s attempt `attempt - 1` ran out of memory and attempt `attempt` runs again
  /// with the same values in another plan (search.on_oom = "replan"); `change` says what changed.
  void trialReplanned(qint64 number, qint64 runId, int attempt, const QString& change);
  /// Trial `number`'s run wrote no event for `silentS` seconds while its ranks live.
  void trialStalled(qint64 number, qint64 runId, double silentS);

 private:
  struct Running;
  /// A trial whose launch waits for the run log (start()).
  struct Waiting {
    qint64 runId = 0;
    search::TrialParams params;
    int tries = 0;
    bool stopped = false;  // stop() came first: it ends stopped, never launched
  };

  Result<qint64> createRun(qint64 number, const search::TrialParams& params);
  /// The experiment of a trial with `params`, in the plan `plan` ("field=value" overrides).
  Result<spec::Experiment> experimentFor(const search::TrialParams& params,
                                         const std::vector<std::string>& plan = {},
                                         const Segment* segment = nullptr) const;
  /// The --resume arguments of an attempt of trial `number` (run `attempt`): a retry's from its
  /// failed attempt's newest checkpoint (search.retry_from_checkpoint), a segment's from its
  /// source when that gives none.
  Result<QStringList> resumeArgumentsOf(RunReader& reader, qint64 number,
                                        const RunRecord& attempt) const;
  /// The plan a replan recorded on run `runId` (its params' plan fields), for a retry of it.
  /// The run log's error when it cannot be read now.
  Result<std::vector<std::string>> planOf(qint64 runId) const;
  /// Why `exp` cannot start (its estimate over its budget, or no budget); `rows` gets the bound
  /// the estimate took when it was made (BudgetCheck::rows), for the trial's replans.
  std::optional<QString> infeasibility(const spec::Experiment& exp,
                                       std::optional<spec::DataBound>* rows = nullptr) const;
  /// The per-rank budget `exp`'s trial is held against (budgetFor's rules); the detection of
  /// the target host's memory runs once per launch target.
  Result<spec::DeviceBudget> budgetOf(const spec::Experiment& exp) const;
  Result<void> launch(Running& trial, const spec::Experiment& exp,
                      const search::TrialParams& params);
  /// Launches trial `number` (start()'s second half): finished early, waiting for the run log,
  /// or started.
  void launchOrWait(qint64 number, qint64 runId, const search::TrialParams& params, int tries);
  void finishEarly(qint64 number, qint64 runId, search::TrialState state, const QString& error,
                   bool stopped = false);
  Result<void> follow(Running& trial, std::unique_ptr<RunHandle> handle);
  /// Starts the monitor of `trial`'s follower and its eval reads (follow()'s second half).
  Result<void> startFollowing(Running& trial);
  /// Tries startFollowing again for a trial whose ranks run unfollowed (the run log refused its
  /// monitor), with launchOrWait's backoff and limit; past the limit it kills the ranks and the
  /// trial fails with the run log's error.
  void followLater(qint64 number);
  /// Stores the location of trial `number`'s attempt (run `runId`); a refusal that may pass is
  /// tried again later (kLaunchRetry), unless a later attempt launched meanwhile.
  void recordLocation(qint64 number, qint64 runId, const QJsonObject& location, int tries);
  void readEvals(Running& trial, bool judgePrunes = true);
  void onMonitorFinished(qint64 number);
  /// search.on_oom = "replan": starts the trial's next attempt in the next plan that fits
  /// (spec::next_plan); true when it runs. False, with why in `outcome.error`, when no plan is
  /// left or the attempt could not start (then `outcome` is the trial's end).
  bool replan(Running& trial, TrialOutcome& outcome);
  /// The trial's verdict into `outcome`; an error (that may pass) when the run log cannot be
  /// read now.
  Result<void> judge(Running& trial, TrialOutcome& outcome);
  Result<void> recordOutcome(Running& trial, TrialOutcome& outcome);
  std::optional<double> objectiveValue(const Running& trial, std::size_t index,
                                       const std::vector<double>& done) const;

  // The run log's refusals (retrypolicy.h): an ended trial whose verdict or record it cannot
  // take now is tried again by kRecordRetry (about 10 minutes) before it is reported failed with
  // the run log's error; a launch refused before any rank started, and a started trial's monitor,
  // by kLaunchRetry (about 5 minutes), longer than a network partition the sweep's asks outlive.

  RunStore& m_store;
  QString m_experimentPath;
  search::SearchSpace m_space;
  Options m_options;
  mutable std::map<std::string, spec::DetectedMemory> m_detected;  ///< per launch target
  std::optional<spec::Experiment> m_base;  // the experiment with Options::overrides, when it loads
  std::string m_baseError;                 // why it did not load
  PruneCallback m_prune;
  double m_stallAfterS = 0;
  std::map<qint64, std::unique_ptr<Running>> m_trials;  // by trial number
  std::map<qint64, Waiting> m_waiting;                  // launches waiting for the run log
  std::map<qint64, Segment> m_segments;                 // trials that are segments, by number
};

}  // namespace shardscope::backend

Q_DECLARE_METATYPE(shardscope::backend::TrialOutcome)
