// The rows of the run log as plain values: what RunStore writes and RunReader returns. Times are
// unix seconds (with fractions), offsets are byte offsets into a rank's file.
#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

#include "spec/status.h"

namespace shardscope::backend {

/// Which file of a rank a row or an offset belongs to.
enum class RankFile { events, log };

/// "events" or "log", as stored in the read_offsets and log_lines tables.
QString rankFileName(RankFile file);

/// An experiment: the file a run (trial) was resolved from.
struct ExperimentRecord {
  qint64 id = 0;
  QString name;
  QString source;  ///< path of the experiment file ("" when built in memory)
  QString toml;    ///< the resolved experiment as TOML
  double createdAt = 0;
};

/// Where a study (a hyperparameter search) stands.
enum class StudyStatus { running, complete, stopped };

/// What the user asked of a running sweep (schema v5): go on asking for trials, ask for none
/// while running trials go on, or stop the running trials and end.
enum class StudyControl { run, pause, stop };
/// "run", "pause", "stop", as stored in studies.control.
QString studyControlName(StudyControl control);
std::optional<StudyControl> parseStudyControl(const QString& name);

/// What the user asked of one running trial (schema v5), carried out by its sweep.
enum class TrialRequest { none, prune, stop };
/// "", "prune", "stop", as stored in runs.request.
QString trialRequestName(TrialRequest request);
std::optional<TrialRequest> parseTrialRequest(const QString& name);

/// What a study records (schema v7): a hyperparameter search (its trials come from a sampler), or
/// an autotune's measured candidates (shardscope-cli autotune), which is no sweep to continue.
enum class StudyKind { search, autotune };
/// "search", "autotune", as stored in studies.kind.
QString studyKindName(StudyKind kind);
std::optional<StudyKind> parseStudyKind(const QString& name);

/// "running", "complete", "stopped", as stored in studies.status.
QString studyStatusName(StudyStatus status);
/// The status named `name`; nullopt for any other text.
std::optional<StudyStatus> parseStudyStatus(const QString& name);

/// What a new study needs; the store fills in id, status (running) and created time (schema v3).
struct NewStudy {
  QString name;  ///< unique in the store
  std::optional<qint64> experimentId;
  /// A sweep's [search] table in canonical form (spec::Experiment::search.toml; studies created
  /// before kept the whole experiment file, spec::stored_search_space reads both); an
  /// autotune's whole experiment.
  QString config;
  QStringList objectives;  ///< metric names ("eval.loss", "objective", ...)
  QStringList directions;  ///< "minimize" or "maximize", one per objective
  QString sampler;         ///< a name of spec::kSamplers ("tpe", ...); empty for an autotune
  std::optional<qint64> seed;
  QJsonObject state;  ///< sampler/scheduler state
  StudyKind kind = StudyKind::search;
};

/// One study as the store knows it.
struct StudyRecord {
  qint64 id = 0;
  QString name;
  std::optional<qint64> experimentId;
  QString config;
  QStringList objectives;
  QStringList directions;
  QString sampler;
  std::optional<qint64> seed;
  StudyStatus status = StudyStatus::running;
  double createdAt = 0;
  std::optional<double> endedAt;
  QJsonObject state;
  StudyControl control = StudyControl::run;  ///< schema v5
  /// The process that last stamped the study as running its sweep (schema v6; 0: none).
  qint64 sweepPid = 0;
  QString sweepHost;
  double sweepHeartbeat = 0;           ///< unix time of its last stamp
  StudyKind kind = StudyKind::search;  ///< schema v7
};

/// What a new run needs; the store fills in id, status (queued) and created time.
struct NewRun {
  std::optional<qint64> experimentId;
  QString name;  ///< unique in the store
  QString runDir;
  QJsonObject params;  ///< the trial's parameters (sampled values, overrides)
  int worldSize = 0;
};

/// The key of a run's params that says which plans it ran in after running out of memory, and
/// why (RunLifecycle::replannedParams; search.on_oom, run --replan-on-oom): no experiment field,
/// so neither a clone nor a plot axis takes it.
inline constexpr char kReplanParam[] = "replan";
/// The params key of a run started from another run's checkpoint ("NAME@STEP": that run and the
/// checkpoint's step; RunLifecycle::startFromCheckpoint).
inline constexpr char kResumedFromParam[] = "resumed_from";

/// One run (a trial) as the store knows it.
struct RunRecord {
  qint64 id = 0;
  std::optional<qint64> experimentId;
  QString name;
  spec::RunStatus status = spec::RunStatus::queued;
  QString runDir;
  QJsonObject location;  ///< RunLocation::toJson() of its launcher (backend/launch/launcher.h)
  QJsonObject params;
  std::optional<double> objective;
  QString error;  ///< why it failed; empty otherwise
  double createdAt = 0;
  std::optional<double> startedAt;
  std::optional<double> endedAt;
  int worldSize = 0;
  // A trial of a study (schema v3); all empty for a run outside a study.
  std::optional<qint64> studyId;
  std::optional<qint64> trialNumber;  ///< unique in its study
  /// One value per objective of the study (NaN where not finite); nullopt until known.
  std::optional<std::vector<double>> objectiveValues;
  int attempt = 0;                            ///< retries of the same trial number
  TrialRequest request = TrialRequest::none;  ///< asked of the running trial (schema v5)
  /// The machine (QSysInfo::machineHostName) and boot (StoreClock::bootId) that launched it,
  /// stamped by RunStore::setRunLocation (schema v8; "" for runs recorded before).
  QString host;
  QString bootId;
  /// When the run was archived (unix seconds; schema v10): hidden from the default listings,
  /// its files and rows kept. nullopt while it is not.
  std::optional<double> archivedAt;
};

/// What a new trial run needs: a queued run of a study (schema v3).
struct NewTrial {
  qint64 studyId = 0;
  std::optional<qint64> trialNumber;  ///< nullopt: the next free number of the study
  QString name;                       ///< "" : "<study name>-<trial number>"
  QString runDir;
  QJsonObject params;
  int worldSize = 0;
};

/// The run a trial got and its number.
struct TrialId {
  qint64 runId = 0;
  qint64 number = 0;
};

/// What RunStore::startTrialRunWithin did with an asked trial.
struct TrialStart {
  enum class Outcome {
    Started,  ///< the trial is in the run log as `id`
    Full,     ///< the study already has its n_trials numbers
    Stale,    ///< another asker took the trial number this one was sampled for
  };
  Outcome outcome = Outcome::Started;
  TrialId id;  ///< Started only
  /// Started by an earlier call with the same ask lease, whose answer was lost: the trial's
  /// parameters are the stored ones, not necessarily this call's.
  bool again = false;
};

/// One value of one metric at one step on one rank.
struct MetricRow {
  qint64 runId = 0;
  qint64 step = 0;
  QString key;  ///< "loss", "lr", "mem.peak", "eval.accuracy", ...
  double value = 0;
  int rank = 0;
  double time = 0;
  qint64 offset = -1;  ///< the events-file line it came from (not stored: splits a chunk)
};

/// One parsed event line, kept verbatim.
struct EventRow {
  qint64 id = 0;  ///< set by the store
  qint64 runId = 0;
  int rank = 0;
  qint64 seq = 0;
  QString kind;       ///< "hello", "step", ...
  QByteArray json;    ///< the line as the rank wrote it, without the newline
  qint64 offset = 0;  ///< byte offset of the line in events-rank-N.jsonl
  int attempt = 0;    ///< set by the store: the run's attempt whose file held the line
};

/// One line of a rank's stderr log, or an events line that did not parse.
struct LogLine {
  qint64 runId = 0;
  int rank = 0;
  RankFile file = RankFile::log;  ///< events: a malformed events line kept as text
  qint64 offset = 0;
  QString text;
};

/// Something wrong in a rank's event stream, recorded for the user (schema v2).
struct Anomaly {
  enum class Kind { gap, repeat, malformed };
  qint64 runId = 0;
  int rank = 0;
  Kind kind = Kind::malformed;
  qint64 seq = -1;  ///< the seq that was seen (gap, repeat); -1 for malformed
  qint64 offset = 0;
  QString detail;
};

/// "gap", "repeat", "malformed".
QString anomalyKindName(Anomaly::Kind kind);

/// A chunk of one rank's file, parsed: its rows are stored together with the file's new offset
/// in one transaction, so a crash never loses or duplicates a line.
struct FileChunk {
  qint64 runId = 0;
  int attempt = 0;  ///< the run's attempt whose files these are (a retry reads fresh files)
  int rank = 0;
  RankFile file = RankFile::events;
  qint64 startOffset = 0;  ///< must equal the stored offset (else the chunk is refused)
  qint64 endOffset = 0;    ///< offset just past the chunk's last complete line
  /// Only anomalies about the file itself (truncated or deleted from outside), at the stored
  /// offset (startOffset == endOffset): stored while the stored offset is still startOffset.
  bool noteOnly = false;
  std::vector<EventRow> events;
  std::vector<MetricRow> metrics;
  std::vector<LogLine> logs;
  std::vector<Anomaly> anomalies;
};

/// Where a retry resumes: a sharded checkpoint of an earlier attempt (see RunReader::resumePoint).
struct ResumePoint {
  qint64 step = 0;  ///< the optimizer steps the checkpoint holds
  QString path;     ///< relative to that attempt's run directory ("ckpt/step-000006")
};

/// What ingesting a chunk did.
struct IngestReceipt {
  bool applied = false;    ///< false: the stored offset was already at or past endOffset
  qint64 lastEventId = 0;  ///< id of the chunk's last event row (0: none)
  qint64 offset = 0;       ///< the stored offset after the call
};

/// An SSH host the user added.
struct HostRecord {
  QString alias;
  QString hostname;
  int port = 22;
  QString user;
  QString fingerprint;  ///< "SHA256:..." as ssh-keygen -lf prints it; empty: not trusted
  std::optional<double> trustedAt;
};

/// Who follows a run: a monitor's process and its last sign of life.
struct LeaseRecord {
  qint64 runId = 0;
  qint64 pid = 0;
  QString host;          ///< the machine of pid (schema v2; "" for leases written by v1)
  QString token;         ///< distinguishes two monitors in one process
  double heartbeat = 0;  ///< unix seconds (PostgreSQL: the server's clock)
  /// Read back from the run log: the holder's boot (schema v8; "" when unknown), and how old
  /// its heartbeat is, measured as backend/store/storeclock.h says (nullopt: not measured).
  QString bootId;
  std::optional<double> ageS;
};

/// The answer to a lease request.
struct LeaseOutcome {
  bool acquired = false;
  bool tookOver = false;              ///< the previous holder was stale or dead
  std::optional<LeaseRecord> holder;  ///< the holder that refused us (when !acquired)
};

}  // namespace shardscope::backend
