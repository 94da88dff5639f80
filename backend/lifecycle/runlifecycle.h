// RunLifecycle: the one place that starts, attaches to, follows, stops, resumes and adopts runs,
// for the CLI (`run`, `supervise`, `stop`, `ls`/`show`), the dashboard's run control and the
// sweep's trial runner (startAttempt, resumeArguments, RunFollower in runfollower.h). A detached
// run is handed to a supervisor: `<supervisor> supervise ID` (the run log in SHARDSCOPE_DB)
// (shardscope-cli's hidden verb) in its own session, which follows the run with a RunMonitor and
// holds its lease in the run log (docs/backend.md, "The supervisor"). Nothing here prints: what the
// CLI shows is returned as values or passed in as callbacks.
#pragma once

#include <QJsonObject>
#include <QMap>
#include <QObject>
#include <QString>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/launch/launcher.h"
#include "backend/store/runreader.h"
#include "backend/store/runrecords.h"
#include "backend/store/runstore.h"
#include "spec/experiment.h"
#include "spec/replan.h"
#include "spec/result.h"
#include "spec/status.h"

namespace shardscope::backend {

/// The environment variable that gives shardscope-cli its run log when --db is absent. The
/// lifecycle passes the run log to the processes it starts (supervisor, sweep, autotune) this
/// way, never on their command line: a PostgreSQL URL may hold a password, and any local user
/// reads a command line (/proc/PID/cmdline, ps), while a process's environment is readable by its
/// own user only.
inline constexpr char kDbEnvironmentVariable[] = "SHARDSCOPE_DB";

/// What a follower reports on each of rank 0's steps.
struct FollowProgress {
  qint64 step = 0;
  qint64 maxSteps = 0;
  double loss = 0;
  double etaS = -1;  ///< seconds left; -1 while unknown
};

/// How RunLifecycle::follow behaves.
struct FollowOptions {
  qint64 maxSteps = 0;                                ///< for the ETA (0: unknown)
  std::function<void(const FollowProgress&)> onStep;  ///< rank 0's steps, with the ETA
  bool stopAtOnce = false;                            ///< a graceful stop once following
  /// Polled every 100 ms while following; true asks the ranks for a graceful stop (the CLI's
  /// SIGINT/SIGTERM). Empty: never.
  std::function<bool()> stopRequested;
  /// The run's location (LaunchedRun::location), recorded (RunStore::setRunLocation) once the
  /// lease is held; a run log that cannot take it now (a lost server) is asked again while
  /// the run is followed, never the end of the follow. Empty: nothing recorded.
  QJsonObject location;
  /// Called once per stall: no event for stallAfterS seconds while every rank lives (0: never).
  double stallAfterS = 0;
  std::function<void(double silentS)> onStall;
};

/// How RunLifecycle::follow ended.
struct FollowOutcome {
  bool followed = false;  ///< false: another live process holds the run's lease
  spec::RunStatus status = spec::RunStatus::running;
};

/// What loadForRun did besides loading.
struct LoadReport {
  bool invalid = false;     ///< the error (if any) is the experiment's: bad input, not I/O
  QString demoDataWritten;  ///< the demo's data file, when it was generated just now
};

/// A run whose ranks were started (its row says running; its location is not recorded yet).
struct LaunchedRun {
  RunRecord run;
  std::unique_ptr<RunHandle> handle;
  QJsonObject location;  ///< handle->location().toJson(), for RunStore::setRunLocation
};

/// A run's next attempt in another plan after it ran out of memory
/// (RunLifecycle::startReplannedAttempt).
struct ReplannedRun {
  RunRecord run;  ///< as the new attempt starts (attempt, run directory, params)
  std::unique_ptr<RunHandle> handle;
  QJsonObject location;  ///< handle->location().toJson(), for RunStore::setRunLocation
  QString change;        ///< what the plan changed (spec::Replan::change)
};

/// What one attempt of a run gets besides its experiment (RunLifecycle::startAttempt).
struct AttemptOptions {
  /// Runs this program (a search trial's `[search] program`, resolved against `programDir`:
  /// resolveProgram) instead of launch.trainer, with `extraArgs` as its only arguments. Empty:
  /// launch.trainer `train trial.toml` + extraArgs.
  std::vector<std::string> program;
  QString programDir;                  ///< the experiment's folder
  QStringList extraArgs;               ///< `--resume CKPT` (resumeArguments), a program's options
  QMap<QString, QString> environment;  ///< for every rank, over launch.env (SHARDSCOPE_TRIAL)
  std::optional<int> graceS;           ///< the stop grace; none: launch.grace_s
};

/// A run started detached: its supervisor follows it.
struct StartedRun {
  qint64 id = 0;
  QString name;
  QString runDir;
  qint64 supervisorPid = 0;
  /// Set when the supervisor had not taken the run's lease within the wait (it may still).
  std::string warning;
};

/// A sweep started in its own process (`<supervisor> sweep EXP`, the run log in SHARDSCOPE_DB).
struct StartedSweep {
  QString study;    ///< search.name, or the experiment file's stem
  qint64 pid = 0;   ///< the sweep process
  QString logPath;  ///< its stdout and stderr
};

/// A supervisor started by adoptOrphans for a run nobody followed (pid 0 and an error when it
/// could not be started).
struct Adoption {
  qint64 runId = 0;
  QString runName;
  qint64 supervisorPid = 0;
  std::string error;
};

class RunLifecycle {
 public:
  struct Settings {
    QString dbPath;      ///< the run log
    QString runsRoot;    ///< folder of run directories (runsRootFor(dbPath) by default)
    QString supervisor;  ///< shardscope-cli: runs `supervise RUN` and `sweep EXP`
    /// A bare launch.trainer found in this folder wins over PATH (the shardtrain built beside
    /// the caller); empty: none.
    QString trainerDir;
    int supervisorWaitMs = 10000;  ///< how long startDetached waits for the supervisor's lease
  };

  explicit RunLifecycle(Settings settings);

  const Settings& settings() const { return m_settings; }

  /// The folder of run directories for run log `dbPath`: beside it ("<folder>/runs" for
  /// runs.db, "<folder>/<stem>-runs" otherwise), or $XDG_DATA_HOME/shardscope/runs for "".
  static QString runsRootFor(const QString& dbPath);

  /// Re-attaches to the ranks of a stored run through its recorded location, with a stop grace
  /// of `graceS` seconds.
  [[nodiscard]] static Result<std::unique_ptr<RunHandle>> attach(const RunRecord& run,
                                                                 int graceS = 5);

  /// Follows run `runId` with a RunMonitor in this thread's event loop until the run's status is
  /// final (or another process holds its lease: followed = false). An error when the store
  /// fails or the lease is lost to another monitor. A monitor the run log cannot start now (an
  /// error that may pass) is started again as kLaunchRetry says (retrypolicy.h: about 5
  /// minutes), while the ranks run on.
  [[nodiscard]] static Result<FollowOutcome> follow(RunStore& store, RunHandle& handle,
                                                    qint64 runId, const FollowOptions& options);

  /// `stop RUN`: asks `run`'s ranks for a graceful stop and waits in this thread's event loop
  /// until its status is final. When no live process follows it (its supervisor is gone) this one
  /// follows it to the end and records it; else the follower records it. An error when it has
  /// not ended within `waitS` seconds.
  [[nodiscard]] static Result<RunRecord> stopAndWait(RunStore& store, const RunRecord& run,
                                                     int waitS);

  /// Asks run `runId` to stop (graceful; SIGKILL after `graceS`). The handle is parented to
  /// `context` and lives for the grace plus 5 s, so its SIGKILL timer fires in context's thread;
  /// whoever follows the run records its end.
  [[nodiscard]] Result<void> stop(QObject* context, qint64 runId, int graceS) const;

  /// Asks the process running study `studyId`'s sweep to go on, pause or stop, through the run
  /// log (backend/sweep/sweepcontrol.h carries it out).
  [[nodiscard]] Result<void> steerSweep(qint64 studyId, StudyControl control) const;
  /// Asks the sweep running trial run `runId` to prune or stop it, through the run log. A trial
  /// is stopped this way, never by a signal: its sweep then records it `stopped` and does not
  /// retry it.
  [[nodiscard]] Result<void> requestTrial(qint64 runId, TrialRequest request) const;

  /// Loads and validates an experiment for a run (overrides "dotted.key=value"); writes the
  /// demo's data first when it is missing; checks the launcher kind; prefers a trainer in
  /// trainerDir. `report` (optional) says whether an error is the experiment's.
  [[nodiscard]] Result<spec::Experiment> loadForRun(const QString& path,
                                                    const std::vector<std::string>& overrides,
                                                    LoadReport* report = nullptr) const;
  /// loadForRun on an experiment the caller read already (spec::load_experiment without the
  /// paths check), so that its file is read once.
  [[nodiscard]] Result<spec::Experiment> prepareForRun(spec::Experiment shape,
                                                       LoadReport* report = nullptr) const;

  /// The experiment a search trial runs: the sweep's parsed experiment `base` with `overrides`
  /// (the sweep's --set, then the trial's values; spec::with_overrides, no file read), its files
  /// checked when it runs here or is a `program` trial (which skips the launch checks). A bare
  /// launch.trainer becomes `trainer` when that is not empty.
  [[nodiscard]] static Result<spec::Experiment> experimentForTrial(
      const spec::Experiment& base, const std::vector<std::string>& overrides, bool program,
      const QString& trainer);

  /// Starts attempt run.attempt of stored run `run` in run.runDir: creates the folder, writes
  /// `exp` there as trial.toml, builds the launch request and starts the ranks through the
  /// launcher of launch.kind (ProgramLauncher for options.program). Records nothing: the caller
  /// sets the run's status and location. `run`, `startDetached`, `resumeDetached` and the trial
  /// runner all start ranks here.
  [[nodiscard]] static Result<std::unique_ptr<RunHandle>> startAttempt(
      RunStore& store, const RunRecord& run, const spec::Experiment& exp,
      const AttemptOptions& options = {});

  /// Starts the next attempt of stored run `run` (run.attempt already begun in the run log:
  /// RunStore::beginResumedAttempt, beginReplannedAttempt or beginNextSegment; run.params as it
  /// recorded them) in a fresh sibling folder `<run dir>-<kind>-<number>` (the run directory
  /// without an earlier `-<kind>-N`): each attempt has its own folder, as its event files count
  /// bytes and seq from 0. Records that folder, starts the ranks (startAttempt) and returns them
  /// with the run as it now runs; the caller records the location. On an error the run is
  /// recorded failed and the message names it. `resumeDetached` (`-resume-`),
  /// `startReplannedAttempt` (`-replan-`) and `pbt-replay` (`-segment-`) go through here.
  [[nodiscard]] static Result<LaunchedRun> startAttemptInSibling(
      RunStore& store, RunRecord run, const QString& kind, int number, const spec::Experiment& exp,
      const AttemptOptions& options = {});

  /// `--resume PATH` for a new attempt of `run`: the newest complete sharded checkpoint of its
  /// attempt `from`, in that attempt's folder (run.location must still be that attempt's; a
  /// remote path for SSH and Slurm). Empty when that attempt wrote none.
  [[nodiscard]] static Result<QStringList> resumeArguments(RunReader& reader, const RunRecord& run,
                                                           qint64 from);

  /// Creates the run row (NAME-<n>), writes trial.toml into its run directory, starts its ranks
  /// and marks it running. The caller records the location once a follower holds the lease.
  /// `experimentId`: the experiment row the run belongs to (autotune's candidates share one, so
  /// they compare as one sweep); none: a row of its own is recorded from `exp`.
  /// `attempt`: what its first attempt gets besides `exp` (startFromCheckpoint's `--resume`).
  [[nodiscard]] Result<LaunchedRun> launch(RunStore& store, const spec::Experiment& exp,
                                           const QString& experimentPath,
                                           const std::vector<std::string>& overrides,
                                           std::optional<qint64> experimentId = {},
                                           const AttemptOptions& attempt = {}) const;

  /// launch(), then records the location, starts the supervisor and waits (supervisorWaitMs)
  /// until it holds the run's lease: once this returns no other process takes it for an orphan.
  /// Starts nothing when the supervisor is not an executable.
  /// `replanOnOom`: the supervisor replans an attempt that runs out of memory
  /// (startReplannedAttempt; `supervise RUN --replan-on-oom`).
  [[nodiscard]] Result<StartedRun> startDetached(RunStore& store, const spec::Experiment& exp,
                                                 const QString& experimentPath,
                                                 const std::vector<std::string>& overrides,
                                                 bool replanOnOom = false,
                                                 std::optional<qint64> experimentId = {},
                                                 const AttemptOptions& attempt = {}) const;

  /// "Resume from here": a NEW run (NAME-<n>, the same experiment row) that starts from run
  /// `runId`'s sharded checkpoint of step `step` (listCheckpoints: any attempt's, still on
  /// disk), detached like startDetached: its trial.toml is the source run's, its ranks get
  /// `--resume <that checkpoint's folder>`, so its first step is step + 1; its params are the
  /// source's plus kResumedFromParam ("NAME@STEP"). The source run is left as it is (it may still
  /// run). An SSH run's checkpoint path is the remote one: the new run must reach it there (the
  /// same hosts, or a shared file system).
  [[nodiscard]] Result<StartedRun> startFromCheckpoint(RunStore& store, qint64 runId,
                                                       qint64 step) const;

  /// Resumes run `runId` (outside a sweep; it ended stopped, failed or oom) from the newest
  /// complete sharded checkpoint of its last attempt: a new attempt of the same run, in a fresh
  /// folder `<run dir>-resume-<attempt>` with the same trial.toml, `shardtrain train trial.toml
  /// --resume CKPT`, followed by a new supervisor. Its curve goes on from the checkpoint's step.
  /// Fails, starting nothing, when the run has no complete checkpoint (start it again instead).
  [[nodiscard]] Result<StartedRun> resumeDetached(RunStore& store, qint64 runId) const;

  /// A run's parameters once attempt `oomAttempt` ran out of memory and the next runs `plan`
  /// (RunStore::beginReplannedAttempt): `params` with the plan's fields (numbers and booleans as
  /// JSON) and `replan`, the history of its plans ("attempt 0 ran out of memory; attempt 1:
  /// CHANGE", several joined with " | "). The runs table, Compare and `study show` read it.
  [[nodiscard]] static QJsonObject replannedParams(QJsonObject params, const spec::Replan& plan,
                                                   int oomAttempt);
  /// `run --replan-on-oom` (and the builder's Launch option): run `runId` (outside a sweep), whose
  /// last attempt ran out of memory, runs again from the start in the next plan of the ladder that
  /// fits (spec::next_plan on its trial.toml, held against budget the host check finds): a new
  /// attempt of the same run in `<run dir>-replan-<attempt>`, its params saying which plan runs
  /// and why. The caller follows the handle and records the location. Fails, starting nothing,
  /// when no plan is left (the error says why each was passed over).
  [[nodiscard]] static Result<ReplannedRun> startReplannedAttempt(RunStore& store, qint64 runId);

  /// Starts `<supervisor> sweep EXP [--name STUDY]` in its own session, the run log in its
  /// environment (kDbEnvironmentVariable, never the command line), its output
  /// appended to `<runsRoot>/sweep-<study>-<yyyyMMdd-HHmmss>.log`.
  [[nodiscard]] Result<StartedSweep> startSweep(const QString& experimentPath,
                                                const QString& studyName = {}) const;

  /// What startAutotune passes on to `autotune` (its options of the same names).
  struct AutotuneRequest {
    QString studyName;  ///< --name: the study that records it
    QString objective = QStringLiteral("tokens_per_s");
    double budgetMinutes = 30;
    qint64 steps = 10;
    qint64 warmup = 3;
  };
  /// Starts `<supervisor> autotune EXP --name STUDY ...` (SHARDSCOPE_DB) in its own session (as a
  /// sweep is), its output appended to `<runsRoot>/autotune-<study>-<yyyyMMdd-HHmmss>.log`. Its
  /// progress and result are read from the study in the run log; its Stop is steerSweep's.
  [[nodiscard]] Result<StartedSweep> startAutotune(const QString& experimentPath,
                                                   const AutotuneRequest& request) const;

  /// Starts the sweep of running study `studyId` again when no process feeds it any more
  /// (RunStore::sweepAlive false: its process was killed or crashed): the new process
  /// reattaches the trials the dead one left running and goes on with the study. Fails, starting
  /// nothing, when the study has ended, when a live process feeds it, or when its experiment
  /// file is gone.
  [[nodiscard]] Result<StartedSweep> adoptSweep(RunReader& reader, qint64 studyId) const;

  /// Starts `<supervisor> supervise RUN` (SHARDSCOPE_DB) in its own session (double fork, a child
  /// of init) with its output appended to `<run dir>/supervisor.log`; returns its pid.
  /// `replanOnOom` adds --replan-on-oom.
  [[nodiscard]] Result<qint64> spawnSupervisor(const RunRecord& run,
                                               bool replanOnOom = false) const;

  /// For each live run (not final, started) of this host (RunRecord::host) that no live process
  /// follows (no lease, a dead holder on this machine, or a stale heartbeat), starts a
  /// supervisor that takes it over. A live run launched on another host (or on one unrecorded)
  /// is reported (an Adoption with pid 0 and an error that says where it runs), never touched.
  /// Trials of a sweep are left to their sweep (adoptSweep), which records their objectives.
  [[nodiscard]] std::vector<Adoption> adoptOrphans(RunReader& reader,
                                                   const std::vector<RunRecord>& runs) const;

 private:
  Result<RunRecord> createRun(RunStore& store, const spec::Experiment& exp,
                              const QString& experimentPath,
                              const std::vector<std::string>& overrides,
                              std::optional<qint64> experimentId) const;
  std::string waitForSupervisor(RunStore& store, qint64 runId, qint64 supervisor) const;
  /// Starts argv in its own session as a child of init (localproc::spawnInSession, detached),
  /// SHARDSCOPE_DB=<dbPath> in its environment, its output appended to `logPath`.
  Result<qint64> spawnDetached(const QStringList& argv, const QString& logPath) const;

  Settings m_settings;
};

}  // namespace shardscope::backend
