// RunStore: the run log (a SQLite file in WAL mode, or a PostgreSQL database shared by several
// processes and machines; see db.h). One writer thread takes every write as a queued job and
// commits them in batches; each call returns a future that is ready once its rows are committed
// (or failed). Readers open their own read-only connections (reader()), so they never block the
// writer and always see whole transactions. Changes are announced as coalesced Qt signals, at
// most one of each kind per notifyIntervalMs.
#pragma once

#include <QList>
#include <QObject>
#include <QString>
#include <QTimer>

#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backend/guithread.h"
#include "backend/store/rungroups.h"
#include "backend/store/runreader.h"
#include "backend/store/runrecords.h"
#include "backend/store/runtags.h"
#include "backend/store/storeclock.h"
#include "backend/store/storewriter.h"
#include "backend/store/verdicts.h"
#include "spec/result.h"
#include "spec/status.h"

namespace shardscope::backend {

class RunStore : public QObject {
  Q_OBJECT
 public:
  struct Options {
    int notifyIntervalMs = 50;         ///< shortest time between two signals of one kind
    std::size_t maxBatchRows = 50000;  ///< rows per transaction before a commit is forced
    int flushIntervalMs = 2;           ///< longest wait for more rows before a commit
    /// Cap on the file size in pages (PRAGMA max_page_count); 0: none. Simulates a full disk
    /// (SQLite only: a PostgreSQL run log ignores it).
    qint64 maxPageCount = 0;
    /// The clocks that stamp and judge lease heartbeats (storeclock.h); null: the machine's.
    /// Tests pass a fake one (a jumped wall clock, another boot).
    const StoreClock* clock = nullptr;
  };
  template <class T>
  using Pending = std::future<Result<T>>;

  /// True when process `pid` runs on this machine (a zombie counts as ended): the liveness test
  /// of a lease holder on this host.
  static bool processAlive(qint64 pid);
  /// True when a lease's holder still follows its run: a heartbeat younger than staleAfterS
  /// (its ageS as read from the run log, measured as storeclock.h says: never two machines' wall
  /// clocks) and, when the holder runs on `host` (this machine), of this boot and with a live
  /// pid. acquireLease() takes over exactly the holders for which this is false.
  static bool leaseHolderAlive(const LeaseRecord& holder, const QString& host, double staleAfterS,
                               const StoreClock& clock = StoreClock::system());
  /// $XDG_DATA_HOME/shardscope/runs.db (the user's data folder).
  static QString defaultPath();
  /// Opens (creating it and its folder) and migrates the run log at `path`: a SQLite file, or a
  /// `postgresql://user@host:port/db` URL (the database must exist; its tables are created).
  [[nodiscard]] static Result<std::unique_ptr<RunStore>> open(const QString& path,
                                                              const Options& options);
  [[nodiscard]] static Result<std::unique_ptr<RunStore>> open(const QString& path);
  ~RunStore() override;

  const QString& path() const { return m_path; }
  const StoreClock& clock() const {
    return m_options.clock ? *m_options.clock : StoreClock::system();
  }
  /// A read-only connection for the calling thread (keep one per thread).
  [[nodiscard]] Result<RunReader> reader() const;

  Pending<qint64> createExperiment(const ExperimentRecord& experiment);
  /// A queued run; fails when the name is taken.
  Pending<qint64> createRun(const NewRun& run);
  /// Records where the run's ranks run, and that this machine and boot launched it (RunRecord's
  /// host and bootId: only this host adopts it, RunLifecycle::adoptOrphans).
  Pending<void> setRunLocation(qint64 runId, const QJsonObject& location);
  /// Sets the status; running stamps started_at, a final status stamps ended_at.
  Pending<void> setRunStatus(qint64 runId, spec::RunStatus status, const QString& error = {},
                             std::optional<double> objective = std::nullopt);
  Pending<void> appendMetrics(std::vector<MetricRow> rows);
  /// Stores a chunk's rows and the file's new offset in one transaction. A chunk that starts
  /// before the stored offset but ends at or before it was already stored (applied = false); one
  /// that starts elsewhere is refused, so no line is stored twice or skipped.
  Pending<IngestReceipt> ingest(FileChunk chunk);
  Pending<void> saveHost(const HostRecord& host);
  /// Records the fingerprint the user accepted for `alias`.
  Pending<void> trustHost(const QString& alias, const QString& fingerprint);

  /// Takes the lease on `runId` for `me` unless another holder is alive: a holder whose
  /// heartbeat is older than staleAfterS, or whose pid is dead on this machine, is taken over.
  Pending<LeaseOutcome> acquireLease(const LeaseRecord& me, double staleAfterS);
  /// Heartbeat: true when renewed, false when another monitor holds the lease now; an error
  /// when the run log could not be written (a full disk: the lease is still `me`'s).
  Pending<bool> renewLease(const LeaseRecord& me);
  Pending<void> releaseLease(const LeaseRecord& me);

  // Studies (schema v3: the searches' ask/tell); see runstore_study.cpp.
  /// A running study; fails when the name is taken or directions and objectives disagree.
  Pending<qint64> createStudy(const NewStudy& study);
  /// Sets the status; complete or stopped stamps ended_at, running (a resume) clears it.
  Pending<void> setStudyStatus(qint64 studyId, StudyStatus status);
  /// Replaces the sampler/scheduler state.
  Pending<void> setStudyState(qint64 studyId, const QJsonObject& state);
  /// Asks the process running study `studyId`'s sweep to go on, pause or stop (schema v5).
  /// Fails when the study is not in the run log or has ended (nothing runs it any more).
  Pending<void> setStudyControl(qint64 studyId, StudyControl control);
  /// Stamps study `studyId` as fed by process `pid` on `host` now (schema v6); the sweep's
  /// process renews it every few seconds while it runs.
  Pending<void> stampSweep(qint64 studyId, qint64 pid, const QString& host);
  /// As stampSweep, in one write transaction, and true only when the stamp is `pid`'s now: no
  /// other live process stamped the study. Of several processes adopting one sweep at once
  /// (RunLifecycle::adoptSweep), exactly one gets true.
  Pending<bool> claimSweep(qint64 studyId, qint64 pid, const QString& host);
  /// Moves the stamp from `fromPid` to `toPid` (the sweep process an adopter started) when it
  /// is still `fromPid`'s on `host`; false when it is not.
  Pending<bool> handOverSweepStamp(qint64 studyId, qint64 fromPid, qint64 toPid,
                                   const QString& host);
  /// Clears the stamp when it is still this process's (a sweep that exits).
  Pending<void> clearSweepStamp(qint64 studyId, qint64 pid, const QString& host);
  /// True when a process runs the study's sweep: a stamp newer than staleAfterS whose pid, on
  /// this machine (`host`), is alive. A study that has ended needs none (false as well).
  static bool sweepAlive(const StudyRecord& study, const QString& host, double staleAfterS);
  /// How often a sweep's process renews its stamp, and when a stamp counts as stale.
  static constexpr int kSweepStampMs = 3000;
  static constexpr double kSweepStaleS = 30;
  /// Asks the sweep running trial run `runId` to prune or stop it; TrialRequest::none clears the
  /// request (the sweep, once done). Fails when the run is not a running or queued trial.
  Pending<void> requestTrial(qint64 runId, TrialRequest request);
  /// A queued run of the study with its trial number and params. Without a number it takes the
  /// study's next free one inside the write transaction, so two processes get distinct trials.
  Pending<TrialId> createTrialRun(const NewTrial& trial);
  /// Sets the run directory of a trial the study made without one (the trial runner's choice).
  Pending<void> setRunDir(qint64 runId, const QString& runDir);
  /// Records a trial's objective values (one per objective of its study; NaN stored as null).
  Pending<void> setRunObjectives(qint64 runId, std::vector<double> values);
  /// As createTrialRun, but the run is marked running (asked) in the same transaction, so no
  /// other process mistakes it for an enqueued (queued) trial.
  ///
  /// The ask lease (startTrialRun, startTrialRunWithin, claimTrial): with `askLease` (the asking
  /// process's pid and host and a token of this one ask, search::Study::askToken; its runId is
  /// ignored) the trial's run and that lease are written in ONE transaction, so no trial is ever
  /// running without its asker's lease (a lease written after, in its own transaction, was lost
  /// whenever the run log went away between the two, and the trial stayed running for good: no
  /// sweep fails a trial as lost or adopts it without a lease). A call whose answer is lost (the
  /// connection drops after the COMMIT reached the server) may have taken a trial: the asker
  /// calls again with the same lease, and the call first looks, in its transaction, for a
  /// running trial of the study that holds exactly that lease (pid, host, token) and returns it
  /// instead of taking a second one. An asker that dies instead leaves a lease of a dead pid:
  /// Study::failLostTrials fails that trial, and it is retried.
  Pending<TrialId> startTrialRun(const NewTrial& trial,
                                 const std::optional<LeaseRecord>& askLease = std::nullopt);
  /// As startTrialRun, but only while the study has fewer than `maxTrials` trial numbers,
  /// counted in the same write transaction: Full once it has them all, so concurrent askers
  /// (slots of one sweep, or several processes) never overshoot search.n_trials.
  /// With trial.trialNumber set, the trial starts only if that is still the study's next free
  /// number, else Stale: the asker sampled from a history another asker has since extended, and
  /// samples again rather than hand out the same parameters twice. A trial an earlier call with
  /// the same `askLease` took comes back as Started with TrialStart::again (its own parameters).
  Pending<TrialStart> startTrialRunWithin(
      const NewTrial& trial, qint64 maxTrials,
      const std::optional<LeaseRecord>& askLease = std::nullopt);
  /// Claims, in one transaction, the study's lowest-numbered queued (enqueued) trial, else its
  /// lowest-numbered failed trial with attempt < maxAttempt (a retry: attempt + 1, its metrics,
  /// objectives and error cleared). The claimed run becomes running, with `askLease` as its
  /// lease in the same transaction (see startTrialRun); nullopt when none. A trial an earlier
  /// call with the same `askLease` claimed (or started) is returned again.
  /// With `fromCheckpoint` (search.retry_from_checkpoint) a retry keeps the curve up to the step
  /// of the failed attempt's newest sharded checkpoint (RunReader::resumePoint), where the trial
  /// runner resumes it; otherwise the retry's curve starts empty.
  Pending<std::optional<TrialId>> claimTrial(
      qint64 studyId, int maxAttempt, bool fromCheckpoint = false,
      const std::optional<LeaseRecord>& askLease = std::nullopt);
  /// Starts the next attempt of a run outside a study that ended stopped, failed or oom, to be
  /// resumed from its newest complete sharded checkpoint (RunReader::resumePoint of the attempt
  /// that ended): attempt + 1, running, error and end time cleared, the curve kept up to the
  /// checkpoint's step. Returns the new attempt; fails naming the run when it is a trial (its
  /// sweep retries it), still running, or complete.
  Pending<int> beginResumedAttempt(qint64 runId);
  /// Starts the next attempt of a run (a trial or not) whose attempt ran out of memory, in another
  /// plan (spec/replan.h): attempt + 1, running, error, objectives and end time cleared, an empty
  /// curve (the plan starts over), and `params` as its parameters (the sampled values or
  /// overrides, the plan's fields and its `replan` description), so the run log says which plan
  /// ran and why. Returns the new attempt; fails naming the run when it is not running or oom.
  Pending<int> beginReplannedAttempt(qint64 runId, const QJsonObject& params);
  /// Starts the next attempt of a complete run outside a study that goes on from its end with
  /// other values (`pbt-replay`: the next segment of a PBT schedule): attempt + 1, running, error,
  /// objectives and end time cleared, the curve kept up to the attempt's newest sharded
  /// checkpoint (its end), and `params` as its parameters. Returns the new attempt; fails naming
  /// the run when it is a trial or not complete.
  Pending<int> beginNextSegment(qint64 runId, const QJsonObject& params);
  /// Ends a queued or running trial with a final `status`, its objective values (one per
  /// objective; may be empty) and `error`, in one transaction; fails naming the trial when it
  /// already ended (a second tell).
  Pending<void> finishTrial(qint64 runId, spec::RunStatus status, std::vector<double> values,
                            const QString& error = {});

  // Tags and notes (schema v9; runtags.h, runstore_tags.cpp). Both announce runsChanged or
  // studiesChanged as their owner is a run or a study.
  /// Adds the tags `add` (a new name is created with defaultTagColor) to run or study `id` and
  /// removes the tags `remove` from it, in one transaction. Fails naming the first bad name
  /// (checkTagName), or the run or study when it is not in the run log; removing a tag it does
  /// not carry is no error.
  Pending<void> editTags(TagOwner owner, qint64 id, QStringList add, QStringList remove);
  /// Sets the colour ("#rrggbb") of tag `name`, creating the tag when it is new.
  Pending<void> setTagColor(const QString& name, const QString& color);
  /// Replaces the note of run or study `id`; '' clears it. Fails when the owner is not in the
  /// run log or the note is longer than kNoteMaxBytes.
  Pending<void> setNote(TagOwner owner, qint64 id, const QString& note);

  // Clean-up (schema v10; runstore_cleanup.cpp). Both announce runsChanged.
  /// Archives run `runId` (stamps archived_at: hidden from the default listings, kept with its
  /// files and rows), or with `archived` false brings it back. Fails when it is not in the run log.
  Pending<void> setArchived(qint64 runId, bool archived);
  /// Deletes run `runId`'s rows: the run and, through the schema's cascades and trigger, its
  /// params, metrics, events, log lines, anomalies, lease, offsets and tag links. Its files are
  /// the caller's (backend/lifecycle/runcleanup.h). Refuses a running run, naming the fix.
  Pending<void> deleteRun(qint64 runId);

  // Verdicts (schema v11; verdicts.h, runstore_verdicts.cpp). Announces runsChanged.
  /// Marks probe `probe`'s answer at `step` of run `runId` good or bad (replacing an earlier mark,
  /// stamped with `who` and now), or with nullopt clears it. Fails when the run is not in the run
  /// log, the probe is empty or the step negative.
  Pending<void> setVerdict(qint64 runId, const QString& probe, qint64 step,
                           std::optional<Verdict> verdict, const QString& who);
  /// When run `runId` is a complete trial of a study with the objective probes.good_rate: writes
  /// its good rate as the verdicts stand (null while none) into its objective values, as
  /// setVerdict does with every mark. Nothing for other runs.
  Pending<void> refreshGoodRate(qint64 runId);

  // Groups of runs (schema v12; rungroups.h, runstore_groups.cpp). All announce runsChanged.
  /// What editGroup does when the group does not exist.
  enum class GroupMissing { fail, create };
  /// Creates the empty group `name`; its id. Fails on a bad name (checkGroupName) or one taken.
  Pending<qint64> createGroup(const QString& name);
  /// Renames group `from` to `to`, keeping its runs. Fails when `from` is not in the run log or
  /// `to` is taken or not a name.
  Pending<void> renameGroup(const QString& from, const QString& to);
  /// Deletes group `name`: its runs stay, only their membership goes.
  Pending<void> deleteGroup(const QString& name);
  /// Adds the runs `add` to group `name` and takes the runs `remove` out of it, in one
  /// transaction (a run already in it, or not in it, is no error). A missing group is made when
  /// `missing` says create; else it fails, as it does naming a run of `add` not in the run log.
  Pending<void> editGroup(const QString& name, QList<qint64> add, QList<qint64> remove,
                          GroupMissing missing = GroupMissing::fail);

  /// Waits until every write queued before the call is committed.
  void flush();

 signals:
  void runsChanged();
  void metricsAppended(qint64 runId);
  void eventsAppended(qint64 runId);
  void hostsChanged();
  void studiesChanged();

 private:
  RunStore(QString path, const Options& options, Db writerDb);
  void onCommitted(const ChangeSet& changes);  // writer thread
  void emitPending();                          // this object's thread

  // Control writes are urgent (their callers usually wait); bulk rows may wait for a batch.
  template <class T>
  Pending<T> submit(std::size_t rows, std::function<Result<T>(WriteContext&)> fn,
                    bool urgent = true) {
    assertOffGuiThread("a run-log write");
    return m_writer->submit<T>(rows, std::move(fn), urgent);
  }

  QString m_path;
  Options m_options;
  QTimer m_notifyTimer;
  std::mutex m_changesMutex;
  ChangeSet m_pending;                    // guarded by m_changesMutex
  bool m_wakePosted = false;              // guarded by m_changesMutex
  std::unique_ptr<StoreWriter> m_writer;  // last: its thread may call onCommitted
};

}  // namespace shardscope::backend
