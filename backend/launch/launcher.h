// The seam between the backend and wherever ranks run. A Launcher starts the ranks of one run
// (locally, over SSH, through Slurm) and returns a RunHandle; the monitor reads the ranks' event
// files through the handle and decides the run's status; the CLI and GUI only see handles.
//
// Durability contract (docs/trainer.md, "The contract"): rank N's stdout goes to
// `events-rank-N.jsonl` and stderr to `rank-N.log` in the run directory on the machine where it
// runs, and every rank starts in its own session, so ranks outlive the backend and a dropped SSH
// connection. A RunLocation (persisted in the run log) is enough for any later backend process
// to attach() to the same ranks.
#pragma once

#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>
#include <memory>

#include "backend/store/runrecords.h"
#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::backend {

/// Everything needed to start one run (a trial).
struct LaunchRequest {
  qint64 runId = 0;
  QString runName;      // unique; appears in remote paths and job names, so always quoted
  QString localRunDir;  // this machine's run directory; trial.toml is already written there
  int attempt = 0;      // 0: first try; n: the nth retry (its own local and remote folder)
  QString runLogToken;  // RunReader::runLogToken(): remote folders of two run logs never meet
  spec::LaunchSection launch;
  /// Trainer arguments after the executable (launch.trainer), e.g. {"train", "trial.toml"}.
  QStringList trainerArgs;
  /// Environment for every rank on top of the launcher's own (rendezvous, OMP_NUM_THREADS...).
  QMap<QString, QString> extraEnv;
  /// shard.backend = "gloo": launch.gpus may list fewer GPUs than ranks, and consecutive ranks
  /// then share one (NCCL needs a GPU per rank).
  bool shareGpus = false;
};

/// launch.env with its "${NAME}" references resolved from this process's environment (the one
/// that starts the run; spec::resolve_launch_env), as every launcher hands it to the ranks.
[[nodiscard]] Result<std::map<std::string, std::string>> resolvedLaunchEnv(
    const spec::LaunchSection& launch);

/// A fresh run's rendezvous token (SHARDSCOPE_RDZV_TOKEN): 32 random bytes from the system's
/// generator, as 64 hex digits. Every launcher puts it in the ranks' environment or an owner-only
/// file, never on a command line; the trainer's ranks prove they know it at the store.
QString rendezvousToken();

/// Creates a run directory (and its missing parents) with the run directory itself owner-only
/// (0700) from its creation: its files, rank logs included, may echo secrets. A directory that
/// already exists (a resumed run) is made 0700. False when it cannot be created.
[[nodiscard]] bool makeRunDir(const QString& path);

/// Where a run's ranks are: persisted as JSON in the run log so any backend can reattach.
struct RunLocation {
  QString kind;        // "local", "ssh", "slurm"
  QString host;        // ssh alias or Slurm submit host; empty when local
  QStringList hosts;   // ssh multi-node: one entry per node, node order
  QString runDir;      // run directory where the ranks run (remote path for ssh)
  QString jobId;       // Slurm job id
  QList<qint64> pids;  // local/ssh: rank process ids (each a session leader), rank order
  /// local: each pid's start time (/proc/PID/stat field 22, clock ticks after boot), so that
  /// attach() tells a rank from a later process that reuses its pid; empty when unknown.
  QList<qint64> startTicks;
  /// ssh: each host's /proc/sys/kernel/random/boot_id when the ranks started (node order), so a
  /// rebooted host's recycled pids are never signalled as this run's; empty when unknown.
  QStringList bootIds;
  int worldSize = 0;

  QJsonObject toJson() const;
  static Result<RunLocation> fromJson(const QJsonObject& json);
};

/// What the launcher knows about one rank's process.
struct RankState {
  enum class Phase { pending, running, exited, unknown };
  int rank = 0;
  Phase phase = Phase::pending;
  int exitCode = -1;  // when exited normally
  int signal = 0;     // when killed by a signal (then exitCode is -1)
  QString host;       // empty for local
};

/// A rank file as it is now (RunHandle::statRankFile).
struct RankFileStat {
  bool exists = false;
  qint64 size = 0;  ///< bytes; 0 when the file does not exist
};

/// A started (or re-attached) run. Lives in the thread that created it; polls on its own timer
/// and emits signals. Destroying a handle never stops the ranks.
class RunHandle : public QObject {
  Q_OBJECT
 public:
  /// Refuses the dashboard's GUI thread (backend/guithread.h): every start and attach makes one.
  explicit RunHandle(QObject* parent = nullptr);
  ~RunHandle() override = default;

  virtual RunLocation location() const = 0;
  virtual QList<RankState> ranks() const = 0;
  /// Up to maxBytes of rank `rank`'s events file from byte `offset` (empty when nothing new).
  virtual Result<QByteArray> readEvents(int rank, qint64 offset, qint64 maxBytes) = 0;
  /// Up to maxBytes of rank `rank`'s stderr log from byte `offset`.
  virtual Result<QByteArray> readLog(int rank, qint64 offset, qint64 maxBytes) = 0;
  /// Whether rank `rank`'s events or log file exists and its size: how the monitor sees a file
  /// truncated or deleted from outside while it follows it.
  virtual Result<RankFileStat> statRankFile(int rank, RankFile file) = 0;
  /// Graceful stop: SIGTERM to every rank (scancel --signal=TERM on Slurm), SIGKILL after
  /// launch.grace_s for ranks still alive.
  virtual void stop() = 0;
  /// Immediate SIGKILL of every rank (scancel --signal=KILL).
  virtual void kill() = 0;

 signals:
  /// A rank started, exited or became unreachable/reachable.
  void ranksChanged();
  /// An events or log file grew (best effort; readers must also poll).
  void filesGrew();
  /// The connection to the ranks' machine was lost (ssh) or restored.
  void connectionChanged(bool connected, const QString& message);
};

/// Starts runs on one kind of target.
class Launcher {
 public:
  /// Refuses the dashboard's GUI thread (backend/guithread.h).
  Launcher();
  virtual ~Launcher() = default;
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;
  virtual QString kind() const = 0;
  [[nodiscard]] virtual Result<std::unique_ptr<RunHandle>> start(const LaunchRequest& request) = 0;
  [[nodiscard]] virtual Result<std::unique_ptr<RunHandle>> attach(const RunLocation& location) = 0;
};

}  // namespace shardscope::backend
